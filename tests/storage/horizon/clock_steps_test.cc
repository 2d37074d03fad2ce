// Tests sql/017 (the forward steps of PostgreSQL's clock) through every statement that judges the horizon, against
// the throwaway PostgreSQL of fixture "pg": a row written before a recorded forward step of S is aged S less — the
// raw and the pack take-over (storage/pg/batch_statement.cc), the partition function scangate_observe, /lookup
// (storage/read/lookup.cc), the expiry (storage/horizon/expiry.cc) and the warm start (Store::WarmLoad) all keep it
// S longer — while a row written after the step, and any row past the horizon plus the step, is judged as before.
// scangate_clock_record_step records a step once per epoch, less what other
// instances already recorded for the epochs between. Ages by backdating and steps by rows of scangate_clock_steps
// (PostgreSQL's clock itself is stepped by tests/server/service_clock_forward_test.cc): no timing involved.
// A step back is subtracted the other way: a row written before it is older than the clock says, and expires
// sooner; a forward step and a step back after a row cancel.
// Every test starts from an empty scan_keys and no recorded step (the pg tests never run concurrently).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "storage/clock/pg_clock.h"
#include "storage/horizon/expiry.h"
#include "storage/read/lookup.h"
#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/event_log.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr auto kHorizon = std::chrono::hours(1);

std::string Url() { return PgTestUrl(); }

void Exec(const std::string& sql) {
  pqxx::connection c(Url());
  pqxx::nontransaction(c).exec0(sql);
}

// A step of `step` (an SQL interval, negative = back) recorded for epoch `epoch`, `after` (an SQL interval) before
// now: every row first seen earlier than that was written before it.
void RecordStep(std::int64_t epoch, const std::string& after, const std::string& step) {
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  tx.exec_params0("INSERT INTO scangate_clock_steps (epoch, before, step) VALUES ($1, now() - $2::interval, $3::interval)",
                  epoch, after, step);
}

// One row for `d` (source `source`), first seen `age` ago; with `keep_until` (an SQL interval from now), a pack row.
void InsertRow(const Digest& d, const std::string& age, const std::string& source = "old",
               const std::optional<std::string>& keep_until = std::nullopt) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  if (keep_until) {
    tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen, keep_until) "
                    "VALUES (scangate_stored_digest($1::bytea), $2, now() - $3::interval, now() + $4::interval)",
                    HexBytea(d), source, age, *keep_until);
  } else {
    tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), $2, "
                    "now() - $3::interval)",
                    HexBytea(d), source, age);
  }
  tx.commit();
}

bool Present(const Digest& d) {
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  return !tx.exec_params("SELECT 1 FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(d)).empty();
}

// A writer's route (any: one writer here).
std::uint32_t RouteOf(const Digest& d) { return d[0] | (d[1] << 8); }

Outcome Submit(Store& store, const Digest& d, const PackAttrs& attrs = {}) {
  Answer<Result> answer;
  if (!store.Submit(RouteOf(d), d, "new", answer.Setter(), nullptr, Expect::kUnknown, attrs)) {
    ADD_FAILURE() << "Submit refused";
    return Outcome::kUnknown;
  }
  return answer.Get().outcome;
}

// An expiry of the hour's horizon and its packs, guarded by `clock` (none: unguarded).
ExpiryOptions HorizonExpiry(const PgClock* clock = nullptr) {
  ExpiryOptions o;
  o.conninfo = Url();
  o.retention = kHorizon;
  o.pack_horizons = true;
  o.slice_rows = 100;
  o.log = std::make_shared<EventLog>();
  o.clock = clock;
  return o;
}

StoreOptions Options(std::chrono::seconds retention, bool packs = false) {
  StoreOptions o;
  o.url = Url();
  o.writers = 1;
  o.retention = retention;
  o.pack_horizons = packs;
  return o;
}

class ClockSteps : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
    Exec("TRUNCATE scan_keys");
    Exec("DELETE FROM scangate_clock_steps");
  }
  void TearDown() override {
    Exec("TRUNCATE scan_keys");
    Exec("DELETE FROM scangate_clock_steps");
  }
};

// The raw take-over: 61 minutes by the clock under an hour's horizon is expired — unless the clock stepped forward
// by 5 minutes after the row was written (then it is 56 minutes old: a duplicate, the row untouched); 66 minutes by
// the clock is past the horizon and the step; two forward steps after a row add up, a step back after it counts the
// other way.
TEST_F(ClockSteps, TheTakeOverAgesARowByTheStepsAfterIt) {
  Store store(Options(kHorizon));
  store.Start();
  RecordStep(1, "30 minutes", "5 minutes");  // a step 30 minutes ago
  const Digest stepped = RandomDigest(), edge = RandomDigest(), past = RandomDigest();
  InsertRow(stepped, "61 minutes");
  InsertRow(edge, "64 minutes");
  InsertRow(past, "66 minutes");
  EXPECT_EQ(Submit(store, stepped), Outcome::kDuplicate) << "a row 56 minutes old by real time was taken over";
  EXPECT_EQ(Submit(store, edge), Outcome::kDuplicate) << "a row 59 minutes old by real time was taken over";
  EXPECT_EQ(Submit(store, past), Outcome::kInserted) << "a row past the horizon and the step stayed a duplicate";
  const Digest twice = RandomDigest(), back = RandomDigest();
  InsertRow(twice, "67 minutes");
  InsertRow(back, "63 minutes");
  RecordStep(2, "10 minutes", "3 minutes");  // 59 minutes old by real time
  EXPECT_EQ(Submit(store, twice), Outcome::kDuplicate) << "the second step was not counted";
  RecordStep(3, "5 minutes", "-4 minutes");  // `back`: 63 - 5 - 3 + 4 = 59 minutes old; `twice` 63: expired
  EXPECT_EQ(Submit(store, back), Outcome::kDuplicate);
  const Digest twice_again = RandomDigest();
  InsertRow(twice_again, "67 minutes");
  EXPECT_EQ(Submit(store, twice_again), Outcome::kInserted) << "the step back after the row was not counted";
}

// A step back after a row makes it older than the clock says: 57 minutes by the clock, 4 minutes back since, is past
// an hour's horizon (the filter of an --ack=filter instance forgot it: PostgreSQL must not keep it). A step forward
// and a step back after a row cancel.
TEST_F(ClockSteps, AStepBackAgesARowTheOtherWay) {
  Store store(Options(kHorizon));
  store.Start();
  RecordStep(1, "10 minutes", "-4 minutes");
  const Digest aged = RandomDigest(), young = RandomDigest();
  InsertRow(aged, "57 minutes");
  InsertRow(young, "55 minutes");
  EXPECT_EQ(Submit(store, aged), Outcome::kInserted) << "a row 61 minutes old by real time stayed a duplicate";
  EXPECT_EQ(Submit(store, young), Outcome::kDuplicate) << "a row 59 minutes old by real time was taken over";
  Exec("DELETE FROM scangate_clock_steps");
  RecordStep(1, "30 minutes", "5 minutes");   // a failover onto a host 5 minutes ahead ...
  RecordStep(2, "25 minutes", "-5 minutes");  // ... and back
  const Digest both = RandomDigest(), within = RandomDigest();
  InsertRow(both, "61 minutes");
  InsertRow(within, "59 minutes");
  EXPECT_EQ(Submit(store, both), Outcome::kInserted) << "a step forward and back did not cancel";
  EXPECT_EQ(Submit(store, within), Outcome::kDuplicate);
}

// A step before a row was written does not age it: the row is judged by the clock alone.
TEST_F(ClockSteps, AStepBeforeTheRowChangesNothing) {
  Store store(Options(kHorizon));
  store.Start();
  RecordStep(1, "62 minutes", "5 minutes");
  const Digest after = RandomDigest(), within = RandomDigest();
  InsertRow(after, "61 minutes");
  InsertRow(within, "59 minutes");
  EXPECT_EQ(Submit(store, after), Outcome::kInserted) << "a step before the row kept it";
  EXPECT_EQ(Submit(store, within), Outcome::kDuplicate);
}

// The pack take-over (--keys=gs1): a row's keep_until (or first_seen + R) passed by the clock, but not by the real
// time since a forward step after the row, is kept; one past it by more than the step is taken over.
TEST_F(ClockSteps, ThePackTakeOverAgesARowByTheForwardStepsAfterIt) {
  Store store(Options(kHorizon, /*packs=*/true));
  store.Start();
  RecordStep(1, "30 minutes", "5 minutes");
  const Digest kept = RandomDigest(), gone = RandomDigest(), unpinned = RandomDigest();
  InsertRow(kept, "2 hours", "old", "-3 minutes");  // keep_until passed 3 minutes ago by the clock
  InsertRow(gone, "2 hours", "old", "-6 minutes");
  InsertRow(unpinned, "62 minutes");
  PackAttrs attrs;
  attrs.keep_until_us = 1;  // a pack row (any keep_until: the new row's own; the old one decides)
  EXPECT_EQ(Submit(store, kept, attrs), Outcome::kDuplicate);
  EXPECT_EQ(Submit(store, gone, attrs), Outcome::kInserted);
  EXPECT_EQ(Submit(store, unpinned, attrs), Outcome::kDuplicate);
}

// The partition function (sql/007, the PL/Proxy path) takes over by the same rule.
TEST_F(ClockSteps, ThePartitionFunctionAgesARowByTheForwardStepsAfterIt) {
  RecordStep(1, "30 minutes", "5 minutes");
  const Digest stepped = RandomDigest(), past = RandomDigest();
  InsertRow(stepped, "61 minutes");
  InsertRow(past, "66 minutes");
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  const auto r = tx.exec_params(
      "SELECT encode(digest, 'hex'), inserted FROM scangate_observe(ARRAY[$1::bytea, $2::bytea], ARRAY[NULL, NULL]::text[], "
      "ARRAY[0, 0]::int8[], 3600000000) ORDER BY 1",
      HexBytea(stepped), HexBytea(past));
  ASSERT_EQ(r.size(), 2u);
  std::set<std::string> inserted;
  for (const auto& row : r) {
    if (row[1].as<bool>()) inserted.insert(row[0].as<std::string>());
  }
  EXPECT_EQ(inserted.size(), 1u);
  EXPECT_TRUE(inserted.contains(HexBytea(past).substr(2))) << "the row past the horizon and the step was not taken over";
}

// /lookup reports a row the take-over would not take over.
TEST_F(ClockSteps, LookupFindsARowTheStepKeeps) {
  RecordStep(1, "30 minutes", "5 minutes");
  const Digest stepped = RandomDigest(), past = RandomDigest();
  InsertRow(stepped, "61 minutes");
  InsertRow(past, "66 minutes");
  LookupOptions o;
  o.url = Url();
  o.retention = kHorizon;
  Lookup lookup(o);
  lookup.Start();
  ASSERT_TRUE(lookup.up());
  const auto find = [&](const Digest& d) {
    Answer<RecordLookup> answer;
    EXPECT_TRUE(lookup.Find(d, answer.Setter()));
    return answer.Get().status;
  };
  EXPECT_EQ(find(stepped), RecordLookup::Status::kFound);
  EXPECT_EQ(find(past), RecordLookup::Status::kNotFound);
  lookup.Shutdown();
}

// The expiry deletes a row only once it is past the horizon by every forward step recorded: the row the step keeps
// stays (its key would be `new` again were it deleted), one past the horizon by more than every step goes.
TEST_F(ClockSteps, TheExpiryKeepsARowTheStepKeeps) {
  RecordStep(1, "30 minutes", "5 minutes");
  const Digest stepped = RandomDigest(), past = RandomDigest(), pinned = RandomDigest(), pin_past = RandomDigest();
  InsertRow(stepped, "61 minutes");
  InsertRow(past, "70 minutes");
  InsertRow(pinned, "2 hours", "old", "-3 minutes");
  InsertRow(pin_past, "2 hours", "old", "-6 minutes");
  Expiry expiry(HorizonExpiry());
  EXPECT_EQ(expiry.RunOnce(), 2u);
  EXPECT_TRUE(Present(stepped));
  EXPECT_TRUE(Present(pinned));
  EXPECT_FALSE(Present(past));
  EXPECT_FALSE(Present(pin_past));
}

// The warm start loads every row PostgreSQL may still count (the filter must hold each of them).
TEST_F(ClockSteps, TheWarmStartLoadsARowTheStepKeeps) {
  RecordStep(1, "30 minutes", "5 minutes");
  const Digest stepped = RandomDigest(), past = RandomDigest();
  InsertRow(stepped, "61 minutes");
  InsertRow(past, "70 minutes");
  Store store(Options(kHorizon));
  store.Start();
  std::set<Digest> loaded;
  store.WarmLoad(kHorizon, [&](std::span<const Digest> ds) {
    for (const Digest& d : ds) loaded.insert(d);
  });
  EXPECT_TRUE(loaded.contains(StoredDigest(stepped))) << "the row the step keeps was not loaded";
  EXPECT_FALSE(loaded.contains(StoredDigest(past)));
}

// scangate_clock_record_step: once per epoch (the first instance's account stands), and an instance that saw the
// clock across two epochs records only what the epochs between did not already.
TEST_F(ClockSteps, AStepIsRecordedOncePerEpochLessTheEpochsBetween) {
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  const std::string at = "(extract(epoch FROM now() - interval '1 minute') * 1000000)::int8";  // before_us
  tx.exec("SELECT scangate_clock_record_step(1, 2, 4000000, " + at + ")");
  tx.exec("SELECT scangate_clock_record_step(1, 2, 9000000, " + at + ")");  // a second account of epoch 2: ignored
  tx.exec("SELECT scangate_clock_record_step(1, 3, 10000000, " + at + ")");  // epochs 1..3: 4 s were epoch 2's
  const auto r = tx.exec("SELECT epoch, extract(epoch FROM step)::float8 FROM scangate_clock_steps ORDER BY epoch");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0][0].as<std::int64_t>(), 2);
  EXPECT_DOUBLE_EQ(r[0][1].as<double>(), 4.0);
  EXPECT_EQ(r[1][0].as<std::int64_t>(), 3);
  EXPECT_DOUBLE_EQ(r[1][1].as<double>(), 6.0);
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT extract(epoch FROM scangate_clock_ahead_total())::float8")[0].as<double>(), 10.0);
  // A step back is recorded (signed): not in the forward total, in scangate_clock_behind.
  tx.exec("SELECT scangate_clock_record_step(3, 4, -30000000, " + at + ")");
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT extract(epoch FROM scangate_clock_ahead_total())::float8")[0].as<double>(), 10.0);
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT extract(epoch FROM scangate_clock_behind(NULL))::float8")[0].as<double>(), 30.0);
  EXPECT_DOUBLE_EQ(
      tx.exec1("SELECT extract(epoch FROM scangate_clock_behind(now() + interval '1 minute'))::float8")[0].as<double>(), 0.0);
  // A row written before the steps is aged by all three; one written after them by none.
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT extract(epoch FROM scangate_clock_ahead(now() - interval '1 hour'))::float8")[0].as<double>(),
                   -20.0);
  EXPECT_DOUBLE_EQ(tx.exec1("SELECT extract(epoch FROM scangate_clock_ahead(now() + interval '1 minute'))::float8")[0].as<double>(),
                   0.0);
  // No step left once the epochs between account for it all.
  tx.exec("SELECT scangate_clock_record_step(1, 5, -20000000, " + at + ")");
  EXPECT_EQ(tx.exec1("SELECT count(*) FROM scangate_clock_steps")[0].as<int>(), 3);
}

// Bounds of PostgreSQL's clock read now, shifted by `shift_us`: an instance whose bounds lag a step forward it has
// not read yet (shift < 0), or in step (0).
void ReadClock(PgClock& clock, std::int64_t shift_us) {
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  const auto sent = std::chrono::steady_clock::now();
  const auto us = tx.exec1("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8")[0].as<std::int64_t>();
  clock.Forget();
  clock.Record({us + shift_us, sent, std::chrono::steady_clock::now(), 0});
}

// The guard: while PostgreSQL's clock reads past the writer's bounds of it (a step forward nobody has recorded), a
// row the clock calls expired is not taken over — the batch fails as an outage (55000), the key is not answered
// `new` — and once the bounds hold the clock again it is. A row within the horizon is a duplicate either way.
TEST_F(ClockSteps, NoTakeOverByAClockAheadOfTheBounds) {
  Store store(Options(kHorizon));
  store.Start();
  PgClock clock;
  ReadClock(clock, -30'000'000);  // the bounds 30 s behind: a step of 30 s unrecorded
  store.AttachClock(&clock);
  const Digest expired = RandomDigest(), within = RandomDigest();
  InsertRow(expired, "61 minutes");
  InsertRow(within, "10 minutes");
  EXPECT_EQ(Submit(store, within), Outcome::kDuplicate);
  EXPECT_NE(Submit(store, expired), Outcome::kInserted) << "taken over by a clock ahead of the instance's bounds";
  EXPECT_TRUE(Present(expired));
  ReadClock(clock, 0);
  // The writer reconnects after the failure (Submit refused, or unavailable, meanwhile).
  std::optional<Outcome> o;
  for (int i = 0; i < 100 && o != Outcome::kInserted && o != Outcome::kDuplicate; ++i) {
    if (i > 0) std::this_thread::sleep_for(100ms);
    Answer<Result> answer;
    o.reset();
    if (store.Submit(RouteOf(expired), expired, "new", answer.Setter())) o = answer.Get().outcome;
  }
  EXPECT_EQ(o, Outcome::kInserted);
}

// The expiry deletes nothing while PostgreSQL's clock reads past its bounds, and the expired rows once they hold it.
TEST_F(ClockSteps, NoExpiryByAClockAheadOfTheBounds) {
  const Digest past = RandomDigest(), pinned = RandomDigest();
  InsertRow(past, "70 minutes");
  InsertRow(pinned, "2 hours", "old", "-6 minutes");
  PgClock clock;
  ReadClock(clock, -30'000'000);
  Expiry expiry(HorizonExpiry(&clock));
  EXPECT_EQ(expiry.RunOnce(), 0u);
  EXPECT_TRUE(Present(past));
  EXPECT_TRUE(Present(pinned));
  ReadClock(clock, 0);
  EXPECT_EQ(expiry.RunOnce(), 2u);
  EXPECT_FALSE(Present(past));
  EXPECT_FALSE(Present(pinned));
}

}  // namespace
}  // namespace scangate::storage
