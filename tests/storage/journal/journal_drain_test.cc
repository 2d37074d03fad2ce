// Tests storage/journal/journal_drain.h against a real PostgreSQL (CTest fixture "pg"): what the drain tells the
// journal once the Store has finished a row. A committed row is Applied (the checkpoint passes it, nothing is
// replayed), a dead-lettered row is Applied too (or it would hold the checkpoint back for ever), and a row the
// Store gave up at shutdown (database down) is NOT: it is replayed at the next start, and replayed() waits
// for it. Records recovered older than the horizon (JournalOptions::retention) are skipped and passed by
// the checkpoint. Digests are random, so reruns against the same cluster never collide.
#include "storage/journal/journal_drain.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kEventually = 60s;  // liveness bound (not a performance assertion)

std::string Url() { return PgTestUrl(); }

std::int64_t CountRows(const std::string& url, const std::vector<Digest>& ds) {
  pqxx::connection c(url);
  return storage::CountRows(c, ds);
}

bool Eventually(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct JournalDrainTest : ::testing::Test {
  std::string dir;
  std::atomic<int> durable{0}, not_durable{0};

  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    std::string tmpl = (fs::temp_directory_path() / "scangate-drain-test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }

  StoreOptions StoreOpts(const std::string& url) {
    StoreOptions o;
    o.url = url;
    o.writers = 2;
    o.reconnect_backoff_max = 100ms;
    return o;
  }
  JournalOptions JournalOpts() {
    JournalOptions o;
    o.dir = dir;
    o.identity = "system_identifier=1 database=drain-test";
    o.checkpoint_interval = 0ms;
    return o;
  }
  // A waiter group whose waiters run inline on the flusher thread.
  struct InlineGroup final : WaiterGroup {
    void Deliver(std::vector<JournalWaiter> waiters, JournalFate fate) override {
      for (auto& w : waiters) w(fate);
    }
  };
  InlineGroup group;
  // Appends `ds` (with `source`) and waits until each was reported durable.
  void AppendAll(JournalDrain& drain, const std::vector<Digest>& ds, const std::string& source = "till-1") {
    const int before = durable.load();
    for (const auto& d : ds) {
      ASSERT_TRUE(drain.Append(d, source, group, [this](JournalFate f) {
        (f == JournalFate::kDurable ? durable : not_durable).fetch_add(1);
      }));
    }
    ASSERT_TRUE(Eventually([&] { return durable.load() - before == static_cast<int>(ds.size()); }));
    EXPECT_EQ(not_durable.load(), 0);
  }
  // What a fresh Journal on the directory would replay.
  std::size_t Recoverable() {
    Journal j(JournalOpts());
    return j.TakeRecovered().size();
  }
};

// Committed rows are Applied: the pending set and the journal's outstanding LSNs empty, and nothing is left
// to replay after the final checkpoint. `queue_limit` small: most records go through the drain's backlog.
void ExpectCommittedRecordsApplied(JournalDrainTest& t, std::size_t queue_limit) {
  const auto ds = RandomDigests(300);
  {
    auto opts = t.StoreOpts(Url());
    opts.queue_limit = queue_limit;
    Store store(opts);
    store.Start();
    JournalDrain drain(store, t.JournalOpts());
    drain.Start([](std::span<const Digest>) {});
    t.AppendAll(drain, ds);
    EXPECT_TRUE(Eventually([&] {
      const auto s = drain.Stats();
      return s.pending == 0 && s.journal.outstanding == 0 && s.backlog == 0;
    })) << "pending " << drain.Stats().pending << ", outstanding " << drain.Stats().journal.outstanding;
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }  // the drain's Journal releases the directory
  EXPECT_EQ(CountRows(Url(), ds), static_cast<std::int64_t>(ds.size()));
  EXPECT_EQ(t.Recoverable(), 0u);
}

TEST_F(JournalDrainTest, CommittedRecordsAreApplied) { ExpectCommittedRecordsApplied(*this, 65536); }

// The same through the backlog: the Store takes 16 rows at a time, the rest wait and are retried in order.
TEST_F(JournalDrainTest, BackloggedRecordsAreApplied) { ExpectCommittedRecordsApplied(*this, 16); }

// A dead-lettered row is Applied all the same (it would otherwise hold the checkpoint back for ever); the
// good rows around it are committed.
TEST_F(JournalDrainTest, DeadLetteredRecordIsApplied) {
  Latin1Db db;
  const auto good = RandomDigests(20);
  const Digest bad = RandomDigest();
  {
    Store store(StoreOpts(db.url));
    store.Start();
    JournalDrain drain(store, JournalOpts());
    drain.Start([](std::span<const Digest>) {});
    AppendAll(drain, {good.begin(), good.begin() + 10});
    AppendAll(drain, {bad}, "till-\xE2\x82\xAC");  // "till-€"
    AppendAll(drain, {good.begin() + 10, good.end()});
    EXPECT_TRUE(Eventually([&] { return store.Stats().dead_lettered == 1; }));
    EXPECT_TRUE(Eventually([&] {
      const auto s = drain.Stats();
      return s.pending == 0 && s.journal.outstanding == 0;
    })) << "pending " << drain.Stats().pending << ", outstanding " << drain.Stats().journal.outstanding;
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }
  EXPECT_EQ(CountRows(db.url, good), static_cast<std::int64_t>(good.size()));
  EXPECT_EQ(CountRows(db.url, {bad}), 0);
  EXPECT_EQ(Recoverable(), 0u);
}

// Rows the Store gives up at shutdown (database down past shutdown_retry) are NOT Applied: they stay in the
// journal, are recovered at the next start, count in replay_left until committed, and land in PostgreSQL.
TEST_F(JournalDrainTest, GivenUpAtShutdownIsReplayed) {
  const auto ds = RandomDigests(40);
  {
    auto opts = StoreOpts(Url());
    opts.shutdown_retry = 1s;
    Store store(opts);
    store.Start();
    JournalDrain drain(store, JournalOpts());
    drain.Start([](std::span<const Digest>) {});
    RestartGuard guard;
    ASSERT_EQ(guard.Stop(), 0);
    AppendAll(drain, ds);
    drain.StopAppends();
    store.Shutdown();
    EXPECT_EQ(store.Stats().write_behind_lost, ds.size());
    EXPECT_EQ(drain.Stats().journal.outstanding, ds.size());
    drain.Close();
    ASSERT_EQ(PgCtl("start"), 0);
    guard.stopped = false;
  }
  EXPECT_EQ(Recoverable(), ds.size());
  {
    Store store(StoreOpts(Url()));
    store.Start();
    JournalDrain drain(store, JournalOpts());
    std::size_t recovered = 0;
    drain.Start([&](std::span<const Digest> d) { recovered += d.size(); });
    EXPECT_EQ(recovered, ds.size());
    EXPECT_EQ(drain.Stats().recovered, ds.size());
    EXPECT_TRUE(Eventually([&] { return drain.replayed(); })) << "replay_left " << drain.Stats().replay_left;
    EXPECT_EQ(CountRows(Url(), ds), static_cast<std::int64_t>(ds.size()));
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }
  EXPECT_EQ(Recoverable(), 0u);
}


// µs since the epoch, `ago` before now (the journal's clock: the local one).
std::int64_t UsAgo(std::chrono::microseconds ago) {
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return (now - ago).count();
}

// Writes `records` durably into the test's journal directory and closes it WITHOUT applying them (as a crash
// before PostgreSQL committed them would): all of them are recovered at the next open.
void WriteUnapplied(JournalDrainTest& t, const std::vector<JournalRecord>& records) {
  std::atomic<std::size_t> durable{0};
  JournalOptions o = t.JournalOpts();
  o.on_commit = [&durable](std::vector<JournalEntry>& group, JournalFate fate) {
    if (fate == JournalFate::kDurable) durable.fetch_add(group.size());
  };
  Journal j(o);
  ASSERT_TRUE(j.TakeRecovered().empty());
  j.Start();
  for (const auto& r : records) ASSERT_TRUE(j.Append(r));
  ASSERT_TRUE(Eventually([&] { return durable.load() == records.size(); }));
  j.Stop();
  j.Close();
}

// Records recovered at start older than the horizon (JournalOptions::retention) have expired: they are not
// pending (Holds/Lookup say absent), not passed to `recovered` (the filter), not replayed into PostgreSQL,
// counted in recovered_expired, and the checkpoint passes them (the next open recovers nothing). The younger
// records, interleaved with them, are recovered and replayed as ever, with their journal times.
TEST_F(JournalDrainTest, ExpiredRecordsAreSkippedAtRecovery) {
  const auto expired = RandomDigests(30), fresh = RandomDigests(20);
  std::vector<JournalRecord> records;
  std::vector<std::int64_t> fresh_times;
  for (std::size_t i = 0; i < expired.size(); ++i) {
    records.push_back(JournalRecord{expired[i], UsAgo(2h + std::chrono::seconds(i)), "old", std::nullopt});
    if (i < fresh.size()) {
      fresh_times.push_back(UsAgo(10min + std::chrono::seconds(i)));
      records.push_back(JournalRecord{fresh[i], fresh_times.back(), "young", std::nullopt});
    }
  }
  WriteUnapplied(*this, records);
  ASSERT_EQ(Recoverable(), records.size());

  JournalOptions jo = JournalOpts();
  jo.retention = 1h;
  {
    Store store(StoreOpts(Url()));
    store.Start();
    JournalDrain drain(store, jo);
    std::vector<Digest> recovered;
    drain.Start([&](std::span<const Digest> d) { recovered.insert(recovered.end(), d.begin(), d.end()); });
    EXPECT_EQ(std::set<Digest>(recovered.begin(), recovered.end()), std::set<Digest>(fresh.begin(), fresh.end()));
    EXPECT_EQ(recovered.size(), fresh.size());
    const auto st = drain.Stats();
    EXPECT_EQ(st.recovered, fresh.size());
    EXPECT_EQ(st.recovered_expired, expired.size());
    for (const auto& d : expired) {
      EXPECT_FALSE(drain.Holds(d));
      EXPECT_EQ(drain.Lookup(d, group, [](JournalFate) { ADD_FAILURE() << "waiter kept for an absent digest"; }).state,
                JournalDrain::LookupResult::kAbsent);
    }
    EXPECT_TRUE(Eventually([&] { return drain.replayed(); })) << "replay_left " << drain.Stats().replay_left;
    EXPECT_EQ(CountRows(Url(), fresh), static_cast<std::int64_t>(fresh.size()));
    EXPECT_EQ(CountRows(Url(), expired), 0) << "an expired record was replayed";
    {
      pqxx::connection c(Url());
      pqxx::work tx(c);
      for (std::size_t i = 0; i < fresh.size(); ++i) {
        const auto us = tx.exec_params1("SELECT (extract(epoch FROM first_seen) * 1000000)::int8 FROM scan_keys "
                                        "WHERE digest = scangate_stored_digest($1::bytea)",
                                        HexBytea(fresh[i]))[0]
                            .as<std::int64_t>();
        EXPECT_EQ(us, fresh_times[i]) << i;
      }
    }
    EXPECT_TRUE(Eventually([&] { return drain.Stats().journal.outstanding == 0; }))
        << "outstanding " << drain.Stats().journal.outstanding;
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }
  EXPECT_EQ(Recoverable(), 0u) << "the checkpoint did not pass the expired records";
  {
    Store store(StoreOpts(Url()));
    store.Start();
    JournalDrain drain(store, jo);
    drain.Start([](std::span<const Digest>) { ADD_FAILURE() << "recovered after a clean close"; });
    EXPECT_EQ(drain.Stats().recovered, 0u);
    EXPECT_EQ(drain.Stats().recovered_expired, 0u);
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }
}

// A durable record still waiting for PostgreSQL (here: PostgreSQL stopped) whose time is past the horizon is
// not an answer: Lookup says kExpired (the caller decides in PostgreSQL, behind the record's row), keeps no
// waiter; a younger pending record is kDurable as ever. Once PostgreSQL is back both rows land.
TEST_F(JournalDrainTest, PendingRecordPastTheHorizonIsExpired) {
  const auto ds = RandomDigests(2);
  JournalOptions jo = JournalOpts();
  jo.retention = 1h;
  auto opts = StoreOpts(Url());
  opts.reconnect_backoff_max = 100ms;
  Store store(opts);
  store.Start();
  JournalDrain drain(store, jo);
  drain.Start([](std::span<const Digest>) {});
  RestartGuard guard;
  ASSERT_EQ(guard.Stop(), 0);
  const std::int64_t times[2] = {UsAgo(2h), UsAgo(10min)};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(drain.Append(ds[i], "till-1", group, [this](JournalFate f) {
      (f == JournalFate::kDurable ? durable : not_durable).fetch_add(1);
    }, times[i]));
  }
  ASSERT_TRUE(Eventually([&] { return durable.load() == 2; }));
  EXPECT_TRUE(drain.Holds(ds[0]));
  EXPECT_EQ(drain.Lookup(ds[0], group, [](JournalFate) { ADD_FAILURE() << "waiter kept for an expired record"; }).state,
            JournalDrain::LookupResult::kExpired);
  EXPECT_EQ(drain.Lookup(ds[1], group, [](JournalFate) { ADD_FAILURE() << "waiter kept for a durable record"; }).state,
            JournalDrain::LookupResult::kDurable);
  ASSERT_EQ(PgCtl("start"), 0);
  guard.stopped = false;
  EXPECT_TRUE(Eventually([&] { return drain.Stats().pending == 0; })) << "pending " << drain.Stats().pending;
  EXPECT_EQ(CountRows(Url(), ds), 2);
  drain.StopAppends();
  store.Shutdown();
  drain.Close();
}

// Without a horizon (retention 0) every recovered record, however old, is pending and replayed.
TEST_F(JournalDrainTest, WithoutAHorizonOldRecordsAreReplayed) {
  const auto ds = RandomDigests(15);
  std::vector<JournalRecord> records;
  for (const auto& d : ds) records.push_back(JournalRecord{d, UsAgo(std::chrono::hours(24 * 400)), "ancient", std::nullopt});
  WriteUnapplied(*this, records);
  {
    Store store(StoreOpts(Url()));
    store.Start();
    JournalDrain drain(store, JournalOpts());
    std::size_t recovered = 0;
    drain.Start([&](std::span<const Digest> d) { recovered += d.size(); });
    EXPECT_EQ(recovered, ds.size());
    EXPECT_EQ(drain.Stats().recovered, ds.size());
    EXPECT_EQ(drain.Stats().recovered_expired, 0u);
    EXPECT_TRUE(Eventually([&] { return drain.replayed(); })) << "replay_left " << drain.Stats().replay_left;
    EXPECT_EQ(CountRows(Url(), ds), static_cast<std::int64_t>(ds.size()));
    drain.StopAppends();
    store.Shutdown();
    drain.Close();
  }
  EXPECT_EQ(Recoverable(), 0u);
}

}  // namespace
}  // namespace scangate::storage
