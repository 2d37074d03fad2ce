// Tests storage/horizon/expiry.h against the throwaway PostgreSQL of fixture "pg": a pass deletes exactly the rows
// older than the horizon (across many slices), leaves younger ones, skips a row another transaction holds
// locked (without waiting for it) and deletes it at a later pass; the vital signs (oldest row's age, lag, table
// and index bytes); a falling-behind episode (oldest row older than 1.5x the horizon) is counted and logged
// once, and its end too; with the horizon off nothing is deleted; the thread runs passes by itself, logs a
// failing database once, and stops promptly. Pack rows (issue 24, pack_horizons): deleted by their own
// keep_until, never by the retention; their vital signs and behind state.
// Every test starts from an empty scan_keys (TRUNCATE): the expiry looks at the whole table, and the pg tests
// never run concurrently (RESOURCE_LOCK pg).
#include "storage/horizon/expiry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "tests/storage/event_log.h"
#include "tests/storage/pg_test_db.h"
#include "tests/storage/scratch_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr auto kEventually = 30s;  // liveness bound (not a performance assertion)
constexpr auto kHorizon = std::chrono::seconds(3600);

std::string Url() { return PgTestUrl(); }

// `url` with a statement_timeout: a statement that waits on a lock fails after `ms` instead of hanging the test.
std::string WithStatementTimeout(const std::string& url, int ms) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + "options=-c%20statement_timeout%3D" +
         std::to_string(ms);
}


ExpiryOptions Options(std::chrono::seconds retention, std::shared_ptr<LogSink> log = nullptr) {
  ExpiryOptions o;
  o.conninfo = WithStatementTimeout(Url(), 10000);
  o.retention = retention;
  o.slice_rows = 100;
  o.log = log ? std::move(log) : std::make_shared<EventLog>();
  return o;
}

pqxx::connection Connect() { return pqxx::connection(Url()); }

// `n` rows of fresh digests first seen `age` ago (an SQL interval), source `source`.
void InsertRows(int n, const std::string& age, const std::string& source) {
  auto c = Connect();
  pqxx::work tx(c);
  tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) "
                  "SELECT scangate_stored_digest(sha256(convert_to(gen_random_uuid()::text || g, 'UTF8'))), $2, now() - $3::interval "
                  "FROM generate_series(1, $1::int) g",
                  n, source, age);
  tx.commit();
}

// One row for `d`, first seen `age` ago.
void InsertRow(const Digest& d, const std::string& age) {
  auto c = Connect();
  pqxx::work tx(c);
  tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), 'one', now() - $2::interval)",
                  HexBytea(d), age);
  tx.commit();
}

// `n` pinned rows (pack rows with a keep_until): first seen `age` ago, keep_until at now() + `keep_until` (an SQL
// interval, negative = passed), source `source`.
void InsertPinnedRows(int n, const std::string& age, const std::string& keep_until, const std::string& source) {
  auto c = Connect();
  pqxx::work tx(c);
  tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen, expiry, keep_until) "
                  "SELECT scangate_stored_digest(sha256(convert_to(gen_random_uuid()::text || g, 'UTF8'))), $2, now() - $3::interval, "
                  "date '2027-12-31', now() + $4::interval FROM generate_series(1, $1::int) g",
                  n, source, age, keep_until);
  tx.commit();
}

// Rows of scan_keys with source `source` ("" = all rows).
std::int64_t Rows(const std::string& source = "") {
  auto c = Connect();
  pqxx::nontransaction tx(c);
  if (source.empty()) return tx.exec1("SELECT count(*) FROM scan_keys")[0].as<std::int64_t>();
  return tx.exec_params1("SELECT count(*) FROM scan_keys WHERE seen_by = $1", source)[0].as<std::int64_t>();
}

// Rows older than `seconds`, by PostgreSQL's clock.
std::int64_t RowsOlderThan(std::int64_t seconds) {
  auto c = Connect();
  pqxx::nontransaction tx(c);
  return tx.exec_params1("SELECT count(*) FROM scan_keys WHERE first_seen < now() - $1::int8 * interval '1 second'",
                         seconds)[0]
      .as<std::int64_t>();
}

// Holds a row lock on `d` (SELECT ... FOR UPDATE in an open transaction) until Release() or destruction, as a
// writer taking the row over (or another instance's expiry) would.
class RowLock {
 public:
  explicit RowLock(const Digest& d) : conn_(Url()), tx_(std::make_unique<pqxx::work>(conn_)) {
    const auto r = tx_->exec_params("SELECT 1 FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea) FOR UPDATE", HexBytea(d));
    EXPECT_EQ(r.size(), 1u) << "no row to lock";
  }
  void Release() {
    if (tx_) tx_->abort();
    tx_.reset();
  }

 private:
  pqxx::connection conn_;
  std::unique_ptr<pqxx::work> tx_;
};

bool Eventually(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

class ExpiryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
    auto c = Connect();
    pqxx::nontransaction(c).exec0("TRUNCATE scan_keys");
  }
  void TearDown() override {
    auto c = Connect();
    pqxx::nontransaction(c).exec0("TRUNCATE scan_keys");
  }
};

// 350 rows past the horizon (3.5 slices of 100), 120 within it (30 min old) and 50 fresh: one pass deletes the
// 350 and nothing else, and says so (return value, rows_expired); the next pass finds nothing.
TEST_F(ExpiryTest, PassDeletesExactlyTheExpiredRows) {
  InsertRows(350, "2 hours", "expired");
  InsertRows(120, "30 minutes", "within");
  InsertRows(50, "0 seconds", "fresh");
  Expiry expiry(Options(kHorizon));
  EXPECT_EQ(expiry.RunOnce(), 350u);
  EXPECT_EQ(Rows("expired"), 0);
  EXPECT_EQ(Rows("within"), 120);
  EXPECT_EQ(Rows("fresh"), 50);
  EXPECT_EQ(RowsOlderThan(kHorizon.count()), 0);
  ExpiryStats s = expiry.Stats();
  EXPECT_EQ(s.rows_expired, 350u);
  EXPECT_EQ(s.passes, 1u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(expiry.RunOnce(), 0u);
  s = expiry.Stats();
  EXPECT_EQ(s.rows_expired, 350u);
  EXPECT_EQ(s.passes, 2u);
  EXPECT_EQ(Rows(), 170);
}

// Retarget (a partition moved): the next pass leaves the old database and deletes in the new one only.
TEST_F(ExpiryTest, RetargetMovesTheNextPassToTheNewDatabase) {
  ScratchDb moved("sg_expiry_moved");
  {
    pqxx::connection c(moved.conninfo);
    ApplyMigrations(c);
  }
  moved.Exec("INSERT INTO scan_keys (digest, seen_by, first_seen) SELECT scangate_stored_digest(sha256(convert_to(g::text, 'UTF8'))), "
             "'moved', now() - interval '2 hours' FROM generate_series(1, 30) g");
  Expiry expiry(Options(kHorizon));
  expiry.RunOnce();  // connected to the fixture's database (whatever it held expired is gone now)
  InsertRows(20, "2 hours", "stays");
  expiry.Retarget(moved.conninfo);
  EXPECT_EQ(expiry.RunOnce(), 30u);
  EXPECT_EQ(Rows("stays"), 20);  // the old database was not touched
  pqxx::connection c(moved.conninfo);
  pqxx::nontransaction tx(c);
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM scan_keys")[0].as<int>(), 0);
}

// A row another transaction holds locked is skipped (SKIP LOCKED): the pass neither waits for it (it would hit
// the connection's statement_timeout and throw) nor stops the others being deleted; once the lock is gone a
// later pass deletes it.
TEST_F(ExpiryTest, LockedRowIsSkippedAndDeletedLater) {
  const Digest locked = RandomDigest();
  InsertRow(locked, "3 hours");  // the oldest: the first row of the first slice
  InsertRows(249, "2 hours", "expired");
  Expiry expiry(Options(kHorizon));
  RowLock lock(locked);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t deleted = 0;
  ASSERT_NO_THROW(deleted = expiry.RunOnce());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(deleted, 249u);
  EXPECT_LT(took, 5s) << "the pass waited for the locked row";
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(expiry.RunOnce(), 0u) << "deleted a locked row";
  lock.Release();
  EXPECT_EQ(expiry.RunOnce(), 1u);
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(expiry.Stats().rows_expired, 250u);
  EXPECT_EQ(expiry.Stats().failures, 0u);
}

// Vital signs: on an empty table no oldest age and no lag; with rows the oldest row's age (as backdated), the
// table's and its indexes' bytes, the tuple estimates; lag = how far the oldest row is past the horizon.
TEST_F(ExpiryTest, VitalSigns) {
  Expiry expiry(Options(kHorizon));
  EXPECT_EQ(expiry.Stats().table_bytes, -1);  // before the first pass: none read yet
  EXPECT_FALSE(expiry.Stats().oldest_age_seconds.has_value());
  expiry.RunOnce();
  ExpiryStats s = expiry.Stats();
  EXPECT_FALSE(s.oldest_age_seconds.has_value()) << *s.oldest_age_seconds;
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_GE(s.table_bytes, 0);
  EXPECT_GT(s.index_bytes, 0);  // the primary key and the first_seen indexes have their metapages
  EXPECT_GE(s.dead_tuples, 0);
  EXPECT_GE(s.live_tuples, 0);

  // Within the horizon: 30 minutes old at most, no lag.
  InsertRows(2000, "30 minutes", "within");
  InsertRows(10, "0 seconds", "fresh");
  EXPECT_EQ(expiry.RunOnce(), 0u);
  s = expiry.Stats();
  ASSERT_TRUE(s.oldest_age_seconds.has_value());
  EXPECT_GE(*s.oldest_age_seconds, 1800);
  EXPECT_LT(*s.oldest_age_seconds, 1800 + 60);
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_GT(s.table_bytes, 8192 * 10) << "2 010 rows of ~100 B";
  EXPECT_GT(s.index_bytes, 8192 * 3);
  EXPECT_FALSE(s.behind);

  // An old row that cannot be deleted (locked): the age is its own, the lag its distance past the horizon.
  const Digest old = RandomDigest();
  InsertRow(old, "80 minutes");
  RowLock lock(old);
  EXPECT_EQ(expiry.RunOnce(), 0u);
  s = expiry.Stats();
  ASSERT_TRUE(s.oldest_age_seconds.has_value());
  EXPECT_GE(*s.oldest_age_seconds, 4800);
  EXPECT_LT(*s.oldest_age_seconds, 4800 + 60);
  EXPECT_GE(s.lag_seconds, 1200);
  EXPECT_LT(s.lag_seconds, 1200 + 60);
  EXPECT_FALSE(s.behind) << "80 minutes is less than 1.5x an hour";
  lock.Release();
  EXPECT_EQ(expiry.RunOnce(), 1u);
  s = expiry.Stats();
  EXPECT_LT(*s.oldest_age_seconds, 1800 + 60);
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_EQ(s.failures, 0u);
}

// Falling behind: the oldest row older than 1.5x the horizon and not deletable (locked) -> behind, one episode,
// one "expiry_behind" line (state behind) however many passes it lasts; once the row goes -> not behind, one
// "caught_up" line, the episode count unchanged.
TEST_F(ExpiryTest, BehindIsCountedAndLoggedOncePerEpisode) {
  auto log = std::make_shared<EventLog>();
  Expiry expiry(Options(kHorizon, log));
  InsertRows(10, "10 minutes", "within");
  expiry.RunOnce();
  EXPECT_FALSE(expiry.Stats().behind);
  EXPECT_EQ(log->size(), 0u);

  const Digest stuck = RandomDigest();
  InsertRow(stuck, "2 hours");  // 2x the horizon
  RowLock lock(stuck);
  for (int pass = 0; pass < 3; ++pass) {
    EXPECT_EQ(expiry.RunOnce(), 0u);
    const ExpiryStats s = expiry.Stats();
    EXPECT_TRUE(s.behind) << pass;
    EXPECT_EQ(s.behind_events, 1u) << pass;
    EXPECT_GE(s.lag_seconds, 3600) << pass;
  }
  EXPECT_EQ(log->Count("expiry_behind", "behind"), 1);
  EXPECT_EQ(log->Count("expiry_behind", "caught_up"), 0);
  {
    std::lock_guard lk(log->mu);
    const auto& fields = log->events.front().second;
    EXPECT_GE(fields.at("oldest_age_s").to_number<double>(), 7200);
    EXPECT_EQ(fields.at("retention_s").to_number<double>(), 3600);
  }

  lock.Release();
  EXPECT_EQ(expiry.RunOnce(), 1u);
  ExpiryStats s = expiry.Stats();
  EXPECT_FALSE(s.behind);
  EXPECT_EQ(s.behind_events, 1u);
  EXPECT_EQ(log->Count("expiry_behind", "caught_up"), 1);
  expiry.RunOnce();
  EXPECT_EQ(log->Count("expiry_behind", "caught_up"), 1);
  EXPECT_EQ(log->Count("expiry_behind", "behind"), 1);

  // A second episode is a second event.
  const Digest again = RandomDigest();
  InsertRow(again, "3 hours");
  RowLock lock2(again);
  expiry.RunOnce();
  EXPECT_EQ(expiry.Stats().behind_events, 2u);
  EXPECT_EQ(log->Count("expiry_behind", "behind"), 2);
}

// With the horizon off nothing is deleted however old, but the vital signs are still read; never behind.
TEST_F(ExpiryTest, OffDeletesNothingButReadsVitalSigns) {
  auto log = std::make_shared<EventLog>();
  Expiry expiry(Options(std::chrono::seconds(0), log));
  InsertRows(300, "3650 days", "ancient");
  EXPECT_EQ(expiry.RunOnce(), 0u);
  EXPECT_EQ(Rows("ancient"), 300);
  const ExpiryStats s = expiry.Stats();
  EXPECT_EQ(s.passes, 1u);
  EXPECT_EQ(s.rows_expired, 0u);
  ASSERT_TRUE(s.oldest_age_seconds.has_value());
  EXPECT_GE(*s.oldest_age_seconds, 3650.0 * 86400);
  EXPECT_GT(s.table_bytes, 0);
  EXPECT_GT(s.index_bytes, 0);
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_FALSE(s.behind);
  EXPECT_EQ(s.behind_events, 0u);
  EXPECT_EQ(log->size(), 0u);
}

// The interval between passes: as given, or a tenth of the horizon within [1 s, 60 s]; 60 s when off.
TEST(ExpiryInterval, DerivedFromTheHorizon) {
  auto interval = [](std::chrono::seconds retention, std::chrono::milliseconds given) {
    ExpiryOptions o;
    o.retention = retention;
    o.interval = given;
    return Expiry(o).interval();
  };
  EXPECT_EQ(interval(3600s, 200ms), 200ms);
  EXPECT_EQ(interval(2s, 0ms), 1s);
  EXPECT_EQ(interval(100s, 0ms), 10s);
  EXPECT_EQ(interval(3600s, 0ms), 60s);
  EXPECT_EQ(interval(0s, 0ms), 60s);
}

// Start(): passes run by themselves (every 200 ms here) — expired rows inserted later are deleted too — and
// Shutdown() stops it; with a long interval Shutdown() does not wait for the next pass.
TEST_F(ExpiryTest, ThreadRunsPassesByItselfAndStopsPromptly) {
  {
    ExpiryOptions o = Options(kHorizon);
    o.interval = 200ms;
    Expiry expiry(o);
    InsertRows(250, "2 hours", "expired");
    InsertRows(20, "1 minute", "within");
    expiry.Start();
    EXPECT_TRUE(Eventually([&] { return Rows("expired") == 0; })) << Rows("expired") << " left";
    const std::uint64_t passes = expiry.Stats().passes;
    InsertRows(130, "5 hours", "expired");
    EXPECT_TRUE(Eventually([&] { return Rows("expired") == 0; })) << Rows("expired") << " left";
    EXPECT_TRUE(Eventually([&] { return expiry.Stats().passes >= passes + 2; }));
    expiry.Shutdown();
    const ExpiryStats s = expiry.Stats();
    EXPECT_EQ(s.rows_expired, 380u);
    EXPECT_EQ(s.failures, 0u);
    EXPECT_EQ(Rows("within"), 20);
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(expiry.Stats().passes, s.passes) << "passes after Shutdown()";
    expiry.Shutdown();  // idempotent
  }
  {
    ExpiryOptions o = Options(kHorizon);
    o.interval = 60s;
    Expiry expiry(o);
    expiry.Start();
    ASSERT_TRUE(Eventually([&] { return expiry.Stats().passes >= 1; }));  // the first pass runs at once
    const auto t0 = std::chrono::steady_clock::now();
    expiry.Shutdown();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "Shutdown() waited for the interval";
  }
}

// An unreachable database: every pass fails (counted), the thread keeps trying, and the failure is logged once
// (not once per pass); RunOnce throws.
TEST(ExpiryFailure, UnreachableIsCountedAndLoggedOnce) {
  auto log = std::make_shared<EventLog>();
  ExpiryOptions o;
  o.conninfo = "postgresql://postgres@127.0.0.1:1/none?connect_timeout=1";
  o.retention = kHorizon;
  o.interval = 50ms;
  o.log = log;
  {
    Expiry once(o);
    EXPECT_ANY_THROW(once.RunOnce());
    EXPECT_EQ(once.Stats().passes, 0u);
  }
  Expiry expiry(o);
  expiry.Start();
  EXPECT_TRUE(Eventually([&] { return expiry.Stats().failures >= 3; }));
  expiry.Shutdown();
  EXPECT_EQ(expiry.Stats().passes, 0u);
  EXPECT_EQ(log->Count("expiry", "failing"), 1);
  EXPECT_EQ(log->Count("expiry", "recovered"), 0);
}

// Pack horizons with the retention off: a pass deletes exactly the rows past their own keep_until (2.5 slices),
// however young or old their first_seen; pinned rows within their keep_until and unpinned rows (however old) stay.
// Without pack_horizons nothing is deleted.
TEST_F(ExpiryTest, PackSlicesDeleteRowsPastTheirKeepUntil) {
  InsertPinnedRows(250, "2 years", "-1 hour", "past");
  InsertPinnedRows(10, "0 seconds", "-1 second", "past");
  InsertPinnedRows(80, "2 years", "1 day", "pinned");
  InsertRows(30, "3650 days", "unpinned");
  {
    Expiry off(Options(std::chrono::seconds(0)));
    EXPECT_EQ(off.RunOnce(), 0u);
    EXPECT_EQ(Rows("past"), 260);
  }
  auto opts = Options(std::chrono::seconds(0));
  opts.pack_horizons = true;
  Expiry expiry(opts);
  EXPECT_EQ(expiry.RunOnce(), 260u);
  EXPECT_EQ(Rows("past"), 0);
  EXPECT_EQ(Rows("pinned"), 80);
  EXPECT_EQ(Rows("unpinned"), 30);
  ExpiryStats s = expiry.Stats();
  EXPECT_EQ(s.rows_expired, 260u);
  EXPECT_EQ(s.rows_expired_keep_until, 260u);
  ASSERT_TRUE(s.earliest_keep_until_in_seconds.has_value());
  EXPECT_GT(*s.earliest_keep_until_in_seconds, 86400 - 60);
  EXPECT_LE(*s.earliest_keep_until_in_seconds, 86400);
  ASSERT_TRUE(s.oldest_age_seconds.has_value());
  EXPECT_GE(*s.oldest_age_seconds, 3650.0 * 86400) << "the oldest unpinned row";
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_FALSE(s.behind);
  EXPECT_EQ(expiry.RunOnce(), 0u);
}

// Pack horizons with a retention: a pinned row older than the retention but within its keep_until stays (the
// first_seen slice skips pinned rows); an unpinned row past the retention goes, a pinned one past its keep_until
// too. The oldest-row age is the oldest unpinned row's.
TEST_F(ExpiryTest, PinnedRowPastTheRetentionButWithinItsKeepUntilStays) {
  InsertPinnedRows(150, "3 hours", "30 days", "pinned");
  InsertPinnedRows(20, "3 hours", "-1 minute", "past");
  InsertRows(120, "2 hours", "expired");
  InsertRows(15, "10 minutes", "within");
  auto opts = Options(kHorizon);
  opts.pack_horizons = true;
  Expiry expiry(opts);
  EXPECT_EQ(expiry.RunOnce(), 140u);
  EXPECT_EQ(Rows("pinned"), 150);
  EXPECT_EQ(Rows("past"), 0);
  EXPECT_EQ(Rows("expired"), 0);
  EXPECT_EQ(Rows("within"), 15);
  const ExpiryStats s = expiry.Stats();
  EXPECT_EQ(s.rows_expired, 140u);
  EXPECT_EQ(s.rows_expired_keep_until, 20u);
  ASSERT_TRUE(s.oldest_age_seconds.has_value());
  EXPECT_LT(*s.oldest_age_seconds, 600 + 60) << "pinned rows are not the oldest unpinned row";
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_FALSE(s.behind);
}

// A pinned row past its keep_until that cannot be deleted (locked) is skipped without waiting; while it is
// overdue by more than 1.5 passes the expiry is behind (lag = how far overdue, logged once with
// keep_until_overdue_s); once it goes, caught up.
TEST_F(ExpiryTest, OverduePinnedRowIsBehindUntilDeleted) {
  auto log = std::make_shared<EventLog>();
  auto opts = Options(std::chrono::seconds(0), log);
  opts.pack_horizons = true;
  Expiry expiry(opts);
  ASSERT_EQ(expiry.interval(), std::chrono::seconds(60));
  const Digest stuck = RandomDigest();
  {
    auto c = Connect();
    pqxx::work tx(c);
    tx.exec_params0("INSERT INTO scan_keys (digest, first_seen, keep_until) VALUES (scangate_stored_digest($1::bytea), now() - interval "
                    "'1 year', now() - interval '1 hour')",
                    HexBytea(stuck));
    tx.commit();
  }
  InsertPinnedRows(5, "1 year", "-2 hours", "past");
  RowLock lock(stuck);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(expiry.RunOnce(), 5u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "the pass waited for the locked row";
  ExpiryStats s = expiry.Stats();
  EXPECT_TRUE(s.behind);
  EXPECT_EQ(s.behind_events, 1u);
  EXPECT_GE(s.lag_seconds, 3600);
  EXPECT_LT(s.lag_seconds, 3600 + 60);
  EXPECT_EQ(log->Count("expiry_behind", "behind"), 1);
  {
    std::lock_guard lk(log->mu);
    EXPECT_GE(log->events.front().second.at("keep_until_overdue_s").to_number<double>(), 3600);
  }
  lock.Release();
  EXPECT_EQ(expiry.RunOnce(), 1u);
  s = expiry.Stats();
  EXPECT_FALSE(s.behind);
  EXPECT_EQ(s.lag_seconds, 0);
  EXPECT_FALSE(s.earliest_keep_until_in_seconds.has_value());
  EXPECT_EQ(log->Count("expiry_behind", "caught_up"), 1);
}

// sql/006's partial indexes (in sql/013's form: the first_seen btree led by the second) serve what the expiry asks
// of them: the first_seen slice (rows without keep_until), the keep_until slice (`keep_until < now()` implies the
// index predicate) and both vital-sign minima. With sequential scans disabled the plan names the index, or the
// planner could not prove the partial predicate or match the key's expression.
TEST_F(ExpiryTest, SlicesAndVitalSignsCanUseThePartialIndexes) {
  auto c = Connect();
  pqxx::work tx(c);
  tx.exec0("SET LOCAL enable_seqscan = off");
  auto plan = [&](const std::string& sql) {
    std::string text;
    for (const auto& row : tx.exec("EXPLAIN " + sql)) text += row[0].as<std::string>() + "\n";
    return text;
  };
  EXPECT_NE(plan("SELECT ctid FROM scan_keys WHERE keep_until IS NULL AND date_trunc('second', first_seen AT TIME "
                 "ZONE 'UTC') < date_trunc('second', (now() - 1000000 * interval '1 microsecond') AT TIME ZONE 'UTC') "
                 "ORDER BY date_trunc('second', first_seen AT TIME ZONE 'UTC') LIMIT 100 FOR UPDATE SKIP LOCKED")
                .find("scan_keys_first_seen_unpinned"),
            std::string::npos);
  EXPECT_NE(plan("SELECT ctid FROM scan_keys WHERE keep_until < now() ORDER BY keep_until LIMIT 100 "
                 "FOR UPDATE SKIP LOCKED")
                .find("scan_keys_keep_until"),
            std::string::npos);
  EXPECT_NE(plan("SELECT min(date_trunc('second', first_seen AT TIME ZONE 'UTC')) AT TIME ZONE 'UTC' FROM scan_keys "
                 "WHERE keep_until IS NULL")
                .find("scan_keys_first_seen_unpinned"),
            std::string::npos);
  EXPECT_NE(plan("SELECT min(keep_until) FROM scan_keys WHERE keep_until IS NOT NULL").find("scan_keys_keep_until"),
            std::string::npos);
}

}  // namespace
}  // namespace scangate::storage
