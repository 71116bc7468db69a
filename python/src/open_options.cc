#include "python/src/open_options.h"

#include <pybind11/stl.h>

#include <functional>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "python/src/errors.h"

namespace psdb::python {

namespace py = pybind11;

namespace {

template <typename T>
T Cast(const std::string& name, const py::handle& value) {
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(absl::StrCat("option ", name, ": cannot use ",
                                      std::string(py::repr(value)), " (",
                                      py::type_id<T>(), ")"));
  }
}

absl::Duration CastSeconds(const std::string& name, const py::handle& value) {
  const double s = Cast<double>(name, value);
  if (!(s >= 0))
    ThrowValueError(absl::StrCat("option ", name, " must be >= 0"));
  return absl::Seconds(s);
}

}  // namespace

OpenOptions ParseOpenOptions(const std::string& url, const py::kwargs& kwargs) {
  using Setter =
      std::function<void(OpenOptions*, const std::string&, const py::handle&)>;
  struct Field {
    enum Scope { kLocal, kRemote, kBoth } scope;
    Setter set;
  };
  // One entry per option; the scope says which URLs it applies to.
  static const auto* const kFields = new std::map<std::string, Field>{
      {"memory_budget_bytes",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.memory_budget_bytes = Cast<uint64_t>(n, v);
        }}},
      {"eviction",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          const std::string s = Cast<std::string>(n, v);
          if (s == "clock") {
            o->local.eviction = EvictionPolicy::kClock;
          } else if (s == "sampled_lru") {
            o->local.eviction = EvictionPolicy::kSampledLru;
          } else {
            ThrowValueError(absl::StrCat("option eviction: unknown policy \"",
                                         s, "\" (clock | sampled_lru)"));
          }
        }}},
      {"index_stripes",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.index_stripes = Cast<int>(n, v);
        }}},
      {"max_batch_keys",
       {Field::kBoth,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.max_batch_keys = o->remote.max_batch_keys =
              Cast<size_t>(n, v);
        }}},
      {"background_eviction",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.background_eviction = Cast<bool>(n, v);
        }}},
      {"rocksdb_block_cache_bytes",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.rocksdb_block_cache_bytes = Cast<uint64_t>(n, v);
        }}},
      {"create_if_missing",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.create_if_missing = Cast<bool>(n, v);
        }}},
      {"restore_from",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.restore_from = Cast<std::string>(n, v);
        }}},
      {"shard_id",
       {Field::kLocal,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->local.shard_id = Cast<int>(n, v);
        }}},
      {"call_timeout_s",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.call_timeout = CastSeconds(n, v);
        }}},
      {"replica_attempt_timeout_s",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.replica_attempt_timeout = CastSeconds(n, v);
        }}},
      {"replica_avoid_time_s",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.replica_avoid_time = CastSeconds(n, v);
        }}},
      {"max_attempts",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.max_attempts = Cast<int>(n, v);
        }}},
      {"initial_backoff_s",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.initial_backoff = CastSeconds(n, v);
        }}},
      {"max_backoff_s",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.max_backoff = CastSeconds(n, v);
        }}},
      {"push_to_every_server",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.push_to_every_server = Cast<bool>(n, v);
        }}},
      {"worker_id",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.worker_id = Cast<std::optional<int32_t>>(n, v);
        }}},
      {"tls_ca_file",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.tls.ca_file = Cast<std::string>(n, v);
        }}},
      {"tls_cert_file",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.tls.cert_file = Cast<std::string>(n, v);
        }}},
      {"tls_key_file",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.tls.key_file = Cast<std::string>(n, v);
        }}},
      {"tls_server_name_override",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.tls.server_name_override = Cast<std::string>(n, v);
        }}},
      {"tls_insecure",
       {Field::kRemote,
        [](OpenOptions* o, const std::string& n, const py::handle& v) {
          o->remote.tls.insecure = Cast<bool>(n, v);
        }}},
  };
  const bool local = absl::StartsWith(url, "local:");
  OpenOptions options;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key);
    const auto it = kFields->find(name);
    if (it == kFields->end()) {
      ThrowValueError(absl::StrCat("unknown option \"", name, "\""));
    }
    const Field& field = it->second;
    if ((field.scope == Field::kLocal && !local) ||
        (field.scope == Field::kRemote && local)) {
      ThrowValueError(absl::StrCat("option \"", name, "\" applies to ",
                                   field.scope == Field::kLocal
                                       ? "local: URLs only"
                                       : "servers: and scheduler: URLs only"));
    }
    field.set(&options, name, value);
  }
  return options;
}

}  // namespace psdb::python
