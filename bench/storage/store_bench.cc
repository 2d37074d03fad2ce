// Manual measurement of storage/store.h against a scratch PostgreSQL (never the production database):
// batch insert throughput for fixed batch sizes (write-behind, so batches fill to batch_limit), closed-loop
// Submit throughput with natural batching, and warm-load speed.
//   store_bench URL [--keys-scale X] [--writers W] [--warm N] [--old N] [--index brin|btree|none] [--skip-insert] [--quick]
//   [--warm-streams 1,2,3] (warm load once per listed StoreOptions::warm_streams, the list repeated twice)
//   store_bench URL --shapes [--prefill N] [--shape-keys K] [--reps R] [--sizes 64,256,1024,4096]: the batch statement's shapes side by
//   side on one connection each, commit per batch, per row at 64 / 256 / 1024 / 4096 keys (all-new batches,
//   then half-duplicate batches); cells interleaved, R repetitions (bench/RESULTS.md "Batch
//   statement shapes"). Shapes: the former CTE statement, the storage/pg/batch_statement.h one (the real class),
//   the same INSERT reading present rows in the same statement, and BatchStatement::BeginCopy / CommitCopy (binary COPY).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "storage/epochs/catalog.h"
#include "storage/pg/batch_statement.h"
#include "storage/pg/pg_array.h"
#include "storage/pg/pg_connection.h"
#include "storage/store.h"

using namespace scangate;
using namespace scangate::storage;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<Digest> RandomDigests(std::size_t n) {
  // One generator for the process, seeded with 256 bits: per-call 32-bit seeds collide within a long run
  // (two calls then produce the same digests, and a COPY of "fresh" keys conflicts).
  static std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
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


// ---- --shapes: the batch statement alone, per shape --------------------------------------------------

// The statement scangate ran before storage/pg/batch_statement.h (kept here only to measure against): one long
// bytea cut per row with substring, sources as a text[] literal, a JOIN back, to_char per row.
constexpr const char* kOldInsertSql = R"sql(
WITH input AS (
  SELECT s.i::int AS i, substring($1::bytea FROM (s.i::int - 1) * 32 + 1 FOR 32) AS digest, s.source,
         CASE WHEN s.us = 0 THEN now() ELSE timestamptz 'epoch' + s.us * interval '1 microsecond' END AS first_seen
  FROM unnest($2::text[], $3::bigint[]) WITH ORDINALITY AS s(source, us, i)
), inserted AS (
  INSERT INTO scan_keys (digest, source, first_seen)
  SELECT digest, source, first_seen FROM input ORDER BY digest
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest, first_seen
)
SELECT input.i, true,
       to_char(inserted.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM inserted JOIN input USING (digest)
UNION ALL
SELECT input.i, false,
       to_char(k.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM input JOIN scan_keys k USING (digest)
UNION ALL
SELECT 0, false, txid_current_if_assigned()::text
)sql";

// The unnest INSERT of batch_statement.cc, but reading the already-present rows (with their first_seen as
// µs) in the same statement, as the old one did, instead of a follow-up statement for the missing ones.
constexpr const char* kOneStatementSql = R"sql(
WITH input AS (
  SELECT d, s, us, i FROM unnest($1::bytea[], $2::text[], $3::int8[]) WITH ORDINALITY AS u(d, s, us, i)
), ins AS (
  INSERT INTO scan_keys (digest, source, first_seen)
  SELECT d, s, CASE WHEN us = 0 THEN now() ELSE timestamptz 'epoch' + us * interval '1 microsecond' END
  FROM input ORDER BY d
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest
)
SELECT encode(digest, 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, input.i, (extract(epoch FROM k.first_seen) * 1000000)::int8 FROM input JOIN scan_keys k ON k.digest = input.d
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8
)sql";

pqxx::binarystring Bin(std::string_view v) { return pqxx::binarystring(v.data(), v.size()); }

void OldShape(pqxx::connection& c, const std::vector<Digest>& batch) {
  std::string digests, sources = "{", times = "{";
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (i > 0) {
      sources += ',';
      times += ',';
    }
    digests.append(reinterpret_cast<const char*>(batch[i].data()), batch[i].size());
    sources += "\"till-1\"";
    times += '0';
  }
  sources += '}';
  times += '}';
  pqxx::work tx(c);
  const pqxx::result r = tx.exec_prepared("bench_old", Bin(digests), sources, times);
  std::size_t sum = 0;
  for (const auto& row : r) sum += row[0].as<std::size_t>() + row[2].size();
  if (sum == 0) throw std::runtime_error("old shape: no rows");
  tx.commit();
}

void NewShape(pqxx::connection& c, std::int64_t generation, const std::vector<Digest>& batch) {
  BatchStatement st(batch.size());
  st.SetWriteOrder(generation);  // the store's first statement (storage/epochs/catalog.h), measured with the rest
  for (const auto& d : batch) st.Add(d, "till-1", 0);
  pqxx::work tx(c);
  const BatchAnswer a = st.Run(tx);
  if (a.results.size() != batch.size()) throw std::runtime_error("new shape: wrong answer");
  tx.commit();
}

void OneStatementShape(pqxx::connection& c, const std::vector<Digest>& batch) {
  PgBinaryArray digests(kOidBytea, batch.size(), 32 * batch.size()), sources(kOidText, batch.size(), 8 * batch.size()),
      times(kOidInt8, batch.size(), 8 * batch.size());
  for (const auto& d : batch) {
    digests.Add(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
    sources.Add("till-1");
    times.AddInt8(0);
  }
  pqxx::work tx(c);
  const pqxx::result r = tx.exec_prepared("bench_one", Bin(digests.Finish()), Bin(sources.Finish()), Bin(times.Finish()));
  std::size_t sum = 0;
  for (const auto& row : r) sum += row[0].size() + (row[1].is_null() ? 0 : 1);
  if (sum == 0) throw std::runtime_error("one-statement shape: no rows");
  tx.commit();
}

// BatchStatement::BeginCopy / CommitCopy, the path a batch of Bloom negatives takes: BEGIN, txid_current() +
// now(), binary COPY of (digest, source, first_seen) and COMMIT in two round trips. It cannot skip a
// conflicting row (a duplicate aborts the COPY; the store then re-runs the batch through Run()), so it is
// measured on all-new batches only.
void CopyShape(PgConnection& c, std::int64_t generation, const std::vector<Digest>& batch) {
  BatchStatement st(batch.size());
  st.SetWriteOrder(generation);
  for (const auto& d : batch) st.Add(d, "till-1", 0);
  const BatchAnswer a = st.BeginCopy(c.raw());
  if (a.results.size() != batch.size()) throw std::runtime_error("copy shape: wrong answer");
  st.CommitCopy(c.raw());
}

void Shapes(const std::string& url, std::size_t keys_per_cell, int reps, const std::vector<std::size_t>& sizes) {
  pqxx::connection old_c(url), new_c(url), one_c(url);
  PgConnection copy_c(url);
  for (pqxx::connection* c : {&old_c, &new_c, &one_c, static_cast<pqxx::connection*>(&copy_c)}) {
    c->set_client_encoding("UTF8");
  }
  old_c.prepare("bench_old", kOldInsertSql);
  BatchStatement::Prepare(new_c);
  one_c.prepare("bench_one", kOneStatementSql);
  BatchStatement::Prepare(copy_c);
  const std::int64_t generation = ReadEpochCatalog(new_c).generation;
  const std::vector<std::string> names = {"old CTE+to_char", "unnest+follow-up (Run)", "unnest, one statement",
                                          "binary COPY (BeginCopy + CommitCopy)"};
  // (dup percent, size, shape) -> keys/s of each repetition
  std::map<std::tuple<int, std::size_t, int>, std::vector<double>> figures;
  std::vector<Digest> present;  // digests committed by earlier cells (for duplicates)
  for (int rep = 0; rep < reps; ++rep) {
    for (const int dup_pct : {0, 50}) {
      for (const std::size_t size : sizes) {
        for (int shape = 0; shape < 4; ++shape) {
          if (shape == 3 && dup_pct > 0) continue;  // a duplicate aborts a COPY
          const std::size_t batches = std::max<std::size_t>(4, keys_per_cell / size);
          std::vector<std::vector<Digest>> work(batches);
          std::mt19937_64 rng{std::random_device{}()};
          for (auto& b : work) {
            b = RandomDigests(size);
            if (dup_pct > 0 && present.size() >= size) {
              for (std::size_t i = 0; i < size * dup_pct / 100; ++i) b[i] = present[rng() % present.size()];
              // a digest twice in one batch would be a different case: make them distinct
              std::sort(b.begin(), b.end());
              b.erase(std::unique(b.begin(), b.end()), b.end());
            }
          }
          const auto t0 = Clock::now();
          std::size_t keys = 0;
          for (const auto& b : work) {
            switch (shape) {
              case 0: OldShape(old_c, b); break;
              case 1: NewShape(new_c, generation, b); break;
              case 2: OneStatementShape(one_c, b); break;
              case 3: CopyShape(copy_c, generation, b); break;
            }
            keys += b.size();
          }
          const double secs = Seconds(t0);
          figures[{dup_pct, size, shape}].push_back(keys / secs);
          std::printf("rep %d dup %2d%% batch %4zu %-28s %9.0f keys/s (%zu keys, %.2f s)\n", rep + 1, dup_pct, size,
                      names[static_cast<std::size_t>(shape)].c_str(), keys / secs, keys, secs);
          std::fflush(stdout);
          for (std::size_t i = 0; i < 2; ++i) present.insert(present.end(), work[i].begin(), work[i].end());
        }
      }
    }
  }
  std::printf("\nmedian keys/s of %d repetitions (per row cost = 1/keys/s)\n| duplicates | batch |", reps);
  for (const auto& n : names) std::printf(" %s |", n.c_str());
  std::printf("\n|---|---:|---:|---:|---:|---:|\n");
  for (const int dup_pct : {0, 50}) {
    for (const std::size_t size : sizes) {
      std::printf("| %d %% | %zu |", dup_pct, size);
      for (int shape = 0; shape < 4; ++shape) {
        auto v = figures[{dup_pct, size, shape}];
        if (v.empty()) {
          std::printf(" - |");
          continue;
        }
        std::sort(v.begin(), v.end());
        std::printf(" %.0f |", v[v.size() / 2]);
      }
      std::printf("\n");
    }
  }
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
  bool shapes = false;
  long prefill = 0;
  std::size_t shape_keys = 65536;
  int reps = 3;
  std::vector<std::size_t> sizes{64, 256, 1024, 4096};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keys-scale" && i + 1 < argc) scale = std::atof(argv[++i]);
    else if (a == "--writers" && i + 1 < argc) writers = static_cast<unsigned>(std::atoi(argv[++i]));
    else if (a == "--warm" && i + 1 < argc) warm = std::atol(argv[++i]);
    else if (a == "--old" && i + 1 < argc) old = std::atol(argv[++i]);
    else if (a == "--index" && i + 1 < argc) index = argv[++i];
    else if (a == "--skip-insert") skip_insert = true;
    else if (a == "--quick") quick = true;
    else if (a == "--shapes") shapes = true;
    else if (a == "--prefill" && i + 1 < argc) prefill = std::atol(argv[++i]);
    else if (a == "--shape-keys" && i + 1 < argc) shape_keys = static_cast<std::size_t>(std::atol(argv[++i]));
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        sizes.push_back(std::strtoul(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
      }
    }
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
  if (shapes) {
    if (prefill > 0) {
      const auto t0 = Clock::now();
      pqxx::nontransaction tx(conn);
      tx.exec_params0("INSERT INTO scan_keys (digest) SELECT sha256(convert_to('pre-' || gen_random_uuid()::text "
                      "|| g, 'UTF8')) FROM generate_series(1, $1::bigint) g",
                      prefill);
      tx.exec0("VACUUM ANALYZE scan_keys");
      std::printf("prefilled %ld rows in %.1f s (+ VACUUM ANALYZE)\n", prefill, Seconds(t0));
    }
    Shapes(url, shape_keys, reps, sizes);
    return 0;
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
