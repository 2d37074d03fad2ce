// Manual measurement (issue 54): what the closed epochs cost the store's write paths, side by side with one table,
// against a scratch PostgreSQL (never the production database). Layout "epochs": E closed epochs of K keys each
// (tables with only their primary key, a summary each: as a close will leave them) and an empty open epoch;
// layout "one": the same E*K keys in scan_keys. Then C submitters for T seconds through a Store (writers W), each
// request a repeat of a random stored key with probability R (Expect unknown: the batch INSERT, with the closed
// epochs' look-up) or a new key (Expect new, a Bloom negative: COPY when no summary says maybe). Prints keys/s, answers by outcome, and PostgreSQL's CPU-µs per request (utime +
// stime of the postmaster and its children, /proc, so the server must run on this host) per cell, the cells
// interleaved REPS times.
//   closed_epochs_bench URL [--epochs 8] [--epoch-keys 200000] [--repeat 0.5] [--seconds 15] [--concurrency 64]
//                           [--writers 2] [--reps 2]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "storage/epochs/summary_build.h"
#include "storage/pg/pg_connection.h"
#include "storage/store.h"

using namespace scangate;
using namespace scangate::storage;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kPrefix = "scan_keys_e_bench_";

// utime + stime (clock ticks) of `pid` and its children (the postmaster's backends).
long long TreeTicks(int pid) {
  long long sum = 0;
  const auto ticks = [](int p) -> long long {
    std::ifstream in("/proc/" + std::to_string(p) + "/stat");
    std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = s.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream f(s.substr(close + 2));
    std::string field;
    long long u = 0, st = 0;
    for (int i = 3; i <= 15 && f >> field; ++i) {
      if (i == 14) u = std::atoll(field.c_str());
      if (i == 15) st = std::atoll(field.c_str());
    }
    return u + st;
  };
  sum += ticks(pid);
  std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  for (int c; children >> c;) sum += ticks(c);
  return sum;
}

int PostmasterPid(pqxx::connection& c) {
  pqxx::nontransaction tx(c);
  const int backend = tx.exec1("SELECT pg_backend_pid()")[0].as<int>();
  std::ifstream in("/proc/" + std::to_string(backend) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("PPid:", 0) == 0) return std::atoi(line.c_str() + 5);
  }
  return 0;
}

void Exec(pqxx::connection& c, const std::string& sql) {
  pqxx::nontransaction tx(c);
  tx.exec(sql);
}

// Removes both layouts' rows: the bench's closed epochs (tables and catalog rows) and scan_keys' rows.
void Clear(pqxx::connection& c) {
  pqxx::work tx(c);
  for (const auto& row : tx.exec(std::string("SELECT relation FROM scangate_epochs WHERE relation LIKE '") + kPrefix + "%'")) {
    tx.exec("DROP TABLE IF EXISTS " + row[0].as<std::string>());
  }
  tx.exec(std::string("DELETE FROM scangate_epochs WHERE relation LIKE '") + kPrefix + "%'");
  tx.exec("TRUNCATE scan_keys");
  tx.commit();
}

// `n` stored digests (sql/013's 16 bytes), uniformly random, from `seed`.
std::string KeysSql(const std::string& seed, long n) {
  return "SELECT scangate_stored_digest(sha256(convert_to('" + seed + "' || g, 'UTF8'))), now() - interval '1 minute' "
         "FROM generate_series(1, " + std::to_string(n) + ") g";
}

// Layout "epochs" (closed == true) or "one"; returns a sample of the stored keys (as digests: 16 bytes + zeros).
std::vector<Digest> Build(PgConnection& c, bool closed, int epochs, long epoch_keys, std::size_t sample) {
  Clear(c);
  const std::string run = std::to_string(std::random_device{}());
  for (int e = 0; e < epochs; ++e) {
    const std::string seed = run + "-" + std::to_string(e) + "-";
    if (closed) {
      const std::string t = kPrefix + std::to_string(e);
      Exec(c, "CREATE TABLE " + t + " (LIKE scan_keys INCLUDING DEFAULTS)");
      Exec(c, "INSERT INTO " + t + " (digest, first_seen) " + KeysSql(seed, epoch_keys));
      Exec(c, "ALTER TABLE " + t + " ADD PRIMARY KEY (digest) WITH (fillfactor = 100)");
      Exec(c, "VACUUM ANALYZE " + t);
      const std::string bytes = BuildEpochSummary(c.raw(), t).Serialize();
      pqxx::work tx(c);
      tx.exec_params("INSERT INTO scangate_epochs (relation, state, opened_at, summary) VALUES ($1, 'closed', "
                     "now() - ($2 || ' hours')::interval, $3)",
                     t, epochs - e, pqxx::binarystring(bytes.data(), bytes.size()));
      tx.commit();
    } else {
      Exec(c, "INSERT INTO scan_keys (digest, first_seen) " + KeysSql(seed, epoch_keys));
    }
  }
  if (!closed) Exec(c, "VACUUM ANALYZE scan_keys");
  Exec(c, "CHECKPOINT");
  std::string from = "scan_keys";
  if (closed) {
    from.clear();
    for (int e = 0; e < epochs; ++e) from += (e ? " UNION ALL SELECT digest FROM " : "") + std::string(kPrefix) + std::to_string(e);
  }
  pqxx::work tx(c);
  std::vector<Digest> keys;
  for (const auto& row : tx.exec("SELECT encode(uuid_send(digest), 'hex') FROM (SELECT digest FROM " + from +
                                 ") AS a ORDER BY random() LIMIT " + std::to_string(sample))) {
    Digest d{};
    const std::string hex = row[0].as<std::string>();
    for (std::size_t i = 0; i < 16; ++i) d[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
    keys.push_back(d);
  }
  return keys;
}

struct Cell {
  double keys_per_s = 0, pg_us_per_req = 0;
  std::map<Outcome, long> outcomes;
  std::uint64_t copy_batches = 0, batches = 0;
};

Cell Run(const std::string& url, const std::vector<Digest>& stored, double repeat, int seconds, int concurrency,
         unsigned writers, int postmaster) {
  StoreOptions o;
  o.url = url;
  o.writers = writers;
  o.retention = std::chrono::hours(24);  // the product's default --retention
  Store store(o);
  store.Start();
  std::atomic<bool> stop{false};
  std::atomic<long> answered{0};
  std::mutex mu;
  Cell cell;
  const long long t0 = TreeTicks(postmaster);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(std::random_device{}() + static_cast<unsigned>(t));
      std::uniform_real_distribution<double> coin(0, 1);
      std::map<Outcome, long> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        Digest d;
        Expect expect = Expect::kNew;
        if (coin(rng) < repeat) {
          d = stored[rng() % stored.size()];
          expect = Expect::kUnknown;
        } else {
          for (std::size_t i = 0; i < d.size(); i += 8) {
            const std::uint64_t v = rng();
            std::memcpy(d.data() + i, &v, 8);
          }
        }
        std::promise<Outcome> p;
        auto f = p.get_future();
        if (!store.Submit(d[0], d, "bench", [&p](const Result& r) { p.set_value(r.outcome); }, nullptr, expect)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        ++mine[f.get()];
        answered.fetch_add(1, std::memory_order_relaxed);
      }
      const std::lock_guard lk(mu);
      for (const auto& [k, v] : mine) cell.outcomes[k] += v;
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const long long t1 = TreeTicks(postmaster);
  const StoreStats s = store.Stats();
  store.Shutdown();
  cell.keys_per_s = static_cast<double>(answered.load()) / secs;
  cell.pg_us_per_req = static_cast<double>(t1 - t0) * 1e6 / static_cast<double>(sysconf(_SC_CLK_TCK)) /
                       static_cast<double>(std::max(1L, answered.load()));
  cell.copy_batches = s.copy_batches;
  cell.batches = s.batches;
  return cell;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URL [--epochs E] [--epoch-keys K] [--repeat R] [--seconds T] [--concurrency C] "
                         "[--writers W] [--reps N]\n", argv[0]);
    return 2;
  }
  const std::string url = argv[1];
  int epochs = 8, seconds = 15, concurrency = 64, reps = 2;
  long epoch_keys = 200000;
  double repeat = 0.5;
  unsigned writers = 2;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--epochs") epochs = std::atoi(argv[i + 1]);
    else if (a == "--epoch-keys") epoch_keys = std::atol(argv[i + 1]);
    else if (a == "--repeat") repeat = std::atof(argv[i + 1]);
    else if (a == "--seconds") seconds = std::atoi(argv[i + 1]);
    else if (a == "--concurrency") concurrency = std::atoi(argv[i + 1]);
    else if (a == "--writers") writers = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  PgConnection c(url);
  {
    StoreOptions o;  // migrations
    o.url = url;
    Store s(o);
    s.Start();
    s.Shutdown();
  }
  const int postmaster = PostmasterPid(c);
  std::printf("epochs=%d epoch_keys=%ld repeat=%.2f seconds=%d concurrency=%d writers=%u postmaster=%d\n", epochs,
              epoch_keys, repeat, seconds, concurrency, writers, postmaster);
  for (int rep = 1; rep <= reps; ++rep) {
    for (const bool closed : {false, true}) {
      const auto stored = Build(c, closed, epochs, epoch_keys, 100000);
      Cell cell = Run(url, stored, repeat, seconds, concurrency, writers, postmaster);
      std::printf("rep=%d layout=%-6s keys/s=%8.0f pg_us_per_req=%6.1f new=%ld duplicate=%ld unavailable=%ld "
                  "batches=%llu copy_batches=%llu\n",
                  rep, closed ? "epochs" : "one", cell.keys_per_s, cell.pg_us_per_req,
                  cell.outcomes[Outcome::kInserted], cell.outcomes[Outcome::kDuplicate],
                  cell.outcomes[Outcome::kUnavailable], static_cast<unsigned long long>(cell.batches),
                  static_cast<unsigned long long>(cell.copy_batches));
      std::fflush(stdout);
    }
  }
  Clear(c);
  return 0;
}
