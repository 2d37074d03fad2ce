// Tests storage/journal/journal_drain.h against a real PostgreSQL (CTest fixture "pg"): what the drain tells the
// journal once the Store has finished a row. A committed row is Applied (the checkpoint passes it, nothing is
// replayed), a dead-lettered row is Applied too (or it would hold the checkpoint back for ever), and a row the
// Store gave up at shutdown (database down) is NOT: it is replayed at the next start, and replayed() waits
// for it. Digests are random, so reruns against the same cluster never collide.
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

}  // namespace
}  // namespace scangate::storage
