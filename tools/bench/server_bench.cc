#include "tools/bench/server_bench.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/client/remote_client.h"
#include "store/table_spec.h"
#include "tools/bench/machine.h"
#include "tools/bench/zipf.h"
#include "tools/common/args.h"
#include "tools/common/text.h"
#include "util/status_macros.h"

namespace psdb::bench {
namespace {

constexpr char kUsage[] = R"(usage: ps-bench server [--json] [flags]

Pulls and pushes of Zipf-distributed batches over loopback, in one run, on:
psdb (one ps-server process + RemoteClient, Adagrad applied server-side),
Redis (redis-server started by the benchmark; pipelined MGET/MSET of the same
rows as dim*4-byte values via hiredis) and a raw-TCP gather server with no
RPC layer (the limit; pulls only; its client de-duplicates each batch as
RemoteClient does). Same client threads for all.

flags:
  --rows=N           keys, all created before measuring (default 1048576)
  --dim=D            floats per row (default 64)
  --batch_keys=N     keys per batch (default 4096)
  --batches=N        measured batches per client thread (default 64)
  --warmup_batches=N warm-up batches per thread (default 8)
  --threads=T        client threads, one connection each (default 2)
  --alpha=A          Zipf exponent (default 1.05)
  --redis_chunk=N    keys per pipelined MGET/MSET command (default 512)
  --seed=S           stream seed (default 1)
  --ps_server=PATH   ps-server binary (default: next to ps-bench)
  --redis_server=P   redis-server binary (default: redis-server)
  --dir=PATH         scratch directory (default: fresh under $TMPDIR or /tmp)
  --json             print one JSON object instead of the report
)";

struct Params {
  uint64_t rows = 1 << 20;
  int dim = 64;
  uint64_t batch_keys = 4096;
  uint64_t batches = 64;
  uint64_t warmup_batches = 8;
  int threads = 2;
  double alpha = 1.05;
  uint64_t redis_chunk = 512;
  uint64_t seed = 1;
  std::string ps_server;
  std::string redis_server = "redis-server";
  std::string dir;
  bool json = false;
};

absl::StatusOr<Params> ParseParams(int argc, const char* const* argv) {
  PSDB_ASSIGN_OR_RETURN(tools::Args args,
                        tools::Args::Parse(argc, argv, 1, {"json"}));
  PSDB_RETURN_IF_ERROR(
      args.CheckKnown({"rows", "dim", "batch_keys", "batches", "warmup_batches",
                       "threads", "alpha", "redis_chunk", "seed", "ps_server",
                       "redis_server", "dir", "json"}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  Params p;
  PSDB_ASSIGN_OR_RETURN(p.rows, args.GetInt("rows", p.rows, 1, 1ll << 30));
  PSDB_ASSIGN_OR_RETURN(int64_t dim, args.GetInt("dim", p.dim, 1, 1024));
  p.dim = static_cast<int>(dim);
  PSDB_ASSIGN_OR_RETURN(p.batch_keys,
                        args.GetInt("batch_keys", p.batch_keys, 1, 65536));
  PSDB_ASSIGN_OR_RETURN(p.batches,
                        args.GetInt("batches", p.batches, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(
      p.warmup_batches,
      args.GetInt("warmup_batches", p.warmup_batches, 0, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(int64_t threads,
                        args.GetInt("threads", p.threads, 1, 256));
  p.threads = static_cast<int>(threads);
  PSDB_ASSIGN_OR_RETURN(p.alpha, args.GetDouble("alpha", p.alpha, 0.01, 10));
  PSDB_ASSIGN_OR_RETURN(p.redis_chunk,
                        args.GetInt("redis_chunk", p.redis_chunk, 1, 1 << 20));
  PSDB_ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  p.seed = static_cast<uint64_t>(seed);
  p.ps_server = args.GetString("ps_server", "");
  if (p.ps_server.empty()) {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    p.ps_server = (self.parent_path() / "ps-server").string();
  }
  p.redis_server = args.GetString("redis_server", p.redis_server);
  p.dir = args.GetString("dir", "");
  PSDB_ASSIGN_OR_RETURN(p.json, args.GetBool("json"));
  return p;
}

using Clock = std::chrono::steady_clock;
double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Runs fn(t) on `threads` threads at once; returns the wall time and the
// first error.
absl::StatusOr<double> RunThreads(int threads,
                                  const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(threads);
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { status[t] = fn(t); });
  }
  for (std::thread& th : pool) th.join();
  const double s = Seconds(Clock::now() - t0);
  for (const absl::Status& st : status) PSDB_RETURN_IF_ERROR(st);
  return s;
}

// A child process; SIGTERM and reaped on destruction.
class Child {
 public:
  // Starts argv; if `wait_for` is non-empty, reads stdout until a line
  // containing it and returns that line in *line.
  static absl::StatusOr<std::unique_ptr<Child>> Start(
      const std::vector<std::string>& argv, absl::string_view wait_for,
      std::string* line) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe");
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (std::string& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) return absl::InternalError("fork");
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDERR_FILENO);
      execvp(cargv[0], cargv.data());
      _exit(127);
    }
    close(out[1]);
    auto child = std::unique_ptr<Child>(new Child(pid, out[0]));
    if (wait_for.empty()) return child;
    std::string buffer;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      const size_t pos = buffer.find(std::string(wait_for));
      if (pos != std::string::npos) {
        const size_t eol = buffer.find('\n', pos);
        if (eol != std::string::npos) {
          *line = buffer.substr(pos, eol - pos);
          return child;
        }
      }
      pollfd pfd{out[0], POLLIN, 0};
      if (poll(&pfd, 1, 1000) <= 0) continue;
      char chunk[1024];
      const ssize_t n = read(out[0], chunk, sizeof(chunk));
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
    }
    return absl::UnavailableError(
        absl::StrCat(argv[0], " did not print '", wait_for, "'"));
  }
  ~Child() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    close(fd_);
  }

 private:
  Child(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  pid_t pid_;
  int fd_;
};

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct Result {
  std::string id;
  std::string label;
  double load_s = 0;
  double pull_s = 0;
  double push_s = -1;  // < 0: not measured
  uint64_t keys = 0;   // keys per phase (all threads)
  double PullRate() const { return keys / pull_s; }
  double PushRate() const { return push_s > 0 ? keys / push_s : 0; }
};

// Everything the three systems share: the key streams and the gradients.
struct Workload {
  Params p;
  std::vector<uint64_t> stream;  // threads * (warmup + batches) batches
  std::vector<float> grads;      // one batch of gradients
  absl::Span<const uint64_t> Batch(int thread, uint64_t b) const {
    const uint64_t per_thread = p.warmup_batches + p.batches;
    return absl::MakeConstSpan(stream).subspan(
        (thread * per_thread + b) * p.batch_keys, p.batch_keys);
  }
  // The keys of all rows, for loading.
  uint64_t Key(uint64_t rank) const { return ScrambleKey(rank, p.seed); }
};

// Loads all rows: `load(begin, end)` over [0, rows) split across threads.
absl::StatusOr<double> LoadAll(
    const Workload& w,
    const std::function<absl::Status(int, uint64_t, uint64_t)>& load) {
  const uint64_t per = w.p.batch_keys;
  std::atomic<uint64_t> next{0};
  return RunThreads(w.p.threads, [&](int t) -> absl::Status {
    while (true) {
      const uint64_t begin = next.fetch_add(per);
      if (begin >= w.p.rows) return absl::OkStatus();
      PSDB_RETURN_IF_ERROR(load(t, begin, std::min(w.p.rows, begin + per)));
    }
  });
}

// Warm-up, then timed pulls (and pushes when `push` is set) of each thread's
// batches.
absl::Status Measure(
    const Workload& w, Result* r,
    const std::function<absl::Status(int, absl::Span<const uint64_t>)>& pull,
    const std::function<absl::Status(int, absl::Span<const uint64_t>)>& push) {
  PSDB_RETURN_IF_ERROR(RunThreads(w.p.threads, [&](int t) -> absl::Status {
                         for (uint64_t b = 0; b < w.p.warmup_batches; ++b) {
                           PSDB_RETURN_IF_ERROR(pull(t, w.Batch(t, b)));
                         }
                         return absl::OkStatus();
                       }).status());
  r->keys = w.p.threads * w.p.batches * w.p.batch_keys;
  PSDB_ASSIGN_OR_RETURN(
      r->pull_s, RunThreads(w.p.threads, [&](int t) -> absl::Status {
        for (uint64_t b = 0; b < w.p.batches; ++b) {
          PSDB_RETURN_IF_ERROR(pull(t, w.Batch(t, w.p.warmup_batches + b)));
        }
        return absl::OkStatus();
      }));
  if (!push) return absl::OkStatus();
  PSDB_ASSIGN_OR_RETURN(
      r->push_s, RunThreads(w.p.threads, [&](int t) -> absl::Status {
        for (uint64_t b = 0; b < w.p.batches; ++b) {
          PSDB_RETURN_IF_ERROR(push(t, w.Batch(t, w.p.warmup_batches + b)));
        }
        return absl::OkStatus();
      }));
  return absl::OkStatus();
}

// ---- psdb ----------------------------------------------------------------

absl::StatusOr<Result> RunPsdb(const Workload& w, const std::string& dir) {
  const Params& p = w.p;
  const uint64_t row_bytes = p.dim * 2 * sizeof(float) + 64;
  const uint64_t budget_mb = (p.rows * row_bytes * 2 >> 20) + 256;
  std::string line;
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<Child> server,
      Child::Start({p.ps_server, absl::StrCat("--data_dir=", dir, "/psdb"),
                    "--port=0", absl::StrCat("--memory_budget_mb=", budget_mb),
                    absl::StrCat("--max_batch_keys=",
                                 std::max<uint64_t>(65536, p.batch_keys)),
                    absl::StrCat("--max_dim=", std::max(1024, p.dim))},
                   "listening on ", &line));
  const std::string address = line.substr(strlen("listening on "));
  std::vector<std::unique_ptr<rpc::RemoteClient>> clients;
  for (int t = 0; t < p.threads; ++t) {
    rpc::RemoteClientOptions options;
    PSDB_ASSIGN_OR_RETURN(options.cluster,
                          ClusterMap::FromAddresses({address}));
    options.call_timeout = absl::Seconds(120);
    PSDB_ASSIGN_OR_RETURN(auto client, rpc::RemoteClient::Open(options));
    clients.push_back(std::move(client));
  }
  TableSpec spec;
  spec.name = "emb";
  spec.dim = p.dim;
  spec.seed = p.seed;
  spec.optimizer.kind = optim::OptimizerKind::kAdagrad;
  spec.optimizer.learning_rate = 0.05f;
  for (auto& c : clients) PSDB_RETURN_IF_ERROR(c->CreateTable(spec));

  Result r{"psdb", "psdb: ps-server + RemoteClient"};
  std::vector<std::vector<float>> out(p.threads,
                                      std::vector<float>(p.batch_keys * p.dim));
  PSDB_ASSIGN_OR_RETURN(
      r.load_s, LoadAll(w, [&](int t, uint64_t begin, uint64_t end) {
        std::vector<uint64_t> keys;
        for (uint64_t k = begin; k < end; ++k) keys.push_back(w.Key(k));
        return clients[t]->Pull(
            "emb", keys, absl::MakeSpan(out[t]).first(keys.size() * p.dim), {});
      }));
  std::vector<int64_t> steps(p.threads, 0);
  PSDB_RETURN_IF_ERROR(Measure(
      w, &r,
      [&](int t, absl::Span<const uint64_t> keys) {
        return clients[t]->Pull("emb", keys, absl::MakeSpan(out[t]), {});
      },
      [&](int t, absl::Span<const uint64_t> keys) {
        return clients[t]->Push("emb", keys, w.grads, {});
      }));
  return r;
}

// ---- Redis ---------------------------------------------------------------

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

absl::StatusOr<Result> RunRedis(const Workload& w, const std::string& dir) {
  const Params& p = w.p;
  const int port = FreeLoopbackPort();
  std::string line;
  PSDB_ASSIGN_OR_RETURN(
      std::unique_ptr<Child> server,
      Child::Start(
          {p.redis_server, "--port", absl::StrCat(port), "--bind", "127.0.0.1",
           "--save", "", "--appendonly", "no", "--dir", dir},
          "Ready to accept connections", &line));
  std::vector<Redis> conns;
  for (int t = 0; t < p.threads; ++t) {
    PSDB_ASSIGN_OR_RETURN(Redis c, ConnectRedis(port));
    conns.push_back(std::move(c));
  }
  const size_t value_bytes = p.dim * sizeof(float);
  TableSpec spec;
  spec.name = "emb";
  spec.dim = p.dim;
  spec.seed = p.seed;
  Result r{"redis", "redis: pipelined MGET/MSET (hiredis)"};
  std::vector<std::vector<float>> rows(
      p.threads, std::vector<float>(p.batch_keys * p.dim));
  PSDB_ASSIGN_OR_RETURN(
      r.load_s, LoadAll(w, [&](int t, uint64_t begin, uint64_t end) {
        std::vector<uint64_t> keys;
        for (uint64_t k = begin; k < end; ++k) {
          keys.push_back(w.Key(k));
          InitializeRow(
              spec, keys.back(),
              absl::MakeSpan(rows[t]).subspan((k - begin) * p.dim, p.dim));
        }
        return RedisBatch(
            conns[t].get(), true, keys, value_bytes, p.redis_chunk,
            reinterpret_cast<const char*>(rows[t].data()), nullptr);
      }));
  PSDB_RETURN_IF_ERROR(Measure(
      w, &r,
      [&](int t, absl::Span<const uint64_t> keys) {
        return RedisBatch(conns[t].get(), false, keys, value_bytes,
                          p.redis_chunk, nullptr,
                          reinterpret_cast<char*>(rows[t].data()));
      },
      [&](int t, absl::Span<const uint64_t> keys) {
        return RedisBatch(
            conns[t].get(), true, keys, value_bytes, p.redis_chunk,
            reinterpret_cast<const char*>(rows[t].data()), nullptr);
      }));
  return r;
}

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
absl::StatusOr<Result> RunTcpLimit(const Workload& w) {
  const Params& p = w.p;
  absl::flat_hash_map<uint64_t, uint32_t> index;
  index.reserve(p.rows);
  std::vector<float> table(p.rows * p.dim);
  TableSpec spec;
  spec.name = "emb";
  spec.dim = p.dim;
  spec.seed = p.seed;
  Result r{"tcp_limit", "limit: hash-map gather over raw TCP"};
  const auto t0 = Clock::now();
  for (uint64_t k = 0; k < p.rows; ++k) {
    index[w.Key(k)] = static_cast<uint32_t>(k);
    InitializeRow(spec, w.Key(k),
                  absl::MakeSpan(table).subspan(k * p.dim, p.dim));
  }
  r.load_s = Seconds(Clock::now() - t0);

  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 64) != 0) {
    close(listener);
    return absl::InternalError("tcp limit: bind/listen failed");
  }
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  const size_t row_bytes = p.dim * sizeof(float);
  std::vector<std::thread> handlers;
  std::thread acceptor([&] {
    for (int t = 0; t < p.threads; ++t) {
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      handlers.emplace_back([&, fd] {
        std::vector<uint64_t> keys;
        std::vector<char> buf;
        uint32_t n = 0;
        while (ReadFull(fd, &n, sizeof(n))) {
          keys.resize(n);
          buf.resize(n * row_bytes);
          if (!ReadFull(fd, keys.data(), n * sizeof(uint64_t))) break;
          for (uint32_t i = 0; i < n; ++i) {
            auto it = index.find(keys[i]);
            const float* src = it == index.end()
                                   ? table.data()
                                   : table.data() + it->second * p.dim;
            std::memcpy(buf.data() + i * row_bytes, src, row_bytes);
          }
          if (!WriteFull(fd, buf.data(), buf.size())) break;
        }
        close(fd);
      });
    }
  });
  std::vector<int> conns;
  for (int t = 0; t < p.threads; ++t) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return absl::InternalError("tcp limit: connect failed");
    }
    conns.push_back(fd);
  }
  acceptor.join();
  std::vector<std::vector<char>> out(
      p.threads, std::vector<char>(p.batch_keys * row_bytes));
  std::vector<std::vector<char>> unique_rows(
      p.threads, std::vector<char>(p.batch_keys * row_bytes));
  std::vector<std::vector<char>> req(p.threads);
  std::vector<std::vector<uint32_t>> inverse(p.threads);
  const absl::Status status = Measure(
      w, &r,
      [&](int t, absl::Span<const uint64_t> keys) -> absl::Status {
        // De-duplicate first, as RemoteClient does, so both ship the same
        // rows and the limit stays a limit.
        absl::flat_hash_map<uint64_t, uint32_t> seen;
        seen.reserve(keys.size());
        req[t].resize(sizeof(uint32_t) + keys.size() * sizeof(uint64_t));
        char* key_out = req[t].data() + sizeof(uint32_t);
        inverse[t].resize(keys.size());
        uint32_t n = 0;
        for (size_t i = 0; i < keys.size(); ++i) {
          auto [it, inserted] = seen.try_emplace(keys[i], n);
          if (inserted) {
            std::memcpy(key_out + n * sizeof(uint64_t), &keys[i],
                        sizeof(uint64_t));
            ++n;
          }
          inverse[t][i] = it->second;
        }
        std::memcpy(req[t].data(), &n, sizeof(n));
        if (!WriteFull(conns[t], req[t].data(),
                       sizeof(n) + n * sizeof(uint64_t)) ||
            !ReadFull(conns[t], unique_rows[t].data(), n * row_bytes)) {
          return absl::UnavailableError("tcp limit: connection lost");
        }
        for (size_t i = 0; i < keys.size(); ++i) {
          std::memcpy(out[t].data() + i * row_bytes,
                      unique_rows[t].data() + inverse[t][i] * row_bytes,
                      row_bytes);
        }
        return absl::OkStatus();
      },
      nullptr);
  for (int fd : conns) shutdown(fd, SHUT_WR);
  for (std::thread& h : handlers) h.join();
  for (int fd : conns) close(fd);
  close(listener);
  PSDB_RETURN_IF_ERROR(status);
  return r;
}

// ---- report ----------------------------------------------------------------

struct Ratio {
  const char* name;
  double value;
  const char* target;
  bool met;
};

void PrintReport(const Params& p, const MachineInfo& m,
                 const std::vector<Result>& results,
                 const std::vector<Ratio>& ratios, std::ostream& out) {
  out << "ps-bench server\n";
  out << absl::StrFormat("machine     %d cores, %s, %.2f GiB RAM\n", m.cores,
                         m.cpu_model, m.memory_bytes / double(1ull << 30));
  out << absl::StrFormat(
      "parameters  rows=%d dim=%d batch_keys=%d batches=%d/thread "
      "warmup=%d threads=%d alpha=%g redis_chunk=%d seed=%d (psdb push: "
      "Adagrad)\n\n",
      p.rows, p.dim, p.batch_keys, p.batches, p.warmup_batches, p.threads,
      p.alpha, p.redis_chunk, p.seed);
  out << absl::StrFormat("%-40s %9s %14s %14s\n", "system", "load s",
                         "pull keys/s", "push keys/s");
  for (const Result& r : results) {
    out << absl::StrFormat(
        "%-40s %9.2f %14.0f %14s\n", r.label, r.load_s, r.PullRate(),
        r.push_s > 0 ? absl::StrFormat("%.0f", r.PushRate()) : "-");
  }
  out << absl::StrFormat("\n%-28s %8s  %-8s\n", "ratio", "value", "target");
  for (const Ratio& r : ratios) {
    out << absl::StrFormat("%-28s %8.3f  %-8s %s\n", r.name, r.value, r.target,
                           r.met ? "met" : "MISSED");
  }
}

void PrintJson(const Params& p, const MachineInfo& m,
               const std::vector<Result>& results,
               const std::vector<Ratio>& ratios, std::ostream& out) {
  std::string j = "{\"scenario\":\"server\",";
  AppendMachineJson(m, &j);
  auto num = [&j](double v) { tools::AppendDouble(v, true, &j); };
  auto str = [&j](absl::string_view s) { tools::AppendJsonString(s, &j); };
  j += ",\"params\":{\"rows\":";
  num(p.rows);
  j += ",\"dim\":";
  num(p.dim);
  j += ",\"batch_keys\":";
  num(p.batch_keys);
  j += ",\"batches_per_thread\":";
  num(p.batches);
  j += ",\"warmup_batches\":";
  num(p.warmup_batches);
  j += ",\"threads\":";
  num(p.threads);
  j += ",\"alpha\":";
  num(p.alpha);
  j += ",\"redis_chunk\":";
  num(p.redis_chunk);
  j += ",\"seed\":";
  num(p.seed);
  j += ",\"psdb_optimizer\":\"adagrad\"},\"systems\":{";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    if (i > 0) j += ",";
    str(r.id);
    j += ":{\"label\":";
    str(r.label);
    j += ",\"load_s\":";
    num(r.load_s);
    j += ",\"keys\":";
    num(r.keys);
    j += ",\"pull_s\":";
    num(r.pull_s);
    j += ",\"pull_keys_per_s\":";
    num(r.PullRate());
    if (r.push_s > 0) {
      j += ",\"push_s\":";
      num(r.push_s);
      j += ",\"push_keys_per_s\":";
      num(r.PushRate());
    }
    j += "}";
  }
  j += "},\"ratios\":{";
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (i > 0) j += ",";
    str(ratios[i].name);
    j += ":";
    num(ratios[i].value);
  }
  j += "},\"targets\":{";
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (i > 0) j += ",";
    str(ratios[i].name);
    j += ":";
    str(ratios[i].target);
  }
  j += "},\"targets_met\":{";
  for (size_t i = 0; i < ratios.size(); ++i) {
    if (i > 0) j += ",";
    str(ratios[i].name);
    j += ratios[i].met ? ":true" : ":false";
  }
  j += "}}\n";
  out << j;
}

absl::Status Run(const Params& p, std::ostream& out, std::ostream& log) {
  std::string dir = p.dir;
  bool remove_dir = false;
  if (dir.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr ? base : "/tmp",
                                    "/ps-bench-server-XXXXXX");
    if (mkdtemp(tmpl.data()) == nullptr) {
      return absl::InternalError("mkdtemp failed");
    }
    dir = tmpl;
    remove_dir = true;
  }
  signal(SIGPIPE, SIG_IGN);  // a dead peer is an error, not a crash
  Workload w;
  w.p = p;
  w.stream =
      ZipfKeyStream(p.rows, p.alpha, p.threads * (p.warmup_batches + p.batches),
                    p.batch_keys, p.seed);
  w.grads.assign(p.batch_keys * p.dim, 0.001f);
  std::vector<Result> results;
  log << "ps-bench server: psdb...\n";
  absl::StatusOr<Result> psdb = RunPsdb(w, dir);
  log << "ps-bench server: redis...\n";
  absl::StatusOr<Result> redis = psdb.ok() ? RunRedis(w, dir) : psdb.status();
  log << "ps-bench server: tcp limit...\n";
  absl::StatusOr<Result> limit = redis.ok() ? RunTcpLimit(w) : redis.status();
  if (remove_dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  PSDB_RETURN_IF_ERROR(psdb.status());
  PSDB_RETURN_IF_ERROR(redis.status());
  PSDB_RETURN_IF_ERROR(limit.status());
  results = {*psdb, *redis, *limit};
  const double pull_redis = psdb->PullRate() / redis->PullRate();
  const double push_redis = psdb->PushRate() / redis->PushRate();
  const double pull_limit = psdb->PullRate() / limit->PullRate();
  const std::vector<Ratio> ratios = {
      {"psdb_vs_redis_pull", pull_redis, ">= 2", pull_redis >= 2},
      {"psdb_vs_redis_push", push_redis, ">= 1.5", push_redis >= 1.5},
      {"psdb_vs_tcp_limit_pull", pull_limit, ">= 0.5", pull_limit >= 0.5},
  };
  const MachineInfo machine = DescribeMachine();
  if (p.json) {
    PrintJson(p, machine, results, ratios, out);
  } else {
    PrintReport(p, machine, results, ratios, out);
  }
  return absl::OkStatus();
}

}  // namespace

int RunServerBench(int argc, const char* const* argv, std::ostream& out,
                   std::ostream& err) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0) {
      out << kUsage;
      return 0;
    }
  }
  absl::StatusOr<Params> p = ParseParams(argc, argv);
  if (!p.ok()) {
    err << "ps-bench server: " << p.status().message() << "\n\n" << kUsage;
    return tools::kUsageExitCode;
  }
  const absl::Status status = Run(*p, out, err);
  if (!status.ok()) {
    err << "ps-bench server: " << status << "\n";
    return 1;
  }
  return 0;
}

}  // namespace psdb::bench
