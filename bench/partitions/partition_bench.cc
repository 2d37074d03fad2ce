// partition_bench: the two write paths of a partitioned exact store (issue 23) side by side, on the same
// batches, with the CPU each process group spends per key. Not a test: built with the benchmarks
// (SCANGATE_BENCH), run by bench/partitions/compare.sh and scaling.sh; figures in bench/RESULTS.md
// "Issue 23: partitions over PL/Proxy".
//   partition_bench --mode=proxy|direct --url=<proxy libpq URL> [--clients=8] [--batch=64] [--seconds=20]
//                   [--warmup=2] [--repeat=0.25] [--writers=2] [--cluster=scangate] [--keys=N]
// --keys=N: the measured part ends once N keys were answered (instead of after --seconds), so runs over
// different layouts measure the same work on tables of the same size.
// A batch is --batch distinct keys of which a share --repeat are digests this client thread already had
// answered `inserted` (a run of consecutive slots, from a random start, of a ring of its last 65536), the rest
// fresh random 32-byte digests.
//   proxy:  one libpq connection per client to the proxy database; per batch ONE
//           SELECT ... FROM scangate_observe($1,$2,$3,$4) (binary array parameters, binary result): one client
//           round trip; PL/Proxy then makes one call per partition the batch touches (each autocommitted).
//   direct: storage::PartitionedStore on the proxy's map (one storage::Store per logical partition; in a tree
//           without it, the same built here from the map in pg_foreign_server), every key submitted to the Store
//           of its partition (PartitionOf: big-endian bytes 4..7 & (P - 1)) with Expect::kNew for a fresh key
//           and kUnknown for a repeat — the path and the writers scangate runs; the client waits for the batch's
//           completions. Round trips per partition transaction: COPY batch 2 (BEGIN + prologue + COPY start;
//           data + end + COMMIT), INSERT batch 3 (BEGIN; INSERT; COMMIT) + 1 when a key was not inserted
//           (the SELECT of present rows); reported from the stores' counters.
// Checked: every fresh key answered inserted exactly once, every repeat duplicate; any other answer (or a
// missing row) fails the run (exit 1). CPU: utime+stime of every PostgreSQL postmaster's process tree (the
// proxy's and each partition server's, found as the parent of a backend of ours, so the clusters must run on
// this host and /proc must be readable) and of this process (getrusage), over the measured seconds only.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <libpq-fe.h>
#include <unistd.h>

#include "storage/pg/pg_array.h"
#include "storage/store.h"
#include "storage/write/store_metrics.h"
// storage::PartitionedStore (issue 23) where the tree has it: the direct mode then runs scangate's own router;
// before it landed, the same thing by hand (one Store per partition, PartitionOf below). The output's
// `router=` says which.
#if __has_include("storage/partitions/partitioned_store.h")
#include "storage/partitions/partitioned_store.h"
#define PARTITION_BENCH_HAS_PARTITIONED_STORE 1
#endif

using namespace scangate;
using namespace scangate::storage;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode, url, cluster = "scangate";
  unsigned clients = 8, writers = 2;
  std::size_t batch = 64;
  double seconds = 20, warmup = 2, repeat = 0.25;
  std::uint64_t keys = 0;  // > 0: measure until this many keys were answered instead of --seconds
};

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "partition_bench: %s\n", why.c_str());
  std::exit(2);
}

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    const auto eq = s.find('=');
    if (s.rfind("--", 0) != 0 || eq == std::string::npos) Die("arguments are --name=value: " + s);
    const std::string k = s.substr(2, eq - 2), v = s.substr(eq + 1);
    if (k == "mode") a.mode = v;
    else if (k == "url") a.url = v;
    else if (k == "cluster") a.cluster = v;
    else if (k == "clients") a.clients = std::stoul(v);
    else if (k == "writers") a.writers = std::stoul(v);
    else if (k == "batch") a.batch = std::stoul(v);
    else if (k == "seconds") a.seconds = std::stod(v);
    else if (k == "warmup") a.warmup = std::stod(v);
    else if (k == "repeat") a.repeat = std::stod(v);
    else if (k == "keys") a.keys = std::stoull(v);
    else Die("unknown flag --" + k);
  }
  if ((a.mode != "proxy" && a.mode != "direct") || a.url.empty()) Die("need --mode=proxy|direct and --url=");
  if (a.clients == 0 || a.batch == 0 || a.repeat < 0 || a.repeat >= 1) Die("bad --clients/--batch/--repeat");
  return a;
}

// ---- PostgreSQL helpers (plain libpq) ----

PGconn* Connect(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) Die(std::string("connect: ") + PQerrorMessage(c));
  return c;
}

std::vector<std::string> Column(PGconn* c, const std::string& sql, const std::string& param = {}) {
  const char* p = param.c_str();
  PGresult* r = PQexecParams(c, sql.c_str(), param.empty() ? 0 : 1, nullptr, param.empty() ? nullptr : &p,
                             nullptr, nullptr, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) Die(sql + ": " + PQerrorMessage(c));
  std::vector<std::string> out;
  for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0));
  PQclear(r);
  return out;
}

// The PL/Proxy cluster's partitions (pN=conninfo options of the foreign server), index = partition.
std::vector<std::string> ReadMap(const std::string& proxy, const std::string& cluster) {
  PGconn* c = Connect(proxy);
  std::map<unsigned, std::string> parts;
  for (const auto& opt : Column(c, "SELECT unnest(srvoptions) FROM pg_foreign_server WHERE srvname = $1", cluster)) {
    const auto eq = opt.find('=');
    if (opt.size() > 1 && opt[0] == 'p' && eq != std::string::npos &&
        std::all_of(opt.begin() + 1, opt.begin() + eq, [](char ch) { return ch >= '0' && ch <= '9'; }) && eq > 1)
      parts[std::stoul(opt.substr(1, eq - 1))] = opt.substr(eq + 1);
  }
  PQfinish(c);
  std::vector<std::string> map;
  for (const auto& [i, ci] : parts) {
    if (i != map.size()) Die("partition map has a gap at p" + std::to_string(map.size()));
    map.push_back(ci);
  }
  if (map.empty() || (map.size() & (map.size() - 1))) Die("partition count is not a power of two >= 1");
  return map;
}

// The fields of /proc/PID/stat after the command name (v[0] = field 3, the state); empty when the process is
// gone (it may exit between listing /proc and reading its stat).
std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return {};
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return {};
  std::istringstream rest(line.substr(close + 2));
  return {std::istream_iterator<std::string>(rest), {}};
}

// The postmaster of the cluster `conninfo` reaches: the first line of its data directory's postmaster.pid
// (we connect as a superuser), else the parent of our backend.
pid_t PostmasterOf(const std::string& conninfo, std::string* port) {
  PGconn* c = Connect(conninfo);
  const pid_t backend = static_cast<pid_t>(std::stol(Column(c, "SELECT pg_backend_pid()")[0]));
  const std::string datadir = Column(c, "SELECT current_setting('data_directory')")[0];
  *port = PQport(c);
  PQfinish(c);
  std::ifstream pidfile(datadir + "/postmaster.pid");
  long pm = 0;
  if (pidfile >> pm && pm > 1) return static_cast<pid_t>(pm);
  const auto v = StatFields(backend);
  const long ppid = v.size() >= 2 ? std::atol(v[1].c_str()) : 0;
  if (ppid <= 1) Die("cannot find the postmaster of " + datadir + " (run on the clusters' host, as root)");
  return static_cast<pid_t>(ppid);
}

// utime+stime (+ cutime+cstime for `with_children`: the reaped children's) of one process, in clock ticks.
long long Ticks(pid_t pid, bool with_children) {
  const auto v = StatFields(pid);
  if (v.size() < 15) return 0;
  long long t = std::stoll(v[11]) + std::stoll(v[12]);  // fields 14, 15
  if (with_children) t += std::stoll(v[13]) + std::stoll(v[14]);  // 16, 17
  return t;
}

// A postmaster's tree: itself with its reaped children, plus its live children (PostgreSQL's processes are
// all direct children of the postmaster). A backend that exits mid-run moves from "live" to the postmaster's
// cutime, so the difference of two readings is the tree's CPU in between.
long long TreeTicks(pid_t pm) {
  long long t = Ticks(pm, true);
  DIR* d = opendir("/proc");
  if (!d) return t;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::atol(e->d_name));
    const auto v = StatFields(pid);
    if (v.size() >= 2 && std::atol(v[1].c_str()) == pm) t += Ticks(pid, false);
  }
  closedir(d);
  return t;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// ---- keys ----

unsigned PartitionOf(const Digest& d, std::size_t count) {
  const std::uint32_t h = (std::uint32_t{d[4]} << 24) | (std::uint32_t{d[5]} << 16) | (std::uint32_t{d[6]} << 8) | d[7];
  return h & static_cast<std::uint32_t>(count - 1);
}
std::uint32_t RouteOf(const Digest& d) {
  return (std::uint32_t{d[0]} << 24) | (std::uint32_t{d[1]} << 16) | (std::uint32_t{d[2]} << 8) | d[3];
}

struct Counters {
  std::atomic<std::uint64_t> keys{0}, fresh{0}, repeats{0}, batches{0}, wrong{0};
  std::atomic<std::uint64_t> touched{0};  // proxy: partitions the batches touched (PL/Proxy's remote calls)
  std::vector<std::atomic<std::uint64_t>> per_partition;  // keys sent to each partition
  explicit Counters(std::size_t partitions) : per_partition(partitions) {}
};

// One client's keys: fresh random digests and a ring of ones already answered inserted.
class KeySource {
 public:
  explicit KeySource(const Args& a) : a_(a) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    rng_.seed(seq);
  }
  // Fills `keys` (batch size) and `is_repeat`.
  void Next(std::vector<Digest>& keys, std::vector<bool>& is_repeat) {
    keys.assign(a_.batch, Digest{});
    is_repeat.assign(a_.batch, false);
    std::size_t reps = history_.size() < 4 * a_.batch ? 0 : static_cast<std::size_t>(a_.batch * a_.repeat + 0.5);
    // Distinct picks: consecutive ring slots from a random start (the ring holds distinct digests).
    const std::size_t start = reps ? rng_() % history_.size() : 0;
    for (std::size_t i = 0; i < a_.batch; ++i) {
      if (i < reps) {
        keys[i] = history_[(start + i) % history_.size()];
        is_repeat[i] = true;
      } else {
        for (std::size_t j = 0; j < keys[i].size(); j += 8) {
          const std::uint64_t v = rng_();
          std::memcpy(keys[i].data() + j, &v, 8);
        }
      }
    }
  }
  void Answered(const Digest& d) {
    if (history_.size() < kRing) history_.push_back(d);
    else history_[next_++ % kRing] = d;
  }

 private:
  static constexpr std::size_t kRing = 65536;
  const Args& a_;
  std::mt19937_64 rng_;
  std::vector<Digest> history_;
  std::size_t next_ = 0;
};

// ---- proxy mode ----

void PutBe64(std::string& s, std::int64_t v) {
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff));
}
std::int64_t GetBe64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return static_cast<std::int64_t>(v);
}

constexpr const char* kObserve =
    "SELECT digest, inserted, first_seen_us FROM scangate_observe($1::bytea[], $2::text[], $3::int8[], $4::int8)";

void ProxyClient(const Args& a, std::size_t partitions, Counters& n, const std::atomic<bool>& stop) {
  PGconn* c = Connect(a.url);
  KeySource src(a);
  std::vector<Digest> keys;
  std::vector<bool> rep;
  std::string retention;
  PutBe64(retention, 0);
  while (!stop.load(std::memory_order_relaxed)) {  // relaxed: a stop flag, nothing published with it
    src.Next(keys, rep);
    PgBinaryArray digests(kOidBytea, keys.size(), keys.size() * 32), sources(kOidText, keys.size(), keys.size() * 5),
        seen(kOidInt8, keys.size(), keys.size() * 8);
    for (const auto& k : keys) {
      digests.Add(std::string_view(reinterpret_cast<const char*>(k.data()), k.size()));
      sources.Add("bench");
      seen.AddInt8(0);
    }
    const std::string_view p1 = digests.Finish(), p2 = sources.Finish(), p3 = seen.Finish();
    const char* values[4] = {p1.data(), p2.data(), p3.data(), retention.data()};
    const int lengths[4] = {static_cast<int>(p1.size()), static_cast<int>(p2.size()), static_cast<int>(p3.size()), 8};
    const int formats[4] = {1, 1, 1, 1};
    const Oid types[4] = {1001, 1009, 1016, 20};
    PGresult* r = PQexecParams(c, kObserve, 4, types, values, lengths, formats, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) Die(std::string("scangate_observe: ") + PQerrorMessage(c));
    std::map<Digest, bool> got;
    for (int i = 0; i < PQntuples(r); ++i) {
      Digest d{};
      if (PQgetlength(r, i, 0) != 32) Die("digest of the wrong length");
      std::memcpy(d.data(), PQgetvalue(r, i, 0), 32);
      got[d] = PQgetvalue(r, i, 1)[0] != 0;
      (void)GetBe64(PQgetvalue(r, i, 2));
    }
    PQclear(r);
    std::uint64_t wrong = got.size() == keys.size() ? 0 : 1;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const auto it = got.find(keys[i]);
      if (it == got.end() || it->second != !rep[i]) ++wrong;
      else if (!rep[i]) src.Answered(keys[i]);
    }
    const std::uint64_t reps = static_cast<std::uint64_t>(std::count(rep.begin(), rep.end(), true));
    std::set<unsigned> touched;
    for (const auto& k : keys) {
      touched.insert(PartitionOf(k, partitions));
      n.per_partition[PartitionOf(k, partitions)].fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
    }
    n.touched += touched.size();
    n.keys += keys.size();
    n.repeats += reps;
    n.fresh += keys.size() - reps;
    n.wrong += wrong;
    ++n.batches;
  }
  PQfinish(c);
}

// ---- direct mode ----

// The direct path's router: Submit to the Store of the key's partition; per-partition counters.
class Direct {
 public:
  Direct(const Args& a, const std::vector<std::string>& map) {
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    PartitionedStoreOptions o;
    o.base.writers = a.writers;
    o.proxy_url = a.url;
    o.cluster = a.cluster;
    ps_ = std::make_unique<PartitionedStore>(o);
    ps_->Start();
    if (ps_->partitions() != map.size()) Die("PartitionedStore read another partition count than the map");
#else
    std::vector<std::thread> starters;
    for (const auto& ci : map) {
      StoreOptions o;
      o.url = ci;
      o.writers = a.writers;
      stores_.push_back(std::make_unique<Store>(o));
    }
    for (auto& s : stores_) starters.emplace_back([&s] { s->Start(); });
    for (auto& t : starters) t.join();
#endif
  }
  static const char* Name() {
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    return "PartitionedStore";
#else
    return "Store-per-partition";
#endif
  }
  bool Submit(unsigned part, const Digest& d, Completion done, Expect expect) {
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    (void)part;
    return ps_->Submit(RouteOf(d), d, "bench", std::move(done), nullptr, expect);
#else
    return stores_[part]->Submit(RouteOf(d), d, "bench", std::move(done), nullptr, expect);
#endif
  }
  bool full() const {
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    return ps_->full();
#else
    return std::any_of(stores_.begin(), stores_.end(), [](const auto& s) { return s->full(); });
#endif
  }
  std::vector<StoreStats> Stats() const {
    std::vector<StoreStats> out;
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    for (const auto& p : ps_->Partitions()) out.push_back(p.stats);
#else
    for (const auto& s : stores_) out.push_back(s->Stats());
#endif
    return out;
  }
  void Shutdown() {
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
    ps_->Shutdown();
#else
    for (auto& s : stores_) s->Shutdown();
#endif
  }

 private:
#ifdef PARTITION_BENCH_HAS_PARTITIONED_STORE
  std::unique_ptr<PartitionedStore> ps_;
#else
  std::vector<std::unique_ptr<Store>> stores_;
#endif
};

void DirectClient(const Args& a, std::size_t partitions, Direct& router, Counters& n,
                  const std::atomic<bool>& stop) {
  KeySource src(a);
  std::vector<Digest> keys;
  std::vector<bool> rep;
  std::vector<Outcome> out;
  while (!stop.load(std::memory_order_relaxed)) {  // relaxed: a stop flag, nothing published with it
    src.Next(keys, rep);
    out.assign(keys.size(), Outcome::kUnavailable);
    std::mutex mu;
    std::condition_variable cv;
    std::size_t left = keys.size();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto done = [&, i](const Result& r) {
        std::lock_guard<std::mutex> l(mu);
        out[i] = r.outcome;
        if (--left == 0) cv.notify_one();
      };
      const unsigned part = PartitionOf(keys[i], partitions);
      n.per_partition[part].fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
      while (!router.Submit(part, keys[i], done, rep[i] ? Expect::kUnknown : Expect::kNew)) {
        if (!router.full()) Die("a partition store refused a key while not full (down?)");
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return left == 0; });
    }
    std::uint64_t wrong = 0, reps = 0;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      reps += rep[i];
      if (out[i] != (rep[i] ? Outcome::kDuplicate : Outcome::kInserted)) ++wrong;
      else if (!rep[i]) src.Answered(keys[i]);
    }
    n.keys += keys.size();
    n.repeats += reps;
    n.fresh += keys.size() - reps;
    n.wrong += wrong;
    ++n.batches;
  }
}

struct Snapshot {
  std::uint64_t keys, fresh, repeats, batches, wrong, touched;
  std::vector<std::uint64_t> per_partition;
  std::vector<long long> pg;  // per group
  double self;
  std::vector<StoreStats> stores;
};

}  // namespace

int main(int argc, char** argv) {
  const Args a = ParseArgs(argc, argv);
  const auto map = ReadMap(a.url, a.cluster);
  // Process groups: the proxy cluster, then each partition server (deduplicated by postmaster).
  std::vector<std::pair<std::string, pid_t>> groups;
  std::map<pid_t, std::vector<unsigned>> parts_of;
  {
    std::string port;
    groups.emplace_back("proxy", PostmasterOf(a.url, &port));
    groups.back().first += ":" + port;
    for (unsigned p = 0; p < map.size(); ++p) {
      const pid_t pm = PostmasterOf(map[p], &port);
      if (!parts_of.count(pm)) groups.emplace_back("server:" + port, pm);
      parts_of[pm].push_back(p);
    }
  }
  std::unique_ptr<Direct> router;
  if (a.mode == "direct") router = std::make_unique<Direct>(a, map);
  Counters n(map.size());
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (unsigned i = 0; i < a.clients; ++i) {
    if (a.mode == "proxy") clients.emplace_back([&] { ProxyClient(a, map.size(), n, stop); });
    else clients.emplace_back([&] { DirectClient(a, map.size(), *router, n, stop); });
  }
  auto snap = [&] {
    Snapshot s{n.keys.load(), n.fresh.load(), n.repeats.load(), n.batches.load(), n.wrong.load(),
                n.touched.load(), {}, {}, 0, {}};
    for (const auto& c : n.per_partition) s.per_partition.push_back(c.load());
    for (const auto& g : groups) s.pg.push_back(TreeTicks(g.second));
    s.self = SelfCpuSeconds();
    if (router) s.stores = router->Stats();
    return s;
  };
  std::this_thread::sleep_for(std::chrono::duration<double>(a.warmup));
  const Snapshot s0 = snap();
  const auto t0 = Clock::now();
  if (a.keys > 0) {
    while (n.keys.load() - s0.keys < a.keys) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  }
  const Snapshot s1 = snap();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  stop = true;
  for (auto& t : clients) t.join();
  if (router) router->Shutdown();
  const Snapshot s2 = snap();  // the verdict check covers every batch, warm-up and tail included

  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double keys = static_cast<double>(s1.keys - s0.keys);
  double loads[3] = {0, 0, 0};
  getloadavg(loads, 3);
  std::printf("mode=%s router=%s partitions=%zu servers=%zu clients=%u batch=%zu repeat=%.2f writers=%u seconds=%.1f "
              "load=%.2f %.2f %.2f\n",
              a.mode.c_str(), a.mode == "direct" ? Direct::Name() : "-", map.size(), groups.size() - 1, a.clients, a.batch, a.repeat, a.writers, secs, loads[0],
              loads[1], loads[2]);
  std::printf("keys_per_s=%.0f batches_per_s=%.1f keys=%.0f\n", keys / secs, (s1.batches - s0.batches) / secs, keys);
  double pg_total = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double cpu = (s1.pg[g] - s0.pg[g]) / hz;
    if (g > 0) pg_total += cpu;
    std::string parts;
    double own = 0;  // keys of this server's partitions
    if (g > 0)
      for (unsigned p : parts_of[groups[g].second]) {
        parts += (parts.empty() ? "p" : ",p") + std::to_string(p);
        own += static_cast<double>(s1.per_partition[p] - s0.per_partition[p]);
      }
    // CPU-µs per key = CPU-seconds per million keys. own_key: per key of this server's own partitions.
    std::printf("cpu group=%s%s%s cpu_s=%.2f cpu_us_per_key=%.2f", groups[g].first.c_str(),
                parts.empty() ? "" : " partitions=", parts.c_str(), cpu, cpu * 1e6 / keys);
    if (g > 0) std::printf(" own_keys=%.0f cpu_us_per_own_key=%.2f", own, own > 0 ? cpu * 1e6 / own : 0.0);
    std::printf("\n");
  }
  const double self = s1.self - s0.self;
  std::printf("cpu group=partitions_total cpu_s=%.2f cpu_us_per_key=%.2f\n", pg_total, pg_total * 1e6 / keys);
  std::printf("cpu group=%s cpu_s=%.2f cpu_us_per_key=%.2f\n", a.mode == "proxy" ? "client" : "client+router", self,
              self * 1e6 / keys);
  const double proxy = (s1.pg[0] - s0.pg[0]) / hz;
  std::printf("cpu group=all cpu_s=%.2f cpu_us_per_key=%.2f cores_busy=%.2f\n", proxy + pg_total + self,
              (proxy + pg_total + self) * 1e6 / keys, (proxy + pg_total + self) / secs);
  if (a.mode == "direct") {
    std::uint64_t tx = 0, copy = 0, fallbacks = 0;
    for (std::size_t p = 0; p < s1.stores.size(); ++p) {
      const auto& b = s1.stores[p];
      const auto& e = s0.stores[p];
      tx += b.batches - e.batches;
      copy += b.copy_batches - e.copy_batches;
      fallbacks += b.copy_fallbacks - e.copy_fallbacks;
    }
    // INSERT transactions: 3 round trips, + 1 (the SELECT) when a key of it was not inserted: with repeats
    // nearly every one (bounded above by counting all of them as 4).
    const std::uint64_t inserts = tx - copy;
    const double rt = 2.0 * copy + 4.0 * inserts + 2.0 * fallbacks;
    std::printf("partition_transactions=%llu per_client_batch=%.2f copy=%llu insert=%llu copy_fallbacks=%llu "
                "keys_per_transaction=%.1f round_trips_per_client_batch<=%.2f\n",
                static_cast<unsigned long long>(tx), static_cast<double>(tx) / (s1.batches - s0.batches),
                static_cast<unsigned long long>(copy), static_cast<unsigned long long>(inserts),
                static_cast<unsigned long long>(fallbacks), keys / std::max<double>(tx, 1),
                rt / (s1.batches - s0.batches));
  } else {
    std::printf("client_round_trips_per_batch=1 remote_calls_per_batch=%.2f (PL/Proxy: one autocommitted call per "
                "partition touched)\n", static_cast<double>(s1.touched - s0.touched) / (s1.batches - s0.batches));
  }
  std::printf("verdicts: batches=%llu fresh=%llu repeats=%llu wrong=%llu -> %s\n",
              static_cast<unsigned long long>(s2.batches), static_cast<unsigned long long>(s2.fresh),
              static_cast<unsigned long long>(s2.repeats), static_cast<unsigned long long>(s2.wrong),
              s2.wrong == 0 ? "PASS" : "FAIL");
  return s2.wrong == 0 ? 0 : 1;
}
