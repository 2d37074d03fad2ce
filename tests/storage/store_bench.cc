// Manual measurement of storage/store.h against a scratch PostgreSQL (never the production database):
// batch insert throughput for fixed batch sizes (write-behind, so batches fill to batch_limit), closed-loop
// Submit throughput with natural batching, and warm-load speed.
//   store_bench URL [--keys-scale X] [--writers W] [--warm N] [--old N] [--index brin|btree|none] [--skip-insert] [--quick]
//   [--warm-streams 1,2,3] (warm load once per listed StoreOptions::warm_streams, the list repeated twice)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/store.h"

using namespace scangate;
using namespace scangate::storage;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<Digest> RandomDigests(std::size_t n) {
  std::mt19937_64 rng{std::random_device{}()};
  std::vector<Digest> out(n);
  for (auto& d : out) {
    for (std::size_t i = 0; i < d.size(); i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(d.data() + i, &v, 8);
    }
  }
  return out;
}

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

void Report(const char* what, std::size_t keys, double secs, const StoreStats& s) {
  std::printf("%-34s keys=%-8zu %8.3f s %10.0f keys/s  batches=%-7llu mean_batch=%7.1f mean_txn=%.3f ms\n", what,
              keys, secs, keys / secs, static_cast<unsigned long long>(s.batches),
              s.batch_size_count ? s.batch_size_sum / s.batch_size_count : 0.0,
              s.commit_seconds_count ? 1e3 * s.commit_seconds_sum / s.commit_seconds_count : 0.0);
  std::fflush(stdout);
}

void FixedBatches(const std::string& url, unsigned writers, std::size_t batch, std::size_t keys) {
  StoreOptions o;
  o.url = url;
  o.writers = writers;
  o.batch_limit = batch;
  o.queue_limit = keys + 1;
  Store store(o);
  store.Start();
  const auto ds = RandomDigests(keys);
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < ds.size(); ++i) store.SubmitWriteBehind(static_cast<std::uint32_t>(i), ds[i], "bench");
  store.Shutdown();
  const double secs = Seconds(t0);
  char label[80];
  std::snprintf(label, sizeof label, "write-behind batch=%zu writers=%u", batch, writers);
  Report(label, keys, secs, store.Stats());
}

void ClosedLoop(const std::string& url, unsigned writers, int in_flight, std::size_t keys) {
  StoreOptions o;
  o.url = url;
  o.writers = writers;
  Store store(o);
  store.Start();
  const auto ds = RandomDigests(keys);
  std::atomic<int> outstanding{0};
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < ds.size(); ++i) {
    while (outstanding.load() >= in_flight) std::this_thread::yield();
    ++outstanding;
    if (!store.Submit(static_cast<std::uint32_t>(i), ds[i], "", [&](const Result&) { --outstanding; })) {
      --outstanding;
    }
  }
  while (outstanding.load() > 0) std::this_thread::yield();
  const double secs = Seconds(t0);
  store.Shutdown();
  char label[80];
  std::snprintf(label, sizeof label, "submit in_flight=%d writers=%u", in_flight, writers);
  Report(label, keys, secs, store.Stats());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: store_bench URL [--keys-scale X] [--writers W] [--warm N] [--old N] "
                         "[--index brin|btree|none] [--skip-insert] [--quick] [--warm-streams 1,2,3]\n");
    return 2;
  }
  const std::string url = argv[1];
  double scale = 1;
  unsigned writers = 2;
  long warm = 0, old = 0;
  std::string index = "brin";
  bool skip_insert = false;
  bool quick = false;
  std::vector<unsigned> warm_streams{1, 2};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keys-scale" && i + 1 < argc) scale = std::atof(argv[++i]);
    else if (a == "--writers" && i + 1 < argc) writers = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--warm" && i + 1 < argc) warm = std::atol(argv[++i]);
    else if (a == "--old" && i + 1 < argc) old = std::atol(argv[++i]);
    else if (a == "--index" && i + 1 < argc) index = argv[++i];
    else if (a == "--skip-insert") skip_insert = true;
    else if (a == "--quick") quick = true;
    else if (a == "--warm-streams" && i + 1 < argc) {
      warm_streams.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        warm_streams.push_back(static_cast<unsigned>(std::strtoul(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
      }
    }
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  {
    StoreOptions o;
    o.url = url;
    Store migrate(o);
    migrate.Start();  // applies migrations
  }
  pqxx::connection conn(url);
  {
    pqxx::nontransaction tx(conn);
    tx.exec0("DROP INDEX IF EXISTS scan_keys_first_seen_btree");
    if (index != "brin") tx.exec0("DROP INDEX IF EXISTS scan_keys_first_seen_brin");
    if (index == "brin") {
      tx.exec0("CREATE INDEX IF NOT EXISTS scan_keys_first_seen_brin ON scan_keys USING brin (first_seen) "
               "WITH (pages_per_range = 32, autosummarize = on)");
    }
    if (index == "btree") tx.exec0("CREATE INDEX scan_keys_first_seen_btree ON scan_keys (first_seen)");
    const auto rows = tx.exec1("SELECT count(*) FROM scan_keys")[0].as<long>();
    std::printf("index=%s existing_rows=%ld\n", index.c_str(), rows);
  }
  auto n = [&](double k) { return static_cast<std::size_t>(k * scale); };
  if (quick) {
    for (int rep = 0; rep < 2; ++rep) {
      FixedBatches(url, 1, 64, n(50000));
      FixedBatches(url, 1, 1024, n(200000));
    }
  } else if (!skip_insert) {
    FixedBatches(url, 1, 1, n(3000));
    FixedBatches(url, 1, 64, n(100000));
    FixedBatches(url, 1, 1024, n(300000));
    FixedBatches(url, writers, 1024, n(300000));
    ClosedLoop(url, writers, 1, n(3000));
    ClosedLoop(url, writers, 64, n(50000));
    ClosedLoop(url, writers, 1024, n(200000));
  }
  if (old > 0) {
    const auto t0 = Clock::now();
    pqxx::nontransaction tx(conn);
    tx.exec_params0("INSERT INTO scan_keys (digest, first_seen) SELECT sha256(convert_to('old-' || "
                    "gen_random_uuid()::text || g, 'UTF8')), now() - interval '30 days' + g * interval '1 microsecond' "
                    "FROM generate_series(1, $1::bigint) g",
                    old);
    std::printf("generated %ld old rows (30 days ago) in %.1f s\n", old, Seconds(t0));
  }
  if (warm > 0) {
    const auto t0 = Clock::now();
    pqxx::nontransaction tx(conn);
    tx.exec_params0("INSERT INTO scan_keys (digest) SELECT sha256(convert_to('warm-' || gen_random_uuid()::text "
                    "|| g, 'UTF8')) FROM generate_series(1, $1::bigint) g",
                    warm);
    tx.exec0("VACUUM ANALYZE scan_keys");
    std::printf("generated %ld recent rows in %.1f s (+ VACUUM ANALYZE)\n", warm, Seconds(t0));
  }
  for (int run = 0; run < 2; ++run) {
    for (const unsigned streams : warm_streams) {
      StoreOptions o;
      o.url = url;
      o.writers = 1;
      o.warm_streams = streams;
      Store store(o);
      store.Start();
      std::atomic<std::uint64_t> sum{0};
      const auto t0 = Clock::now();
      const auto n = store.WarmLoad(std::chrono::hours(24), [&](std::span<const Digest> chunk) {
        std::uint64_t s = 0;
        for (const auto& d : chunk) s += d[0];
        sum.fetch_add(s);
      });
      const double secs = Seconds(t0);
      std::printf("warm load (window 24h, warm_streams %u -> used %u, run %d): %llu keys in %.3f s = %.0f keys/s "
                  "(checksum %llu)\n",
                  streams, store.Stats().last_warm_streams, run + 1, static_cast<unsigned long long>(n), secs,
                  n / secs, static_cast<unsigned long long>(sum.load()));
      std::fflush(stdout);
    }
  }
  return 0;
}
