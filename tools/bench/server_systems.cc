#include "tools/bench/server_systems.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "psdb/table_spec.h"
#include "rpc/client/remote_client.h"
#include "tools/bench/timing.h"
#include "tools/bench/zipf.h"
#include "tools/common/child_process.h"
#include "tools/common/reserved_port.h"
#include "util/status_macros.h"

namespace psdb::bench {

absl::Status ServerSystem::Push(int, absl::Span<const uint64_t>) {
  return absl::UnimplementedError(absl::StrCat(id_, " does not push"));
}

absl::StatusOr<ProcessMemory> ServerSystem::ServerMemory() {
  return absl::UnimplementedError(absl::StrCat(id_, " has no server process"));
}

TableSpec BenchTableSpec(const ServerSystemOptions& o) {
  TableSpec spec;
  spec.name = "emb";
  spec.dim = o.dim;
  spec.seed = o.seed;
  return spec;
}

namespace {

using Clock = std::chrono::steady_clock;

// Loads all rows: load(thread, begin, end) over [0, rows) in batch_keys
// chunks shared out across the threads; returns the wall time.
absl::StatusOr<double> LoadAll(
    const ServerSystemOptions& o,
    const std::function<absl::Status(int, uint64_t, uint64_t)>& load) {
  std::atomic<uint64_t> next{0};
  return RunThreads(o.threads, [&](int t) -> absl::Status {
    while (true) {
      const uint64_t begin = next.fetch_add(o.batch_keys);
      if (begin >= o.rows) return absl::OkStatus();
      PSDB_RETURN_IF_ERROR(
          load(t, begin, std::min(o.rows, begin + o.batch_keys)));
    }
  });
}

// ---- psdb ------------------------------------------------------------------

// `n` RemoteClients of the one server at `address`, one connection each.
absl::StatusOr<std::vector<std::unique_ptr<rpc::RemoteClient>>> ConnectClients(
    const std::string& address, int n) {
  std::vector<std::unique_ptr<rpc::RemoteClient>> clients;
  for (int t = 0; t < n; ++t) {
    rpc::RemoteClientOptions options;
    PSDB_ASSIGN_OR_RETURN(options.cluster,
                          ClusterMap::FromAddresses({address}));
    options.call_timeout = absl::Seconds(120);
    PSDB_ASSIGN_OR_RETURN(auto client, rpc::RemoteClient::Open(options));
    clients.push_back(std::move(client));
  }
  return clients;
}

class PsdbSystem : public ServerSystem {
 public:
  PsdbSystem() : ServerSystem("psdb", "psdb: ps-server + RemoteClient") {}

  absl::Status Open(const ServerSystemOptions& o) {
    const uint64_t row_bytes = o.dim * 2 * sizeof(float) + 64;
    const uint64_t budget_mb = o.psdb_memory_budget_mb != 0
                                   ? o.psdb_memory_budget_mb
                                   : (o.rows * row_bytes * 2 >> 20) + 256;
    tools::ChildOptions server;
    server.binary = o.ps_server;
    server.args = {absl::StrCat("--data_dir=", o.dir, "/psdb"), "--port=0",
                   absl::StrCat("--memory_budget_mb=", budget_mb),
                   absl::StrCat("--max_batch_keys=",
                                std::max<uint64_t>(65536, o.batch_keys)),
                   absl::StrCat("--max_dim=", std::max(1024, o.dim))};
    server.ready_prefix = "listening on ";
    server.destroy_signal = SIGTERM;  // it closes its store
    PSDB_ASSIGN_OR_RETURN(server_, tools::ChildProcess::Start(server));
    PSDB_ASSIGN_OR_RETURN(clients_,
                          ConnectClients(server_->ready_value(), o.threads));
    TableSpec spec = BenchTableSpec(o);
    spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
    spec.optimizer.learning_rate = 0.05f;
    for (auto& c : clients_) PSDB_RETURN_IF_ERROR(c->CreateTable(spec));
    out_.assign(o.threads, std::vector<float>(o.batch_keys * o.dim));
    grads_.assign(o.batch_keys * o.dim, 0.001f);
    dim_ = o.dim;
    // Get-or-create: pulling every key once creates every row.
    PSDB_ASSIGN_OR_RETURN(load_s_,
                          LoadAll(o, [&](int t, uint64_t begin, uint64_t end) {
                            std::vector<uint64_t> keys;
                            for (uint64_t k = begin; k < end; ++k) {
                              keys.push_back(ScrambleKey(k, o.seed));
                            }
                            return Pull(t, keys);
                          }));
    return absl::OkStatus();
  }

  absl::Status Pull(int thread, absl::Span<const uint64_t> keys) override {
    return clients_[thread]->Pull(
        "emb", keys, absl::MakeSpan(out_[thread]).first(keys.size() * dim_),
        {});
  }
  bool has_push() const override { return true; }
  absl::Status Push(int thread, absl::Span<const uint64_t> keys) override {
    return clients_[thread]->Push(
        "emb", keys, absl::MakeConstSpan(grads_).first(keys.size() * dim_), {});
  }
  absl::StatusOr<ProcessMemory> ServerMemory() override {
    return ReadProcessMemory(server_->pid());
  }

 private:
  // Declared before the clients so that they close before it stops.
  std::unique_ptr<tools::ChildProcess> server_;
  std::vector<std::unique_ptr<rpc::RemoteClient>> clients_;
  std::vector<std::vector<float>> out_;  // per thread
  std::vector<float> grads_;
  int dim_ = 0;
};

// The serving replica: `ps-server --serve_from`, read with serving pulls.
class ServingReplicaSystem : public ServingReplica {
 public:
  ServingReplicaSystem(std::string id, std::string label)
      : ServingReplica(std::move(id), std::move(label)) {}

  absl::Status Open(const ServerSystemOptions& o,
                    const ServingReplicaOptions& r) {
    tools::ChildOptions server;
    server.binary = o.ps_server;
    server.args = {absl::StrCat("--serve_from=", r.root), "--port=0",
                   absl::StrCat("--memory_budget_mb=", r.memory_budget_mb),
                   absl::StrCat("--follow_interval_s=", r.follow_interval_s),
                   absl::StrCat("--max_batch_keys=",
                                std::max<uint64_t>(65536, o.batch_keys))};
    server.ready_prefix = "listening on ";
    server.log = r.log;
    // It verifies every row of the checkpoint before it serves.
    server.timeout = absl::Minutes(10);
    server.destroy_signal = SIGTERM;
    const auto t0 = Clock::now();
    PSDB_ASSIGN_OR_RETURN(server_, tools::ChildProcess::Start(server));
    load_s_ = std::chrono::duration<double>(Clock::now() - t0).count();
    // One more client than threads: the last one asks for Stats.
    PSDB_ASSIGN_OR_RETURN(
        clients_, ConnectClients(server_->ready_value(), o.threads + 1));
    out_.assign(o.threads, std::vector<float>(o.batch_keys * o.dim));
    dim_ = o.dim;
    return absl::OkStatus();
  }

  absl::Status Pull(int thread, absl::Span<const uint64_t> keys) override {
    return clients_[thread]->Pull(
        "emb", keys, absl::MakeSpan(out_[thread]).first(keys.size() * dim_),
        {.serving = true});
  }
  absl::StatusOr<StoreStats> Stats() override {
    return clients_.back()->Stats();
  }
  absl::StatusOr<ProcessMemory> ServerMemory() override {
    return ReadProcessMemory(server_->pid());
  }

 private:
  // Declared before the clients so that they close before it stops.
  std::unique_ptr<tools::ChildProcess> server_;
  std::vector<std::unique_ptr<rpc::RemoteClient>> clients_;
  std::vector<std::vector<float>> out_;  // per thread
  int dim_ = 0;
};

// ---- Redis -----------------------------------------------------------------

struct RedisDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Redis = std::unique_ptr<redisContext, RedisDeleter>;

absl::StatusOr<Redis> ConnectRedis(int port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err) {
    const std::string err = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    return absl::UnavailableError(absl::StrCat("redis connect: ", err));
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return Redis(c);
}

// Sends `keys` as pipelined commands of at most `chunk` keys: MGET (values
// copied into out) or MSET (values from `rows`).
absl::Status RedisBatch(redisContext* c, bool set,
                        absl::Span<const uint64_t> keys, size_t value_bytes,
                        size_t chunk, const char* rows, char* out) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  size_t commands = 0;
  for (size_t begin = 0; begin < keys.size(); begin += chunk) {
    const size_t end = std::min(keys.size(), begin + chunk);
    argv.clear();
    lens.clear();
    argv.push_back(set ? "MSET" : "MGET");
    lens.push_back(4);
    for (size_t i = begin; i < end; ++i) {
      argv.push_back(reinterpret_cast<const char*>(&keys[i]));
      lens.push_back(sizeof(uint64_t));
      if (set) {
        argv.push_back(rows + i * value_bytes);
        lens.push_back(value_bytes);
      }
    }
    if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(),
                               lens.data()) != REDIS_OK) {
      return absl::InternalError(absl::StrCat("redis append: ", c->errstr));
    }
    ++commands;
  }
  size_t begin = 0;
  for (size_t cmd = 0; cmd < commands; ++cmd, begin += chunk) {
    void* reply_v = nullptr;
    if (redisGetReply(c, &reply_v) != REDIS_OK || reply_v == nullptr) {
      return absl::UnavailableError(absl::StrCat("redis reply: ", c->errstr));
    }
    redisReply* reply = static_cast<redisReply*>(reply_v);
    absl::Status status;
    if (reply->type == REDIS_REPLY_ERROR) {
      status = absl::InternalError(absl::StrCat("redis: ", reply->str));
    } else if (!set) {
      for (size_t j = 0; j < reply->elements; ++j) {
        const redisReply* e = reply->element[j];
        if (e->type == REDIS_REPLY_STRING && e->len == value_bytes) {
          std::memcpy(out + (begin + j) * value_bytes, e->str, value_bytes);
        } else {
          status = absl::DataLossError("redis: missing row");
        }
      }
    }
    freeReplyObject(reply);
    PSDB_RETURN_IF_ERROR(status);
  }
  return absl::OkStatus();
}

class RedisSystem : public ServerSystem {
 public:
  RedisSystem()
      : ServerSystem("redis", "redis: pipelined MGET/MSET (hiredis)") {}

  absl::Status Open(const ServerSystemOptions& o) {
    const tools::ReservedPort held;  // until redis listens on it
    const int port = held.port();
    tools::ChildOptions server;
    server.binary = o.redis_server;
    server.args = {
        "--port", absl::StrCat(port), "--bind", "127.0.0.1", "--save",
        "",       "--appendonly",     "no",     "--dir",     o.dir};
    server.destroy_signal = SIGTERM;
    PSDB_ASSIGN_OR_RETURN(server_, tools::ChildProcess::Start(server));
    // Ready when it accepts a connection (its "Ready to accept connections"
    // line starts with a pid and a timestamp, not a fixed prefix).
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::Duration backoff = absl::Milliseconds(5);
    absl::StatusOr<Redis> first = ConnectRedis(port);
    while (!first.ok() && absl::Now() < deadline) {
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, absl::Milliseconds(200));
      first = ConnectRedis(port);
    }
    if (!first.ok()) {
      return absl::UnavailableError(absl::StrCat(
          o.redis_server, " accepts no connection on port ", port, ": ",
          first.status().message(), "; its log:\n", server_->Stderr()));
    }
    conns_.push_back(*std::move(first));
    for (int t = 1; t < o.threads; ++t) {
      PSDB_ASSIGN_OR_RETURN(Redis c, ConnectRedis(port));
      conns_.push_back(std::move(c));
    }
    value_bytes_ = o.dim * sizeof(float);
    chunk_ = o.redis_chunk;
    rows_.assign(o.threads, std::vector<float>(o.batch_keys * o.dim));
    // The same initial values psdb creates, written with MSET.
    const TableSpec spec = BenchTableSpec(o);
    PSDB_ASSIGN_OR_RETURN(
        load_s_, LoadAll(o, [&](int t, uint64_t begin, uint64_t end) {
          std::vector<uint64_t> keys;
          for (uint64_t k = begin; k < end; ++k) {
            keys.push_back(ScrambleKey(k, o.seed));
            InitializeRow(
                spec, keys.back(),
                absl::MakeSpan(rows_[t]).subspan((k - begin) * o.dim, o.dim));
          }
          return Push(t, keys);
        }));
    return absl::OkStatus();
  }

  absl::Status Pull(int thread, absl::Span<const uint64_t> keys) override {
    return RedisBatch(conns_[thread].get(), false, keys, value_bytes_, chunk_,
                      nullptr, reinterpret_cast<char*>(rows_[thread].data()));
  }
  bool has_push() const override { return true; }
  // Writes back the thread's buffer (the rows it last read or loaded).
  absl::Status Push(int thread, absl::Span<const uint64_t> keys) override {
    return RedisBatch(conns_[thread].get(), true, keys, value_bytes_, chunk_,
                      reinterpret_cast<const char*>(rows_[thread].data()),
                      nullptr);
  }
  absl::StatusOr<ProcessMemory> ServerMemory() override {
    return ReadProcessMemory(server_->pid());
  }

 private:
  std::unique_ptr<tools::ChildProcess> server_;
  std::vector<Redis> conns_;
  std::vector<std::vector<float>> rows_;  // per thread
  size_t value_bytes_ = 0;
  size_t chunk_ = 0;
};

// ---- raw TCP limit ---------------------------------------------------------

bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t r = write(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Request: u32 n, then n u64 keys; response: n * dim float32.
class TcpLimitSystem : public ServerSystem {
 public:
  TcpLimitSystem()
      : ServerSystem("tcp_limit", "limit: hash-map gather over raw TCP") {}

  ~TcpLimitSystem() override {
    // EOF on each connection ends its handler.
    for (int fd : conns_) shutdown(fd, SHUT_WR);
    for (std::thread& h : handlers_) h.join();
    for (int fd : conns_) close(fd);
    if (listener_ >= 0) close(listener_);
  }

  absl::Status Open(const ServerSystemOptions& o) {
    dim_ = o.dim;
    row_bytes_ = o.dim * sizeof(float);
    const TableSpec spec = BenchTableSpec(o);
    index_.reserve(o.rows);
    table_.resize(o.rows * o.dim);
    const auto t0 = Clock::now();
    for (uint64_t k = 0; k < o.rows; ++k) {
      const uint64_t key = ScrambleKey(k, o.seed);
      index_[key] = static_cast<uint32_t>(k);
      InitializeRow(spec, key,
                    absl::MakeSpan(table_).subspan(k * o.dim, o.dim));
    }
    load_s_ = std::chrono::duration<double>(Clock::now() - t0).count();

    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
            0 ||
        listen(listener_, 64) != 0) {
      return absl::InternalError("tcp limit: bind/listen failed");
    }
    socklen_t len = sizeof(addr);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    std::thread acceptor([this, threads = o.threads] {
      for (int t = 0; t < threads; ++t) {
        const int fd = accept(listener_, nullptr, nullptr);
        if (fd < 0) return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        handlers_.emplace_back([this, fd] { Serve(fd); });
      }
    });
    absl::Status status;
    for (int t = 0; t < o.threads && status.ok(); ++t) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(fd);
        status = absl::InternalError("tcp limit: connect failed");
        // Unblocks the acceptor's accept().
        shutdown(listener_, SHUT_RDWR);
        break;
      }
      conns_.push_back(fd);
    }
    acceptor.join();
    PSDB_RETURN_IF_ERROR(status);
    out_.assign(o.threads, std::vector<char>(o.batch_keys * row_bytes_));
    unique_rows_.assign(o.threads,
                        std::vector<char>(o.batch_keys * row_bytes_));
    req_.resize(o.threads);
    inverse_.resize(o.threads);
    return absl::OkStatus();
  }

  absl::Status Pull(int t, absl::Span<const uint64_t> keys) override {
    // De-duplicate first, as RemoteClient does, so both ship the same rows
    // and the limit stays a limit.
    absl::flat_hash_map<uint64_t, uint32_t> seen;
    seen.reserve(keys.size());
    req_[t].resize(sizeof(uint32_t) + keys.size() * sizeof(uint64_t));
    char* key_out = req_[t].data() + sizeof(uint32_t);
    inverse_[t].resize(keys.size());
    uint32_t n = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, inserted] = seen.try_emplace(keys[i], n);
      if (inserted) {
        std::memcpy(key_out + n * sizeof(uint64_t), &keys[i], sizeof(uint64_t));
        ++n;
      }
      inverse_[t][i] = it->second;
    }
    std::memcpy(req_[t].data(), &n, sizeof(n));
    if (!WriteFull(conns_[t], req_[t].data(),
                   sizeof(n) + n * sizeof(uint64_t)) ||
        !ReadFull(conns_[t], unique_rows_[t].data(), n * row_bytes_)) {
      return absl::UnavailableError("tcp limit: connection lost");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      std::memcpy(out_[t].data() + i * row_bytes_,
                  unique_rows_[t].data() + inverse_[t][i] * row_bytes_,
                  row_bytes_);
    }
    return absl::OkStatus();
  }

 private:
  // One connection's handler: answers requests until EOF.
  void Serve(int fd) {
    std::vector<uint64_t> keys;
    std::vector<char> buf;
    uint32_t n = 0;
    while (ReadFull(fd, &n, sizeof(n))) {
      keys.resize(n);
      buf.resize(n * row_bytes_);
      if (!ReadFull(fd, keys.data(), n * sizeof(uint64_t))) break;
      for (uint32_t i = 0; i < n; ++i) {
        auto it = index_.find(keys[i]);
        const float* src = it == index_.end()
                               ? table_.data()
                               : table_.data() + it->second * dim_;
        std::memcpy(buf.data() + i * row_bytes_, src, row_bytes_);
      }
      if (!WriteFull(fd, buf.data(), buf.size())) break;
    }
    close(fd);
  }

  int dim_ = 0;
  size_t row_bytes_ = 0;
  absl::flat_hash_map<uint64_t, uint32_t> index_;
  std::vector<float> table_;
  int listener_ = -1;
  std::vector<std::thread> handlers_;  // written by the acceptor in Open
  std::vector<int> conns_;             // client side, one per thread
  // Per client thread.
  std::vector<std::vector<char>> out_;
  std::vector<std::vector<char>> unique_rows_;
  std::vector<std::vector<char>> req_;
  std::vector<std::vector<uint32_t>> inverse_;
};

template <typename System>
absl::StatusOr<std::unique_ptr<ServerSystem>> OpenSystem(
    const ServerSystemOptions& options) {
  auto system = std::make_unique<System>();
  PSDB_RETURN_IF_ERROR(system->Open(options));
  return system;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerSystem>> OpenPsdbSystem(
    const ServerSystemOptions& options) {
  return OpenSystem<PsdbSystem>(options);
}

absl::StatusOr<std::unique_ptr<ServingReplica>> OpenServingReplica(
    const ServerSystemOptions& options, const ServingReplicaOptions& replica) {
  auto system =
      std::make_unique<ServingReplicaSystem>(replica.id, replica.label);
  PSDB_RETURN_IF_ERROR(system->Open(options, replica));
  return system;
}

absl::StatusOr<std::unique_ptr<ServerSystem>> OpenRedisSystem(
    const ServerSystemOptions& options) {
  return OpenSystem<RedisSystem>(options);
}

absl::StatusOr<std::unique_ptr<ServerSystem>> OpenTcpLimitSystem(
    const ServerSystemOptions& options) {
  return OpenSystem<TcpLimitSystem>(options);
}

}  // namespace psdb::bench
