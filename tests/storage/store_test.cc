// Tests storage/store.h and storage/start/migrations.h against a real PostgreSQL (CTest fixture "pg").
// Digests are random, so reruns against the same cluster never collide.
#include "storage/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <csignal>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "storage/start/migrations.h"
#include "tests/answer_within.h"
#include "tests/storage/epochs/hand_closed_epoch.h"
#include "tests/storage/event_log.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

// Liveness bound for things that must happen "by themselves" (not a performance assertion).
constexpr auto kEventually = 60s;

std::string Url() { return PgTestUrl(); }

std::uint32_t RouteOf(const Digest& d) { return d[0] | (d[1] << 8); }

StoreOptions Options(unsigned writers = 2) {
  StoreOptions o;
  o.url = Url();
  o.writers = writers;
  o.reconnect_backoff_max = 500ms;
  return o;
}

// A store meant to meet an outage and be shut down during it: quick reconnect attempts, and Shutdown() gives
// up the write-behind it could not write after 1 s.
StoreOptions GiveUpOptions(unsigned writers) {
  StoreOptions o = Options(writers);
  o.reconnect_backoff_max = 100ms;
  o.shutdown_retry = 1s;
  return o;
}

// Submits and waits (at most kAnswerBound); nullopt when Submit refused, or (a test failure) when no answer came.
std::optional<Result> SubmitAndWait(Store& store, const Digest& d, std::string source = "",
                                    Expect expect = Expect::kUnknown) {
  Answer<Result> answer;
  if (!store.Submit(RouteOf(d), d, std::move(source), answer.Setter(), nullptr, expect)) return std::nullopt;
  auto r = answer.Within();
  if (!r.has_value()) ADD_FAILURE() << "no answer to the Submit within " << kAnswerBound.count() << " s";
  return r;
}


class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgDir().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    ASSERT_FALSE(Url().empty());
  }
};

// Migrations apply once: a second application (and a second Store) changes nothing.
TEST_F(PgTest, MigrationsIdempotent) {
  ASSERT_FALSE(EmbeddedMigrations().empty());
  for (std::size_t i = 1; i < EmbeddedMigrations().size(); ++i) {
    EXPECT_LT(EmbeddedMigrations()[i - 1].version, EmbeddedMigrations()[i].version);
  }
  pqxx::connection c(Url());
  ApplyMigrations(c);
  EXPECT_EQ(ApplyMigrations(c), 0);
  {
    Store a(Options());
    a.Start();
    Store b(Options());
    b.Start();
    EXPECT_TRUE(a.up());
    EXPECT_TRUE(b.up());
  }
  pqxx::work tx(c);
  const auto r = tx.exec("SELECT version, name FROM schema_migrations ORDER BY version");
  ASSERT_EQ(r.size(), EmbeddedMigrations().size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i][0].as<int>(), EmbeddedMigrations()[i].version);
    EXPECT_EQ(r[i][1].as<std::string>(), std::string(EmbeddedMigrations()[i].name));
  }
}

// Several instances starting at once serialise on the advisory lock and all succeed.
TEST_F(PgTest, ConcurrentStartersAllSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      pqxx::connection c(Url());
      ApplyMigrations(c);
      ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
}

// A new digest is inserted once; a later observation is a duplicate carrying the same first_seen.
TEST_F(PgTest, InsertThenDuplicateSameFirstSeen) {
  Store store(Options());
  store.Start();
  const Digest d = RandomDigest();
  const auto first = SubmitAndWait(store, d, "t1");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->outcome, Outcome::kInserted);
  ASSERT_EQ(first->first_seen.size(), std::string("2026-11-29T21:43:09.123456Z").size()) << first->first_seen;
  EXPECT_EQ(first->first_seen.view()[10], 'T');
  EXPECT_EQ(first->first_seen.view().back(), 'Z');
  const auto second = SubmitAndWait(store, d, "t2");
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->outcome, Outcome::kDuplicate);
  EXPECT_EQ(second->first_seen, first->first_seen);

  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto row = tx.exec_params1(
      "SELECT seen_by, to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
      "FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)",
      HexBytea(d));
  EXPECT_EQ(row[0].as<std::string>(), "t1");  // the first observation's source is kept
  EXPECT_EQ(row[1].as<std::string>(), first->first_seen);
}

// Holds a row lock on `d` in an open transaction until Release(), so that a writer inserting `d` blocks
// and everything submitted meanwhile queues up into one batch.
class RowBlocker {
 public:
  explicit RowBlocker(const Digest& d) : conn_(Url()), tx_(conn_) {
    tx_.exec_params0("INSERT INTO scan_keys (digest, seen_by) VALUES (scangate_stored_digest($1::bytea), 'blocker')", HexBytea(d));
  }
  void Commit() { tx_.commit(); }
  void Rollback() { tx_.abort(); }

 private:
  pqxx::connection conn_;
  pqxx::work tx_;
};

// Waits until some backend of this database waits for a lock (the writer blocked behind a RowBlocker); other
// tests share the cluster (fixture "pg"), each in a database of its own.
bool WaitForLockWaiter() {
  pqxx::connection c(Url());
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (std::chrono::steady_clock::now() < deadline) {
    pqxx::nontransaction tx(c);
    if (tx.exec1("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                 "WHERE NOT l.granted AND a.datname = current_database()")[0].as<int>() > 0) {
      return true;
    }
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Repeats of a digest inside one batch: the first queued item is inserted, the others are duplicates
// with the same first_seen; distinct digests of the batch are all inserted.
TEST_F(PgTest, InBatchDuplicates) {
  Store store(Options(1));
  store.Start();
  const Digest blocked = RandomDigest();
  const Digest a = RandomDigest();
  const Digest b = RandomDigest();
  RowBlocker blocker(blocked);
  std::mutex mu;
  std::vector<std::pair<int, Result>> results;
  auto record = [&](int tag) {
    return [&, tag](const Result& r) {
      std::lock_guard lk(mu);
      results.emplace_back(tag, r);
    };
  };
  ASSERT_TRUE(store.Submit(0, blocked, "", record(0)));
  ASSERT_TRUE(WaitForLockWaiter());
  const auto before = store.Stats();
  ASSERT_TRUE(store.Submit(0, a, "first", record(1)));
  ASSERT_TRUE(store.Submit(0, a, "second", record(2)));
  ASSERT_TRUE(store.Submit(0, b, "", record(3)));
  ASSERT_TRUE(store.Submit(0, a, "third", record(4)));
  blocker.Rollback();
  store.Shutdown();
  ASSERT_EQ(results.size(), 5u);
  std::map<int, Result> by_tag(results.begin(), results.end());
  EXPECT_EQ(by_tag[0].outcome, Outcome::kInserted);  // the blocker rolled back
  EXPECT_EQ(by_tag[1].outcome, Outcome::kInserted);
  EXPECT_EQ(by_tag[2].outcome, Outcome::kDuplicate);
  EXPECT_EQ(by_tag[3].outcome, Outcome::kInserted);
  EXPECT_EQ(by_tag[4].outcome, Outcome::kDuplicate);
  EXPECT_EQ(by_tag[2].first_seen, by_tag[1].first_seen);
  EXPECT_EQ(by_tag[4].first_seen, by_tag[1].first_seen);
  // The four items queued behind the blocked batch went in as one batch of size 4.
  const auto after = store.Stats();
  EXPECT_EQ(after.batches - before.batches, 2u);
  EXPECT_EQ(after.keys_written - before.keys_written, 1u + 2u);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {a, b, blocked}), 3);
  pqxx::work tx(c);
  EXPECT_EQ(tx.exec_params1("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(a))[0].as<std::string>(),
            "first");
}

// Ticket: an item cancelled while still queued is never written and its completion never runs; an item a
// writer already took cannot be cancelled and its outcome is delivered.
TEST_F(PgTest, TicketCancelsOnlyQueuedItems) {
  Store store(Options(1));
  store.Start();
  const Digest taken = RandomDigest();
  const Digest queued = RandomDigest();
  const Digest after = RandomDigest();
  RowBlocker blocker(taken);
  auto taken_ticket = std::make_shared<Ticket>();
  auto queued_ticket = std::make_shared<Ticket>();
  Answer<Result> taken_result;
  std::atomic<int> queued_completions{0};
  ASSERT_TRUE(store.Submit(0, taken, "", taken_result.Setter(), taken_ticket));
  ASSERT_TRUE(WaitForLockWaiter());  // the writer holds `taken` in a transaction, blocked on the row
  ASSERT_TRUE(store.Submit(0, queued, "", [&](const Result&) { ++queued_completions; }, queued_ticket));
  const auto before = store.Stats();
  EXPECT_TRUE(queued_ticket->Cancel());
  EXPECT_FALSE(queued_ticket->Cancel());  // exactly one transition
  EXPECT_FALSE(taken_ticket->Cancel());   // in a transaction: its outcome will come
  blocker.Rollback();
  EXPECT_EQ(taken_result.Get().outcome, Outcome::kInserted);
  // The writer went past the cancelled item: a later item of the same writer completes.
  const auto later = SubmitAndWait(store, after);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->outcome, Outcome::kInserted);
  store.Shutdown();
  EXPECT_EQ(queued_completions.load(), 0);
  const auto stats = store.Stats();
  EXPECT_EQ(stats.cancelled - before.cancelled, 1u);
  EXPECT_EQ(stats.queue_depth, 0u);  // the cancelled item no longer counts against queue_limit
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {taken}), 1);
  EXPECT_EQ(CountRows(c, {queued}), 0);  // never written
  EXPECT_EQ(CountRows(c, {after}), 1);
}

// Every writer connection carries application_name=scangate (storage/pg/conninfo.h), so operators and
// tests can find the writers in pg_stat_activity.
TEST_F(PgTest, ConnectionsCarryDefaults) {
  Store store(Options(2));
  store.Start();
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  const auto r = tx.exec(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'scangate' AND datname = current_database()");
  EXPECT_GE(r[0][0].as<int>(), 2);
}

namespace {
// The fixture's URL with another role and/or database.
std::string UrlAs(const std::string& role, const std::string& db) {
  std::string u = Url();
  u.replace(u.find("postgres@"), 9, role + "@");
  const auto slash = u.find('/', u.find('@'));
  u.replace(slash + 1, u.find('?') - slash - 1, db);
  return u;
}
}  // namespace

// Start() failures: a role that may not CREATE in schema public (PostgreSQL 15's default for non-owners)
// and an unknown role are permanent; a missing database is transient (it may be created later).
TEST_F(PgTest, StartClassifiesErrors) {
  const std::string suffix = std::to_string(std::random_device{}() % 1000000);
  const std::string role = "sg_nocreate_" + suffix, db = "sg_nocreate_" + suffix;
  pqxx::connection admin(Url());
  {
    pqxx::nontransaction tx(admin);
    tx.exec0("CREATE ROLE " + role + " LOGIN");
    tx.exec0("CREATE DATABASE " + db);
  }
  const auto start_error = [](const std::string& url) -> std::optional<StartError> {
    auto opts = Options(1);
    opts.url = url;
    opts.start_timeout = 0ms;
    Store store(opts);
    try {
      store.Start();
    } catch (const StartError& e) {
      return e;
    }
    return std::nullopt;
  };
  const auto no_create = start_error(UrlAs(role, db));
  ASSERT_TRUE(no_create.has_value());
  EXPECT_TRUE(no_create->permanent()) << no_create->what();
  EXPECT_EQ(no_create->sqlstate(), "42501");
  EXPECT_NE(std::string(no_create->what()).find("permission denied"), std::string::npos) << no_create->what();

  const auto unknown_role = start_error(UrlAs("sg_no_such_role_" + suffix, "scangate"));
  ASSERT_TRUE(unknown_role.has_value());
  EXPECT_TRUE(unknown_role->permanent()) << unknown_role->what();
  EXPECT_EQ(unknown_role->sqlstate(), "28000");

  const auto missing_db = start_error(UrlAs("postgres", "sg_no_such_db_" + suffix));
  ASSERT_TRUE(missing_db.has_value());
  EXPECT_FALSE(missing_db->permanent()) << missing_db->what();
  EXPECT_EQ(missing_db->sqlstate(), "3D000");
  EXPECT_NE(std::string(missing_db->what()).find("does not exist"), std::string::npos) << missing_db->what();
  {
    pqxx::nontransaction tx(admin);
    tx.exec0("DROP DATABASE " + db);
    tx.exec0("DROP ROLE " + role);
  }
}

// A row committed by another transaction while the batch statement waits on it is invisible to the
// statement's snapshot and skipped by ON CONFLICT: the store must still answer kDuplicate with the
// other transaction's first_seen (follow-up select), never kInserted and never a failure.
TEST_F(PgTest, RowCommittedConcurrentlyIsDuplicate) {
  Store store(Options(1));
  store.Start();
  const Digest d = RandomDigest();
  const Digest other = RandomDigest();
  RowBlocker blocker(d);
  Answer<Result> p1, p2;
  ASSERT_TRUE(store.Submit(0, d, "", p1.Setter()));
  ASSERT_TRUE(WaitForLockWaiter());
  blocker.Commit();
  const Result r1 = p1.Get();
  EXPECT_EQ(r1.outcome, Outcome::kDuplicate);
  ASSERT_FALSE(r1.first_seen.empty());
  pqxx::connection c(Url());
  {
    pqxx::work tx(c);
    EXPECT_EQ(tx.exec_params1("SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
                              "seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)",
                              HexBytea(d))[0]
                  .as<std::string>(),
              r1.first_seen);
  }
  // The writer is healthy afterwards.
  ASSERT_TRUE(store.Submit(0, other, "", p2.Setter()));
  EXPECT_EQ(p2.Get().outcome, Outcome::kInserted);
  EXPECT_TRUE(store.up());
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// queue_limit bounds accepted-but-unfinished items: beyond it Submit and SubmitWriteBehind refuse,
// and capacity returns once the batch in flight commits.
TEST_F(PgTest, QueueLimitRefuses) {
  auto opts = Options(1);
  opts.queue_limit = 4;
  Store store(opts);
  store.Start();
  const Digest blocked = RandomDigest();
  RowBlocker blocker(blocked);
  std::atomic<int> done{0};
  auto count = [&](const Result& r) {
    EXPECT_NE(r.outcome, Outcome::kUnavailable);
    ++done;
  };
  ASSERT_TRUE(store.Submit(0, blocked, "", count));
  ASSERT_TRUE(WaitForLockWaiter());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.Submit(0, RandomDigest(), "", count));
  EXPECT_FALSE(store.Submit(0, RandomDigest(), "", count));
  EXPECT_FALSE(store.SubmitWriteBehind(0, RandomDigest(), ""));
  EXPECT_EQ(store.Stats().queue_depth, 4u);
  blocker.Rollback();
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (store.Stats().queue_depth > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(done.load(), 4);
  EXPECT_TRUE(store.SubmitWriteBehind(0, RandomDigest(), ""));
}

// Tallies outcomes per digest from many submitters.
struct Tally {
  std::mutex mu;
  std::map<Digest, std::vector<Result>> by_digest;
  void Add(const Digest& d, const Result& r) {
    std::lock_guard lk(mu);
    by_digest[d].push_back(r);
  }
};

void SubmitAll(Store& store, const std::vector<Digest>& ds, unsigned seed, Tally& tally,
               std::atomic<int>& outstanding) {
  std::vector<Digest> order = ds;
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (const auto& d : order) {
    ++outstanding;
    while (!store.Submit(RouteOf(d), d, "", [&tally, &outstanding, d](const Result& r) {
      tally.Add(d, r);
      --outstanding;
    })) {
      std::this_thread::yield();  // queue full: retry (the database is up, so only the limit refuses)
    }
  }
}

void WaitOutstanding(std::atomic<int>& outstanding) {
  while (outstanding.load() > 0) std::this_thread::sleep_for(1ms);
}

void ExpectExactlyOneInserted(Tally& tally, std::size_t digests, std::size_t per_digest) {
  ASSERT_EQ(tally.by_digest.size(), digests);
  for (const auto& [d, results] : tally.by_digest) {
    ASSERT_EQ(results.size(), per_digest);
    int inserted = 0;
    for (const auto& r : results) {
      EXPECT_NE(r.outcome, Outcome::kUnavailable);
      inserted += r.outcome == Outcome::kInserted ? 1 : 0;
      EXPECT_EQ(r.first_seen, results.front().first_seen);
    }
    EXPECT_EQ(inserted, 1);
  }
}

// 8 threads submit the same digests concurrently: exactly one kInserted per digest, one row each.
TEST_F(PgTest, ConcurrentSubmittersExactlyOneInserted) {
  constexpr std::size_t kDigests = 2000;
  constexpr unsigned kThreads = 8;
  Store store(Options(4));
  store.Start();
  const auto ds = RandomDigests(kDigests);
  Tally tally;
  std::atomic<int> outstanding{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { SubmitAll(store, ds, t, tally, outstanding); });
  }
  for (auto& t : threads) t.join();
  WaitOutstanding(outstanding);
  ExpectExactlyOneInserted(tally, kDigests, kThreads);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(kDigests));
  const auto s = store.Stats();
  EXPECT_GE(s.inserted, kDigests);
  EXPECT_EQ(s.queue_depth, 0u);
}

// Two Store objects (as two scangate processes would) race on the same digests: exactly one kInserted.
TEST_F(PgTest, CrossStoreRaceExactlyOneInserted) {
  constexpr std::size_t kDigests = 2000;
  Store a(Options(2));
  Store b(Options(3));  // different writer count: the same digest lands on differently-shaped batches
  a.Start();
  b.Start();
  const auto ds = RandomDigests(kDigests);
  Tally tally;
  std::atomic<int> outstanding{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { SubmitAll(t % 2 == 0 ? a : b, ds, t, tally, outstanding); });
  }
  for (auto& t : threads) t.join();
  WaitOutstanding(outstanding);
  ExpectExactlyOneInserted(tally, kDigests, 4);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(kDigests));
}

// Write-behind items are all in the table once Shutdown() returns, even with a long flush interval.
TEST_F(PgTest, WriteBehindPresentAfterShutdown) {
  auto opts = Options(2);
  opts.flush_interval = 10s;  // longer than the test: only Shutdown's flush can write them
  opts.batch_limit = 64;
  Store store(opts);
  store.Start();
  const auto ds = RandomDigests(1000);
  for (const auto& d : ds) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(d), d, "wb"));
  // Repeat a few: they become write-behind conflicts, not errors.
  for (std::size_t i = 0; i < 10; ++i) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(ds[i]), ds[i], "wb"));
  store.Shutdown();
  store.Shutdown();  // idempotent
  EXPECT_FALSE(store.SubmitWriteBehind(0, ds[0], ""));  // no longer accepting
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), 1000);
  const auto s = store.Stats();
  EXPECT_EQ(s.write_behind_conflicts, 10u);
  EXPECT_EQ(s.queue_depth, 0u);
  EXPECT_GE(s.batches, 1000u / 64u);
}

// Write-behind items are written within the flush interval without any Shutdown or waiting item.
TEST_F(PgTest, WriteBehindFlushesByItself) {
  auto opts = Options(1);
  opts.flush_interval = 5ms;
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  ASSERT_TRUE(store.SubmitWriteBehind(0, d, ""));
  pqxx::connection c(Url());
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (CountRows(c, {d}) == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(CountRows(c, {d}), 1);
}

// Priority lane: a Submit queued after a backlog of write-behind rows does not wait for the backlog; it is
// written within the batch in progress plus one (lanes alternate), not after every row queued before it.
// The writer is held on a row lock while the backlog and the Submit queue up, so no speed matters.
TEST_F(PgTest, SubmitSkipsTheWriteBehindBacklog) {
  auto opts = Options(1);
  opts.batch_limit = 64;
  opts.flush_interval = 10s;
  Store store(opts);
  store.Start();
  const Digest blocked = RandomDigest();
  RowBlocker blocker(blocked);
  Answer<Result> held;
  ASSERT_TRUE(store.Submit(0, blocked, "", held.Setter()));
  ASSERT_TRUE(WaitForLockWaiter()) << "the writer never blocked on the test's row";
  constexpr int kBacklog = 64 * 40;
  auto committed = std::make_shared<std::atomic<int>>(0);
  for (int i = 0; i < kBacklog; ++i) {
    ASSERT_TRUE(store.SubmitWriteBehind(0, RandomDigest(), "", [committed](const Result&) { committed->fetch_add(1); }, 0));
  }
  Answer<std::pair<Outcome, int>> at_completion;
  ASSERT_TRUE(store.Submit(0, RandomDigest(), "", [set = at_completion.Setter(), committed](const Result& r) {
    set({r.outcome, committed->load()});
  }));
  EXPECT_EQ(committed->load(), 0);  // nothing of the backlog could commit behind the blocked batch
  blocker.Rollback();
  EXPECT_EQ(held.Get().outcome, Outcome::kInserted);
  const auto [outcome, rows_before] = at_completion.Get();
  EXPECT_EQ(outcome, Outcome::kInserted);
  // FIFO would put it after all kBacklog rows; the lanes alternate, so at most one write-behind batch goes first.
  EXPECT_LE(rows_before, 64) << "the Submit waited behind the write-behind backlog";
  store.Shutdown();
  EXPECT_EQ(committed->load(), kBacklog);
}

// ...but never ahead of a pending write-behind row of its own digest: that Submit joins the FIFO behind the
// row and is told kDuplicate with the row's first_seen (skipping it would insert the digest a second time:
// "new" twice across the fast path and the exact path).
TEST_F(PgTest, SubmitOfAPendingWriteBehindDigestStaysBehindIt) {
  auto opts = Options(1);
  opts.flush_interval = 10s;  // the row stays queued until something forces a batch
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  constexpr std::int64_t kFirstSeenUs = 1'700'000'000'123'456;  // 2023-11-14T22:13:20.123456Z
  ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(d), d, "behind", Completion{}, kFirstSeenUs));
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kDuplicate);
  EXPECT_EQ(r->first_seen, "2023-11-14T22:13:20.123456Z");
  // Once the row committed, the digest's Submits take the lane again (and are still duplicates).
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  store.Shutdown();
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {d}), 1);
}

// Sources survive the binary text[] parameter unchanged; empty, invalid UTF-8 and NUL-carrying sources are
// stored as NULL.
TEST_F(PgTest, SourcesRoundTrip) {
  Store store(Options(1));
  store.Start();
  const std::vector<std::string> sources = {"plain", "with \"quotes\"", "back\\slash", "{brace},comma", "NULL",
                                            "ünï©ødé ✓", " spaced ", "'single' \\\" mix", "",
                                            std::string("nul\0inside", 10), std::string("bad\xff\xfe")};
  std::vector<Digest> ds;
  for (const auto& s : sources) {
    ds.push_back(RandomDigest());
    ASSERT_TRUE(store.SubmitWriteBehind(0, ds.back(), s));
  }
  store.Shutdown();
  pqxx::connection c(Url());
  pqxx::work tx(c);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const auto f = tx.exec_params1("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(ds[i]))[0];
    if (i + 3 >= sources.size()) {
      EXPECT_TRUE(f.is_null()) << i;
    } else {
      ASSERT_FALSE(f.is_null()) << i;
      EXPECT_EQ(f.as<std::string>(), sources[i]);
    }
  }
}

// first_seen of `ds` as PostgreSQL renders it itself (to_char), "" for a digest with no row.
std::vector<std::string> PgFirstSeen(const std::vector<Digest>& ds) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  std::vector<std::string> out;
  for (const auto& d : ds) {
    const auto r = tx.exec_params("SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
                                  "FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)",
                                  HexBytea(d));
    out.push_back(r.empty() ? "" : r[0][0].as<std::string>());
  }
  return out;
}

// Submits `ds` (sources `source`) so that they form exactly ONE batch: the single writer is held behind a
// RowBlocker while they queue, then released. Returns their results in order.
// The blocking item is a plain Submit (Expect::kUnknown, so never by COPY); expect_of(i) is the hint of ds[i].
std::vector<Result> SubmitAsOneBatchEach(Store& store, const std::vector<Digest>& ds, const std::string& source,
                                         const std::function<Expect(std::size_t)>& expect_of) {
  const Digest blocked = RandomDigest();
  RowBlocker blocker(blocked);
  Answer<Result> held;
  EXPECT_TRUE(store.Submit(0, blocked, "", held.Setter()));
  EXPECT_TRUE(WaitForLockWaiter());
  const auto before = store.Stats();
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_TRUE(store.Submit(0, ds[i], source, answers[i].Setter(), nullptr, expect_of(i)));
  }
  blocker.Rollback();
  EXPECT_EQ(held.Get().outcome, Outcome::kInserted);
  std::vector<Result> out;
  for (auto& a : answers) out.push_back(a.Get());
  const auto after = store.Stats();
  EXPECT_EQ(after.batches - before.batches, 2u) << "the items did not form one batch";
  return out;
}

std::vector<Result> SubmitAsOneBatch(Store& store, const std::vector<Digest>& ds, const std::string& source,
                                     Expect expect = Expect::kUnknown) {
  return SubmitAsOneBatchEach(store, ds, source, [expect](std::size_t) { return expect; });
}

// A row written by someone else (source 'psql'), as an operator's psql or another tool would.
void InsertBehindTheStoresBack(const Digest& d, const std::string& first_seen) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), 'psql', $2::timestamptz)",
                  HexBytea(d), first_seen);
  tx.commit();
}

// A key inserted behind the store's back (plain SQL on another connection, with its own first_seen) and
// then submitted in one batch with fresh keys: that key is kDuplicate carrying the first_seen PostgreSQL
// holds, every fresh key kInserted; each answer's first_seen equals PostgreSQL's to_char of the row.
// Batch sizes 1 (+ the blocker) and 4096; the items without a hint (ON CONFLICT) and with Expect::kNew (a
// COPY that the present row aborts, then ON CONFLICT).
TEST_F(PgTest, KeyInsertedBehindTheBackIsDuplicateInABatch) {
  for (const Expect expect : {Expect::kUnknown, Expect::kNew}) {
    for (const std::size_t fresh : {std::size_t{0}, std::size_t{4095}}) {
      SCOPED_TRACE(testing::Message() << "fresh " << fresh << ", expect new " << (expect == Expect::kNew));
      auto opts = Options(1);
      opts.batch_limit = 4096;
      Store store(opts);
      store.Start();
      const Digest behind = RandomDigest();
      InsertBehindTheStoresBack(behind, "2021-03-04 05:06:07.891011+00");
      std::vector<Digest> ds = RandomDigests(fresh);
      ds.insert(ds.begin() + static_cast<std::ptrdiff_t>(fresh / 2), behind);  // somewhere in the middle
      const auto before = store.Stats();
      const auto results = SubmitAsOneBatch(store, ds, "till-7", expect);
      EXPECT_EQ(store.Stats().keys_written - before.keys_written, 1 + ds.size());
      const auto pg = PgFirstSeen(ds);
      std::size_t inserted = 0;
      for (std::size_t i = 0; i < ds.size(); ++i) {
        ASSERT_FALSE(pg[i].empty()) << i;
        EXPECT_EQ(results[i].first_seen, pg[i]) << i;
        if (ds[i] == behind) {
          EXPECT_EQ(results[i].outcome, Outcome::kDuplicate);
          EXPECT_EQ(results[i].first_seen, "2021-03-04T05:06:07.891011Z");
        } else {
          EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
          inserted += results[i].outcome == Outcome::kInserted;
        }
      }
      EXPECT_EQ(inserted, fresh);
      // Without the hint a waiting item never goes by COPY; with it the COPY is tried, aborted by the row
      // that exists, and the batch answered through ON CONFLICT.
      EXPECT_EQ(store.Stats().copy_batches, 0u);
      EXPECT_EQ(store.Stats().copy_fallbacks, expect == Expect::kNew ? 1u : 0u);
      EXPECT_EQ(store.Stats().batch_failures, 0u);
    }
  }
}

// Submit items the filter called new (Expect::kNew) form a batch written by binary COPY, and each gets
// kInserted with the first_seen PostgreSQL holds; a digest whose first item has no hint makes it an ON CONFLICT
// batch. An in-batch repeat (a later item of a digest, hinted or not: a repeat submitted while its first
// observation is queued) still goes by COPY, one row per digest: the first item kInserted, the repeat kDuplicate
// of that row (its first_seen), as ON CONFLICT answers it.
TEST_F(PgTest, SubmitItemsTheFilterCalledNewGoByCopy) {
  auto opts = Options(1);
  opts.batch_limit = 4096;
  Store store(opts);
  store.Start();
  auto before = store.Stats();
  const auto ds = RandomDigests(300);
  auto results = SubmitAsOneBatch(store, ds, "till-3", Expect::kNew);
  auto after = store.Stats();
  EXPECT_EQ(after.copy_batches - before.copy_batches, 1u);
  EXPECT_EQ(after.copy_fallbacks, 0u);
  auto pg = PgFirstSeen(ds);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
    ASSERT_FALSE(pg[i].empty()) << i;
    EXPECT_EQ(results[i].first_seen, pg[i]) << i;
  }

  // The same digests again with the hint (a filter that forgot them): the COPY aborts, all kDuplicate with
  // their first_seen.
  before = after;
  results = SubmitAsOneBatch(store, ds, "till-3", Expect::kNew);
  after = store.Stats();
  EXPECT_EQ(after.copy_batches - before.copy_batches, 0u);
  EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 1u);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(results[i].outcome, Outcome::kDuplicate) << i;
    EXPECT_EQ(results[i].first_seen, pg[i]) << i;
  }

  // Wait out the back-off that abort started (one ON CONFLICT batch), then: a batch with one unhinted item
  // (through ON CONFLICT), and batches with an in-batch repeat, hinted and unhinted (by COPY).
  ASSERT_EQ(SubmitAndWait(store, RandomDigest(), "", Expect::kNew)->outcome, Outcome::kInserted);
  before = store.Stats();
  const auto mixed = RandomDigests(50);
  results = SubmitAsOneBatchEach(store, mixed, "",
                                 [](std::size_t i) { return i == 17 ? Expect::kUnknown : Expect::kNew; });
  for (std::size_t i = 0; i < mixed.size(); ++i) EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
  after = store.Stats();
  EXPECT_EQ(after.copy_batches - before.copy_batches, 0u);
  for (const Expect repeat_expect : {Expect::kNew, Expect::kUnknown}) {
    SCOPED_TRACE(testing::Message() << "repeat hinted new " << (repeat_expect == Expect::kNew));
    before = store.Stats();
    const auto repeat = RandomDigests(10);
    auto with_repeat = repeat;
    with_repeat.push_back(repeat[4]);
    results = SubmitAsOneBatchEach(store, with_repeat, "till-9", [&](std::size_t i) {
      return i == with_repeat.size() - 1 ? repeat_expect : Expect::kNew;
    });
    after = store.Stats();
    EXPECT_EQ(after.copy_batches - before.copy_batches, 1u);
    EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 0u);
    EXPECT_EQ(after.keys_written - before.keys_written, 1 + repeat.size());  // the blocker + one row per digest
    pg = PgFirstSeen(repeat);
    for (std::size_t i = 0; i < repeat.size(); ++i) {
      EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
      EXPECT_EQ(results[i].first_seen, pg[i]) << i;
    }
    EXPECT_EQ(results.back().outcome, Outcome::kDuplicate);
    EXPECT_EQ(results.back().first_seen, results[4].first_seen);
    EXPECT_EQ(results.back().first_seen_us, results[4].first_seen_us);
  }
}

// Hinted batches whose rows keep existing (another instance without key affinity, rows older than the
// window) do not pay an aborted COPY each: after an abort the writer takes the next 1, 2, 4 ... (at most 64)
// eligible batches through ON CONFLICT, and a COPY that holds halves the pause again. 20 conflicting
// one-item batches: COPY tried in batches 1, 3, 6, 11 and 20 only. Then fresh keys: the first 16 (the pause
// left) through ON CONFLICT, the next 4 by COPY. Every answer is PostgreSQL's.
TEST_F(PgTest, CopyBackOffBoundsAbortedCopies) {
  Store store(Options(1));
  store.Start();
  const auto present = RandomDigests(20);
  for (const auto& d : present) InsertBehindTheStoresBack(d, "2020-01-02 03:04:05.000006+00");
  for (const auto& d : present) {
    const auto r = SubmitAndWait(store, d, "", Expect::kNew);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kDuplicate);
    EXPECT_EQ(r->first_seen, "2020-01-02T03:04:05.000006Z");
  }
  auto s = store.Stats();
  EXPECT_EQ(s.batches, 20u);
  EXPECT_EQ(s.copy_fallbacks, 5u);
  EXPECT_EQ(s.copy_batches, 0u);
  for (const auto& d : RandomDigests(20)) {
    const auto r = SubmitAndWait(store, d, "", Expect::kNew);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kInserted);
  }
  s = store.Stats();
  EXPECT_EQ(s.copy_fallbacks, 5u);
  EXPECT_EQ(s.copy_batches, 4u);
}

// A write-behind row carrying the journal's first_seen_us keeps it exactly (to the microsecond, also before
// the epoch and with a zero fraction), and the commit hook's first_seen is what PostgreSQL holds. (All in
// the past: the warm-load tests count every row of their window, which ends now.)
TEST_F(PgTest, WriteBehindFirstSeenRoundTrips) {
  Store store(Options(1));
  store.Start();
  const std::vector<std::int64_t> times = {1'700'000'000'123'456, 1'700'000'000'000'000, 1, -1'500'000,
                                           946'684'799'999'999};
  const std::vector<std::string> expect = {"2023-11-14T22:13:20.123456Z", "2023-11-14T22:13:20.000000Z",
                                           "1970-01-01T00:00:00.000001Z", "1969-12-31T23:59:58.500000Z",
                                           "1999-12-31T23:59:59.999999Z"};
  const auto ds = RandomDigests(times.size());
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    ASSERT_TRUE(store.SubmitWriteBehind(0, ds[i], "", answers[i].Setter(), times[i]));
  }
  const auto pg = [&] {
    std::vector<Result> rs;
    for (auto& a : answers) rs.push_back(a.Get());
    return std::make_pair(rs, PgFirstSeen(ds));
  }();
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(pg.first[i].outcome, Outcome::kInserted) << i;
    EXPECT_EQ(pg.second[i], expect[i]) << i;
    EXPECT_EQ(pg.first[i].first_seen, expect[i]) << i;
  }
  EXPECT_GE(store.Stats().copy_batches, 1u);  // write-behind only: written by binary COPY
  EXPECT_EQ(store.Stats().copy_fallbacks, 0u);
  // Read back through the duplicate path (the follow-up select) too.
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const auto r = SubmitAndWait(store, ds[i]);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kDuplicate);
    EXPECT_EQ(r->first_seen, expect[i]) << i;
  }
}

// A batch of write-behind items only (Bloom negatives) goes by binary COPY. A key inserted behind the
// store's back in such a batch aborts the COPY; the batch re-runs through ON CONFLICT: that key kDuplicate
// with PostgreSQL's first_seen, every other kInserted with the first_seen PostgreSQL holds; one fallback.
TEST_F(PgTest, WriteBehindCopyFallsBackOnConflict) {
  constexpr std::size_t kBatch = 300;
  auto opts = Options(1);
  opts.batch_limit = kBatch;
  opts.flush_interval = 30s;  // the writer takes a write-behind batch when it is full
  Store store(opts);
  store.Start();
  const Digest behind = RandomDigest();
  InsertBehindTheStoresBack(behind, "2022-05-06 07:08:09.000001+00");
  auto run_batch = [&](const std::vector<Digest>& ds) {
    std::vector<Answer<Result>> answers(ds.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
      EXPECT_TRUE(
          store.SubmitWriteBehind(0, ds[i], i % 3 == 0 ? "" : "till-" + std::to_string(i), answers[i].Setter(), 0));
    }
    std::vector<Result> out;
    for (auto& a : answers) out.push_back(a.Get());
    return out;
  };
  // Conflict-free: one COPY batch.
  auto before = store.Stats();
  const auto fresh = RandomDigests(kBatch);
  auto results = run_batch(fresh);
  auto after = store.Stats();
  EXPECT_EQ(after.batches - before.batches, 1u);
  EXPECT_EQ(after.copy_batches - before.copy_batches, 1u);
  EXPECT_EQ(after.copy_fallbacks, 0u);
  auto pg = PgFirstSeen(fresh);
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
    EXPECT_EQ(results[i].first_seen, pg[i]) << i;
  }
  // One row exists: COPY aborts, ON CONFLICT decides.
  before = after;
  auto ds = RandomDigests(kBatch - 1);
  ds.insert(ds.begin() + kBatch / 2, behind);
  results = run_batch(ds);
  after = store.Stats();
  EXPECT_EQ(after.batches - before.batches, 1u);
  EXPECT_EQ(after.copy_batches - before.copy_batches, 0u);
  EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 1u);
  EXPECT_EQ(after.write_behind_conflicts - before.write_behind_conflicts, 1u);
  EXPECT_EQ(after.batch_failures, 0u);
  pg = PgFirstSeen(ds);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(results[i].first_seen, pg[i]) << i;
    EXPECT_EQ(results[i].outcome, ds[i] == behind ? Outcome::kDuplicate : Outcome::kInserted) << i;
  }
  EXPECT_EQ(results[kBatch / 2].first_seen, "2022-05-06T07:08:09.000001Z");
  pqxx::connection c(Url());
  pqxx::work tx(c);
  EXPECT_EQ(tx.exec_params1("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(behind))[0].as<std::string>(),
            "psql");
  EXPECT_TRUE(tx.exec_params1("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(ds[0]))[0].is_null());
  EXPECT_EQ(tx.exec_params1("SELECT seen_by FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(ds[1]))[0].as<std::string>(),
            "till-1");
}

// WarmLoad returns exactly the digests first seen within the window (none older), across several
// chunks of the binary COPY stream.
TEST_F(PgTest, WarmLoadReturnsRecentDigestsOnly) {
  constexpr long kBulkRows = 70000;  // more than one sink chunk (65536 digests)
  const auto recent = RandomDigests(3000);
  const auto old = RandomDigests(50);
  {
    Store store(Options(2));
    store.Start();
    for (const auto& d : recent) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(d), d, ""));
    store.Shutdown();
  }
  pqxx::connection c(Url());
  {
    pqxx::work tx(c);
    for (const auto& d : old) {
      tx.exec_params0("INSERT INTO scan_keys (digest, first_seen) VALUES (scangate_stored_digest($1::bytea), now() - interval '3 days')",
                      HexBytea(d));
    }
    tx.exec_params0("INSERT INTO scan_keys (digest) SELECT scangate_stored_digest(sha256(convert_to(gen_random_uuid()::text || g, 'UTF8'))) "
                    "FROM generate_series(1, $1::bigint) g",
                    kBulkRows);
    tx.commit();
  }
  std::set<std::string> expected;
  {
    pqxx::work tx(c);
    for (const auto& row : tx.exec(std::string("SELECT ") + kStoredHexByteaSql + " FROM scan_keys WHERE first_seen > now() - interval '48 hours'")) {
      expected.insert(row[0].as<std::string>());
    }
    // The split path must really be taken below: the heap spans many blocks.
    ASSERT_GE(tx.exec1("SELECT pg_relation_size('scan_keys') / current_setting('block_size')::bigint")[0].as<long>(),
              100);
  }
  // warm_streams 1 = one COPY; 2 and 3 = TID-range streams (fraction 0 forces the split) under one snapshot.
  for (const unsigned streams : {1u, 2u, 3u}) {
    SCOPED_TRACE("warm_streams " + std::to_string(streams));
    StoreOptions o = Options(1);
    o.warm_streams = streams;
    o.warm_parallel_min_fraction = 0;
    Store store(o);
    store.Start();
    std::mutex mu;  // the sink is called concurrently when streams > 1
    std::vector<Digest> loaded;
    std::uint64_t calls = 0;
    const std::uint64_t n = store.WarmLoad(std::chrono::hours(48), [&](std::span<const Digest> chunk) {
      std::lock_guard lk(mu);
      ++calls;
      EXPECT_FALSE(chunk.empty());
      loaded.insert(loaded.end(), chunk.begin(), chunk.end());
    });
    EXPECT_EQ(store.Stats().last_warm_streams, streams);
    EXPECT_EQ(n, loaded.size());
    EXPECT_GE(calls, 2u);
    std::set<std::string> got;
    for (const auto& d : loaded) got.insert(HexBytea(d));
    EXPECT_EQ(got.size(), loaded.size());  // no digest delivered twice
    EXPECT_TRUE(got == expected) << "loaded " << got.size() << " expected " << expected.size();
    for (const auto& d : recent) EXPECT_EQ(got.count(StoredHexBytea(d)), 1u);
    for (const auto& d : old) EXPECT_EQ(got.count(StoredHexBytea(d)), 0u);

    // A zero window loads nothing.
    EXPECT_EQ(store.WarmLoad(std::chrono::seconds(0), [](std::span<const Digest>) {}), 0u);
  }
  // Default fraction: a window holding a small part of the table is read by one (BRIN) stream.
  {
    StoreOptions o = Options(1);
    o.warm_streams = 3;
    pqxx::nontransaction(c).exec0("ANALYZE scan_keys");
    Store store(o);
    store.Start();
    EXPECT_EQ(store.WarmLoad(std::chrono::seconds(0), [](std::span<const Digest>) {}), 0u);
    EXPECT_EQ(store.Stats().last_warm_streams, 1u);
  }
}

// WarmLoad reads the closed epochs too (sql/018), in one stream or shared out among several: every recent digest of
// every epoch once, none older than the window; and when an epoch closes during the load (the catalog changes under
// it), the load is made again and the new epoch's digests are delivered.
TEST_F(PgTest, WarmLoadReadsTheClosedEpochs) {
  using namespace std::chrono_literals;
  HandClosedEpoch a(Unique("scan_keys_e_warm_a")), b(Unique("scan_keys_e_warm_b"));
  const auto in_a = RandomDigests(100), in_b = RandomDigests(50), old = RandomDigests(20), open = RandomDigests(30);
  for (const auto& d : in_a) a.Add(d, 60s);
  for (const auto& d : in_b) b.Add(d, 600s);
  for (const auto& d : old) a.Add(d, 72h);
  a.Close(true);
  b.Close(false);
  StoreOptions o = Options(1);
  o.warm_parallel_min_fraction = 0;
  {
    Store store(o);
    store.Start();
    for (const auto& d : open) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(d), d, ""));
    store.Shutdown();
  }
  for (const unsigned streams : {1u, 3u}) {
    SCOPED_TRACE("warm_streams " + std::to_string(streams));
    o.warm_streams = streams;
    Store store(o);
    store.Start();
    std::mutex mu;
    std::map<std::string, int> got;
    store.WarmLoad(std::chrono::hours(48), [&](std::span<const Digest> chunk) {
      std::lock_guard lk(mu);
      for (const auto& d : chunk) ++got[HexBytea(d)];
    });
    for (const auto* set : {&in_a, &in_b, &open}) {
      for (const auto& d : *set) EXPECT_EQ(got[StoredHexBytea(d)], 1) << "a recent digest not loaded once";
    }
    for (const auto& d : old) EXPECT_EQ(got.count(StoredHexBytea(d)), 0u);
  }
  // An epoch closes while the load runs (in its sink): loaded again, the new epoch's digest included.
  o.warm_streams = 1;
  Store store(o);
  store.Start();
  HandClosedEpoch late(Unique("scan_keys_e_warm_late"));
  const Digest k = RandomDigest();
  late.Add(k, 5s);
  bool closed = false;
  std::set<std::string> got;
  store.WarmLoad(std::chrono::hours(48), [&](std::span<const Digest> chunk) {
    if (!closed) {
      late.Close(false);
      closed = true;
    }
    for (const auto& d : chunk) got.insert(HexBytea(d));
  });
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.count(StoredHexBytea(k)), 1u) << "an epoch closed during the load was not read";
}

// Rows inserted concurrently with a (split) WarmLoad: every row committed before the load started is
// delivered exactly once; rows committed during it may or may not be; nothing outside the window.
TEST_F(PgTest, WarmLoadWithConcurrentInserts) {
  pqxx::connection c(Url());
  pqxx::nontransaction(c).exec0(
      "INSERT INTO scan_keys (digest) SELECT scangate_stored_digest(sha256(convert_to('cw-' || gen_random_uuid()::text || g, 'UTF8'))) "
      "FROM generate_series(1, 40000) g");
  for (const unsigned streams : {1u, 2u, 3u}) {
    SCOPED_TRACE("warm_streams " + std::to_string(streams));
    std::set<std::string> before;
    for (const auto& row : pqxx::nontransaction(c).exec(
             std::string("SELECT ") + kStoredHexByteaSql + " FROM scan_keys WHERE first_seen > now() - interval '48 hours'")) {
      before.insert(row[0].as<std::string>());
    }
    std::atomic<bool> stop{false};
    std::atomic<int> batches{0};
    std::thread inserter([&] {
      pqxx::connection ic(Url());
      while (!stop.load()) {
        pqxx::nontransaction(ic).exec0(
            "INSERT INTO scan_keys (digest) SELECT scangate_stored_digest(sha256(convert_to('ci-' || "
            "gen_random_uuid()::text || g, 'UTF8'))) FROM generate_series(1, 500) g");
        batches.fetch_add(1);
      }
    });
    while (batches.load() == 0) std::this_thread::yield();  // inserts are under way when the load starts
    StoreOptions o = Options(1);
    o.warm_streams = streams;
    o.warm_parallel_min_fraction = 0;
    Store store(o);
    store.Start();
    std::mutex mu;
    std::vector<Digest> loaded;
    const std::uint64_t n = store.WarmLoad(std::chrono::hours(48), [&](std::span<const Digest> chunk) {
      std::lock_guard lk(mu);
      loaded.insert(loaded.end(), chunk.begin(), chunk.end());
    });
    stop.store(true);
    inserter.join();
    EXPECT_EQ(store.Stats().last_warm_streams, streams);
    EXPECT_EQ(n, loaded.size());
    std::set<std::string> got;
    for (const auto& d : loaded) got.insert(HexBytea(d));
    EXPECT_EQ(got.size(), loaded.size());  // no digest delivered twice
    std::size_t missing = 0;
    for (const auto& d : before) missing += got.count(d) == 0 ? 1 : 0;
    EXPECT_EQ(missing, 0u) << "of " << before.size();
    std::set<std::string> now_recent;
    for (const auto& row : pqxx::nontransaction(c).exec(
             std::string("SELECT ") + kStoredHexByteaSql + " FROM scan_keys WHERE first_seen > now() - interval '48 hours'")) {
      now_recent.insert(row[0].as<std::string>());
    }
    std::size_t foreign = 0;  // delivered but not a recent row of the table
    for (const auto& d : got) foreign += now_recent.count(d) == 0 ? 1 : 0;
    EXPECT_EQ(foreign, 0u);
  }
}

// An exception thrown by the sink stops every stream and reaches the caller unchanged.
TEST_F(PgTest, WarmLoadSinkExceptionPropagates) {
  struct SinkStop {};
  pqxx::connection c(Url());
  pqxx::nontransaction(c).exec0(
      "INSERT INTO scan_keys (digest) SELECT scangate_stored_digest(sha256(convert_to('se-' || gen_random_uuid()::text || g, 'UTF8'))) "
      "FROM generate_series(1, 20000) g");
  StoreOptions o = Options(1);
  o.warm_streams = 3;
  o.warm_parallel_min_fraction = 0;
  Store store(o);
  store.Start();
  std::atomic<int> calls{0};
  EXPECT_THROW(store.WarmLoad(std::chrono::hours(48),
                              [&](std::span<const Digest>) {
                                calls.fetch_add(1);
                                throw SinkStop{};
                              }),
               SinkStop);
  EXPECT_GE(calls.load(), 1);
}

// Histograms are cumulative and agree with the counters.
TEST_F(PgTest, StatsHistogramsConsistent) {
  Store store(Options(2));
  store.Start();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(SubmitAndWait(store, RandomDigest()).has_value());
  const auto s = store.Stats();
  EXPECT_TRUE(s.up);
  EXPECT_EQ(s.inserted, 20u);
  EXPECT_EQ(s.batch_size_buckets.size(), 12u);
  EXPECT_EQ(s.batch_size_buckets.front().first, 1.0);
  EXPECT_EQ(s.batch_size_buckets[10].first, 1024.0);
  EXPECT_EQ(s.batch_size_count, s.batches);
  EXPECT_EQ(s.commit_seconds_count, s.batches);
  EXPECT_EQ(s.batch_size_sum, 20.0);
  for (std::size_t i = 1; i < s.batch_size_buckets.size(); ++i) {
    EXPECT_LE(s.batch_size_buckets[i - 1].second, s.batch_size_buckets[i].second);
  }
  EXPECT_EQ(s.commit_seconds_buckets.front().first, 0.0005);
  EXPECT_EQ(s.commit_seconds_buckets.back().second, s.batches);
}

// Outage: Submit fails fast or completes kUnavailable (never a verdict); write-behind queues; after
// PostgreSQL returns the store comes back up by itself, inserts work and the queued write-behind lands.
TEST_F(PgTest, OutageFailsFastAndRecovers) {
  auto opts = Options(2);
  opts.reconnect_backoff_max = 200ms;
  Store store(opts);
  store.Start();
  const Digest before = RandomDigest();
  ASSERT_EQ(SubmitAndWait(store, before)->outcome, Outcome::kInserted);

  RestartGuard guard;
  ASSERT_EQ(guard.Stop(), 0);

  // Every route: the first Submit may still be accepted (when the writer has not yet seen its idle connection
  // closed, it learns of the outage from the failing transaction) and must complete kUnavailable; then Submit
  // refuses at once.
  int accepted = 0;
  for (std::uint32_t route = 0; route < 2; ++route) {
    bool refused = false;
    for (int i = 0; i < 50 && !refused; ++i) {
      Answer<Result> answer;
      if (store.Submit(route, RandomDigest(), "", answer.Setter())) {
        ++accepted;
        EXPECT_EQ(answer.Get().outcome, Outcome::kUnavailable);
      } else {
        refused = true;
      }
    }
    EXPECT_TRUE(refused) << "route " << route;
  }
  EXPECT_FALSE(store.up());
  // An existing digest during the outage: refused, never "duplicate" or "new".
  EXPECT_FALSE(SubmitAndWait(store, before).has_value());
  EXPECT_FALSE(store.Submit(0, RandomDigest(), "", [](const Result&) {}));
  EXPECT_FALSE(store.Submit(1, RandomDigest(), "", [](const Result&) {}));

  const auto queued = RandomDigests(200);
  for (const auto& d : queued) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(d), d, "outage"));
  EXPECT_GE(store.Stats().queue_depth, queued.size());

  ASSERT_EQ(PgCtl("start"), 0);
  guard.stopped = false;
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (!store.up() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(store.up());

  const auto after = SubmitAndWait(store, RandomDigest());
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->outcome, Outcome::kInserted);
  const auto dup = SubmitAndWait(store, before);
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);

  store.Shutdown();
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, queued), static_cast<std::int64_t>(queued.size()));
  const auto s = store.Stats();
  EXPECT_GE(s.batch_failures, 1u);
  EXPECT_EQ(s.write_behind_lost, 0u);
  EXPECT_EQ(s.unavailable, static_cast<std::uint64_t>(accepted));
}

// A writer connection the server drops while the store is idle (pg_terminate_backend; PostgreSQL stays up) is
// replaced by the writer itself, before any item needs it, and invisibly: no outage, no failed batch, the next
// items answered at once.
TEST_F(PgTest, IdleConnectionDroppedIsReplacedInvisibly) {
  auto opts = Options(1);
  opts.url = Url() + "&application_name=sg_idle_drop";  // this store's backends only
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  ASSERT_EQ(SubmitAndWait(store, d)->outcome, Outcome::kInserted);
  pqxx::connection c(Url());
  auto backend = [&c] {
    pqxx::nontransaction tx(c);
    const auto r = tx.exec("SELECT pid FROM pg_stat_activity WHERE application_name = 'sg_idle_drop'");
    return r.size() == 1 ? r[0][0].as<int>() : 0;
  };
  const int before = backend();
  ASSERT_NE(before, 0);
  {
    pqxx::nontransaction tx(c);
    tx.exec("SELECT pg_terminate_backend(" + std::to_string(before) + ")");
  }
  int after = 0;
  const auto deadline = std::chrono::steady_clock::now() + 5s;  // the idle check runs every 250 ms
  while ((after = backend()) == before || after == 0) {
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(after, 0) << "the idle writer did not reconnect by itself";
  EXPECT_NE(after, before);
  EXPECT_TRUE(store.up());
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  const auto fresh = SubmitAndWait(store, RandomDigest());
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->outcome, Outcome::kInserted);
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// A PostgreSQL restart while the store is idle: the writer sees its connection closed without waiting for an
// item, reports the outage (down, "pg_state down"; Submit refused) and heals by itself once PostgreSQL is
// back; nothing of it changes a verdict.
TEST_F(PgTest, RestartWhileIdleGoesDownThenHeals) {
  auto opts = Options(1);
  auto log = std::make_shared<EventLog>();
  opts.log = log;
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  ASSERT_EQ(SubmitAndWait(store, d)->outcome, Outcome::kInserted);
  {
    RestartGuard guard;
    ASSERT_EQ(guard.Stop(), 0);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (store.up() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(store.up());
    EXPECT_TRUE(log->Has("pg_state", "down"));
    EXPECT_FALSE(store.Submit(RouteOf(d), RandomDigest(), "", [](const Result&) {}));
    ASSERT_EQ(PgCtl("start"), 0);
    guard.stopped = false;
  }
  const auto back = std::chrono::steady_clock::now() + kEventually;
  while (!store.up() && std::chrono::steady_clock::now() < back) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(store.up());
  EXPECT_TRUE(log->Has("pg_state", "up"));
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  const auto fresh = SubmitAndWait(store, RandomDigest());
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->outcome, Outcome::kInserted);
}

// Shutdown while the database stays down gives up after shutdown_retry instead of hanging, and
// accounts for the write-behind items it could not write.
TEST_F(PgTest, ShutdownDuringOutageIsBounded) {
  Store store(GiveUpOptions(1));
  store.Start();
  RestartGuard guard;
  ASSERT_EQ(guard.Stop(), 0);
  // Make the writer notice: a waiting item fails.
  auto r = SubmitAndWait(store, RandomDigest());
  if (r.has_value()) {
    EXPECT_EQ(r->outcome, Outcome::kUnavailable);
  }
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store.SubmitWriteBehind(0, RandomDigest(), ""));
  store.Shutdown();
  EXPECT_EQ(store.Stats().write_behind_lost, 5u);
  EXPECT_EQ(store.Stats().queue_depth, 0u);
}

// ---- In-doubt COMMIT (StoreOptions::fault_hook) and dead letter -------------------------------------

// A fault hook that injects `fault` into the first batch transaction only.
std::function<StoreFault()> FaultOnce(StoreFault fault) {
  auto fired = std::make_shared<std::atomic<bool>>(false);
  return [fired, fault] { return fired->exchange(true) ? StoreFault::kNone : fault; };
}

// (a) The COMMIT happened but its answer was lost: txid_status says committed, so the waiting
// observation is told kInserted (before: kUnavailable, and its retry "duplicate"), and one row exists.
TEST_F(PgTest, InDoubtCommitSettledCommitted) {
  auto opts = Options(1);
  opts.fault_hook = FaultOnce(StoreFault::kCommitAnswerLost);
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kInserted);
  EXPECT_FALSE(r->first_seen.empty());
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {d}), 1);
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(again->first_seen, r->first_seen);
  const auto s = store.Stats();
  EXPECT_EQ(s.in_doubt_committed, 1u);
  EXPECT_EQ(s.in_doubt_aborted + s.in_doubt_unknown, 0u);
  EXPECT_EQ(s.batch_failures, 0u);
  EXPECT_TRUE(store.up());
}

// A COPY batch (write-behind only) whose COMMIT answer is lost is settled by the xid its prologue noted:
// committed -> the computed outcomes; rolled back -> the batch runs again (by COPY). Either way each row
// lands exactly once and the commit hook sees kInserted with the row's first_seen. The COPY's COMMIT rides
// on the end of its rows, so a socket that breaks just before them (for real: libpq fails the end of the
// COPY) leaves it in doubt too, settled as rolled back.
TEST_F(PgTest, InDoubtCopyCommitIsSettled) {
  for (const StoreFault fault :
       {StoreFault::kCommitAnswerLost, StoreFault::kLostBeforeCommit, StoreFault::kSocketShutBeforeCommit}) {
    SCOPED_TRACE(static_cast<int>(fault));
    auto opts = Options(1);
    opts.fault_hook = FaultOnce(fault);
    Store store(opts);
    store.Start();
    const Digest d = RandomDigest();
    Answer<Result> p;
    ASSERT_TRUE(store.SubmitWriteBehind(0, d, "copy", p.Setter(), 0));
    const Result r = p.Get();
    EXPECT_EQ(r.outcome, Outcome::kInserted);
    EXPECT_EQ(r.first_seen, PgFirstSeen({d})[0]);
    pqxx::connection c(Url());
    EXPECT_EQ(CountRows(c, {d}), 1);
    const auto s = store.Stats();
    EXPECT_EQ(s.copy_batches, 1u);
    EXPECT_EQ(s.copy_fallbacks, 0u);
    EXPECT_EQ(s.in_doubt_committed, fault == StoreFault::kCommitAnswerLost ? 1u : 0u);
    EXPECT_EQ(s.in_doubt_aborted, fault == StoreFault::kCommitAnswerLost ? 0u : 1u);
    EXPECT_EQ(s.in_doubt_unknown + s.batch_failures, 0u);
  }
}

// (b) The connection broke before the COMMIT reached the server: txid_status says aborted, so the batch
// runs again transparently and the observation is told kInserted.
TEST_F(PgTest, InDoubtCommitSettledAbortedIsRetried) {
  auto opts = Options(1);
  opts.fault_hook = FaultOnce(StoreFault::kLostBeforeCommit);
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kInserted);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {d}), 1);
  const auto s = store.Stats();
  EXPECT_EQ(s.in_doubt_aborted, 1u);
  EXPECT_EQ(s.in_doubt_committed + s.in_doubt_unknown, 0u);
  EXPECT_EQ(s.batch_failures, 0u);
  EXPECT_EQ(s.inserted, 1u);
}

// (b, for real) The socket breaks just before COMMIT: pqxx itself raises in_doubt_error, the server
// rolls the transaction back (txid_status may say "in progress" until its backend notices: polled), and
// the batch runs again: kInserted, one row.
TEST_F(PgTest, InDoubtCommitBrokenSocketIsRetried) {
  auto opts = Options(1);
  opts.fault_hook = FaultOnce(StoreFault::kSocketShutBeforeCommit);
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kInserted);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {d}), 1);
  const auto s = store.Stats();
  EXPECT_EQ(s.in_doubt_aborted, 1u);
  EXPECT_EQ(s.in_doubt_committed + s.in_doubt_unknown, 0u);
  EXPECT_EQ(s.batch_failures, 0u);
  EXPECT_TRUE(store.up());
}

// (c) PostgreSQL cannot tell (the noted xid lies in its future, as after a server replacement): the
// waiting observation gets kUnknown, never a verdict; a write-behind row of the same batch stays queued
// and lands; the writer stays up.
TEST_F(PgTest, InDoubtCommitUnknowable) {
  auto opts = Options(1);
  opts.flush_interval = 10s;  // the write-behind row waits for the Submit, so both share one batch
  opts.fault_hook = FaultOnce(StoreFault::kXidUnknowable);
  Store store(opts);
  store.Start();
  const Digest behind = RandomDigest();
  const Digest d = RandomDigest();
  ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(behind), behind, "wb"));
  const auto r = SubmitAndWait(store, d);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kUnknown);
  EXPECT_TRUE(r->first_seen.empty());
  const auto s = store.Stats();
  EXPECT_EQ(s.in_doubt_unknown, 1u);
  EXPECT_EQ(s.in_doubt_committed + s.in_doubt_aborted, 0u);
  EXPECT_TRUE(store.up());
  // The commit did happen here: the retry is answered duplicate (the documented meaning of kUnknown).
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  store.Shutdown();
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, {behind, d}), 2);
  EXPECT_EQ(store.Stats().queue_depth, 0u);
}

// PostgreSQL stops while a batch that wrote nothing (a repeat) is committing: its in-doubt COMMIT is settled
// without a connection (no xid to ask about), and the writer must still notice the outage at once — go
// down, fail the next waiting item, refuse Submit — not keep accepting items it cannot write until the
// database returns (this once left /stats "up" and requests hanging to their deadline through an outage).
TEST_F(PgTest, OutageDuringInDoubtRepeatGoesDown) {
  auto opts = Options(1);
  opts.reconnect_backoff_max = 100ms;
  auto armed = std::make_shared<std::atomic<bool>>(false);
  opts.fault_hook = [armed] {
    if (!armed->exchange(false)) return StoreFault::kNone;
    EXPECT_EQ(PgCtl("stop"), 0);  // the open transaction's backend is terminated by the fast shutdown
    return StoreFault::kCommitAnswerLost;
  };
  Store store(opts);
  store.Start();
  const Digest d = RandomDigest();
  ASSERT_EQ(SubmitAndWait(store, d)->outcome, Outcome::kInserted);
  RestartGuard guard;
  guard.stopped = true;  // by the hook
  armed->store(true);
  const auto repeat = SubmitAndWait(store, d);  // wrote nothing: its outcome holds whether or not COMMIT ran
  ASSERT_TRUE(repeat.has_value());
  EXPECT_EQ(repeat->outcome, Outcome::kDuplicate);
  EXPECT_EQ(store.Stats().in_doubt_committed, 1u);
  // Within a few seconds the writer is down; a waiting item is refused or failed, never left queued.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (store.up() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(store.up()) << "the writer kept claiming up through the outage";
  Answer<Result> waiting;
  if (store.Submit(RouteOf(d), RandomDigest(), "", waiting.Setter())) {
    const auto r = waiting.Within(5s);
    ASSERT_TRUE(r.has_value()) << "a waiting item was held through the outage";
    EXPECT_EQ(r->outcome, Outcome::kUnavailable);
  }
  ASSERT_EQ(PgCtl("start"), 0);
  guard.stopped = false;
  const auto back = std::chrono::steady_clock::now() + kEventually;
  while (!store.up() && std::chrono::steady_clock::now() < back) std::this_thread::sleep_for(20ms);
  EXPECT_TRUE(store.up());
  const auto again = SubmitAndWait(store, d);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
}

// The postmaster's pid (first line of postmaster.pid); 0 when it is not running.
int PostmasterPid() {
  return std::atoi(ReadFileLine(ReadFileLine(PgDir() + "/pgdata") + "/postmaster.pid").c_str());
}

// A PostgreSQL fast shutdown (what pg_ctl stop -m fast sends: SIGINT to the postmaster) landing while a
// writer's real COMMIT is in flight: the fault hook signals the postmaster and lets the COMMIT race the
// shutdown (0 to 20 ms later; the COPY path and the ON CONFLICT path). Whatever the COMMIT met, within a
// request deadline the waiting item is answered (kInserted, kUnavailable or kUnknown), the writer goes down
// ("pg_state down" logged) and later items are refused or answered kUnavailable — never held on a dead
// connection through the outage (this once held a writer 21 s with "pg_state down" never logged).
TEST_F(PgTest, FastShutdownDuringCommitGoesDownWithinDeadline) {
  constexpr auto kRequestDeadline = 5s;  // the server's default --request-timeout
  for (const Expect expect : {Expect::kNew, Expect::kUnknown}) {
    for (const int delay_ms : {0, 1, 3, 10, 20}) {
      SCOPED_TRACE("expect " + std::to_string(static_cast<int>(expect)) + " delay " + std::to_string(delay_ms));
      auto opts = Options(1);
      opts.reconnect_backoff_max = 100ms;
      auto sink = std::make_shared<EventLog>();
      opts.log = sink;
      auto armed = std::make_shared<std::atomic<bool>>(false);
      opts.fault_hook = [armed, delay_ms] {
        if (!armed->exchange(false)) return StoreFault::kNone;
        const int pid = PostmasterPid();
        EXPECT_GT(pid, 0);
        if (pid > 0) ::kill(pid, SIGINT);  // fast shutdown: the backends are terminated
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        return StoreFault::kNone;  // the real COMMIT races the shutdown
      };
      Store store(opts);
      store.Start();
      RestartGuard guard;
      guard.stopped = true;  // by the hook
      armed->store(true);
      const auto t0 = std::chrono::steady_clock::now();
      auto promise = std::make_shared<std::promise<Result>>();
      auto future = promise->get_future();
      const Digest d = RandomDigest();
      ASSERT_TRUE(store.Submit(RouteOf(d), d, "", [promise](const Result& r) { promise->set_value(r); }, nullptr,
                               expect));
      ASSERT_EQ(future.wait_for(kRequestDeadline), std::future_status::ready) << "the waiting item was held";
      const Outcome first = future.get().outcome;
      EXPECT_NE(first, Outcome::kDuplicate);
      // Without further traffic (e.g. only repeats the filter answers) the writer notices the outage by
      // itself: down and logged within the deadline.
      while (store.up() && std::chrono::steady_clock::now() < t0 + kRequestDeadline) std::this_thread::sleep_for(20ms);
      EXPECT_FALSE(store.up()) << "the writer kept claiming up through the outage";
      EXPECT_TRUE(sink->Has("pg_state", "down")) << "pg_state down never logged";
      // Traffic during the outage: refused, or answered kUnavailable at once.
      auto next = std::make_shared<std::promise<Result>>();
      auto next_future = next->get_future();
      if (store.Submit(RouteOf(d), RandomDigest(), "", [next](const Result& r) { next->set_value(r); })) {
        ASSERT_EQ(next_future.wait_for(kRequestDeadline), std::future_status::ready) << "a waiting item was held";
        EXPECT_EQ(next_future.get().outcome, Outcome::kUnavailable);
      }
      ASSERT_EQ(PgCtl("stop"), 0);  // waits until the shutdown is complete
      ASSERT_EQ(PgCtl("start"), 0);
      guard.stopped = false;
      const auto back = std::chrono::steady_clock::now() + kEventually;
      while (!store.up() && std::chrono::steady_clock::now() < back) std::this_thread::sleep_for(20ms);
      EXPECT_TRUE(store.up());
      const auto again = SubmitAndWait(store, d);
      ASSERT_TRUE(again.has_value());
      // Exactly one "new" ever: a committed first attempt makes the retry a duplicate, a definite failure not.
      if (first == Outcome::kInserted) {
        EXPECT_EQ(again->outcome, Outcome::kDuplicate);
      }
      if (first == Outcome::kUnavailable) {
        EXPECT_EQ(again->outcome, Outcome::kInserted);
      }
    }
  }
}

// A write-behind row PostgreSQL always rejects is dead-lettered after kMaxRowAttempts: the good rows of
// its batch commit, the writer keeps serving other keys (waiting items get verdicts, not 503) and the
// counter moves. A waiting item with such a row gets kUnavailable at once.
TEST_F(PgTest, RejectedRowIsDeadLettered) {
  Latin1Db db;
  auto opts = Options(1);
  opts.url = db.url;
  Store store(opts);
  store.Start();
  const Digest bad = RandomDigest();
  const auto good = RandomDigests(50);
  ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(good[0]), good[0], "till-1"));
  ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(bad), bad, "till-\xE2\x82\xAC"));  // "till-€"
  for (std::size_t i = 1; i < 25; ++i) ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(good[i]), good[i], "till-1"));
  for (std::size_t i = 25; i < good.size(); ++i) {
    const auto r = SubmitAndWait(store, good[i], "till-2");
    ASSERT_TRUE(r.has_value()) << "Submit refused: the writer is down";
    EXPECT_EQ(r->outcome, Outcome::kInserted);
  }
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (store.Stats().dead_lettered == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(store.Stats().dead_lettered, 1u);

  // A waiting item whose row is rejected: kUnavailable, and the writer keeps going.
  const Digest bad_waiting = RandomDigest();
  const auto r = SubmitAndWait(store, bad_waiting, "\xE2\x82\xAC");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kUnavailable);
  const Digest after = RandomDigest();
  const auto ok = SubmitAndWait(store, after, "till-3");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->outcome, Outcome::kInserted);
  EXPECT_TRUE(store.up());

  store.Shutdown();
  const auto s = store.Stats();
  EXPECT_EQ(s.dead_lettered, 1u);
  EXPECT_EQ(s.batch_failures, 0u);
  EXPECT_EQ(s.write_behind_lost, 0u);
  EXPECT_EQ(s.queue_depth, 0u);
  pqxx::connection c(db.url);
  EXPECT_EQ(CountRows(c, good), static_cast<std::int64_t>(good.size()));
  EXPECT_EQ(CountRows(c, {bad, bad_waiting}), 0);
  EXPECT_EQ(CountRows(c, {after}), 1);
}

// Storage reports through StoreOptions::log: a sink set there receives the events (here the dead
// letter, carrying the digest hex and never the source) and nothing is written to stderr by storage.
TEST_F(PgTest, EventsGoToTheLogSink) {
  struct Capture : LogSink {
    std::mutex mu;
    std::vector<std::pair<std::string, boost::json::object>> events;
    void Write(LogSeverity, std::string_view event, boost::json::object fields) override {
      std::lock_guard lk(mu);
      events.emplace_back(std::string(event), std::move(fields));
    }
  };
  auto sink = std::make_shared<Capture>();
  Latin1Db db;
  auto opts = Options(1);
  opts.url = db.url;
  opts.log = sink;
  Store store(opts);
  store.Start();
  const Digest bad = RandomDigest();
  ASSERT_TRUE(store.SubmitWriteBehind(RouteOf(bad), bad, "secret-\xE2\x82\xAC"));
  store.Shutdown();
  std::lock_guard lk(sink->mu);
  bool found = false;
  for (const auto& [event, fields] : sink->events) {
    if (event != "dead_letter") continue;
    found = true;
    EXPECT_EQ(fields.at("digest").as_string(), HexBytea(bad).substr(2));
    EXPECT_EQ(boost::json::serialize(fields).find("secret"), std::string::npos);
  }
  EXPECT_TRUE(found);
}

// ---- SubmitWriteBehindGroup and WriteBehindSink -----------------------------------------------------

// Records what a WriteBehindSink is told, in the order it is told.
struct RecordingSink final : WriteBehindSink {
  std::mutex mu;
  std::vector<WriteBehindDone> rows;
  int calls = 0;
  void Done(std::span<const WriteBehindDone> r) override {
    std::lock_guard lk(mu);
    rows.insert(rows.end(), r.begin(), r.end());
    ++calls;
  }
  // tag -> how often it was reported.
  std::map<std::uint64_t, int> Counts() {
    std::lock_guard lk(mu);
    std::map<std::uint64_t, int> out;
    for (const auto& r : rows) ++out[r.tag];
    return out;
  }
};

// Rows of `ds` tagged 0..n-1 (flag = odd tag), sourced "group".
std::vector<WriteBehindRow> GroupRows(const std::vector<Digest>& ds) {
  std::vector<WriteBehindRow> rows;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    rows.push_back(WriteBehindRow{RouteOf(ds[i]), ds[i], "group", 0, i, i % 2 == 1, std::nullopt});
  }
  return rows;
}

// A group meeting a full queue is accepted as a prefix (in order, up to queue_limit); the rest is refused
// and accepted later; the sink hears of every row once, in submission order (one writer: FIFO).
TEST_F(PgTest, WriteBehindGroupAcceptsAPrefixWhenFull) {
  auto opts = Options(1);
  opts.queue_limit = 8;
  Store store(opts);
  store.Start();
  const Digest blocked = RandomDigest();
  RowBlocker blocker(blocked);
  Answer<Result> held;
  ASSERT_TRUE(store.Submit(0, blocked, "", held.Setter()));
  ASSERT_TRUE(WaitForLockWaiter()) << "the writer never blocked on the test's row";
  const auto ds = RandomDigests(10);
  const auto rows = GroupRows(ds);
  RecordingSink sink;
  EXPECT_EQ(store.SubmitWriteBehindGroup(rows, sink), 7u);  // 1 in flight + 7 = queue_limit
  EXPECT_EQ(store.Stats().queue_depth, 8u);
  const std::span<const WriteBehindRow> rest(rows.begin() + 7, rows.end());
  EXPECT_EQ(store.SubmitWriteBehindGroup(rest, sink), 0u);
  blocker.Rollback();
  EXPECT_EQ(held.Get().outcome, Outcome::kInserted);
  const auto deadline = std::chrono::steady_clock::now() + kEventually;
  while (store.Stats().queue_depth > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(store.SubmitWriteBehindGroup(rest, sink), 3u);
  store.Shutdown();
  std::lock_guard lk(sink.mu);
  ASSERT_EQ(sink.rows.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(sink.rows[i].tag, i);
    EXPECT_EQ(sink.rows[i].digest, ds[i]);
    EXPECT_EQ(sink.rows[i].flag, i % 2 == 1);
    EXPECT_EQ(sink.rows[i].outcome, Outcome::kInserted);
  }
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(ds.size()));
}

// Committed rows reach the sink exactly once each, batched (one call per transaction, not per row): new
// rows kInserted, rows already in the table kDuplicate (their COPY batches fell back to ON CONFLICT).
TEST_F(PgTest, WriteBehindGroupSinkSeesEveryCommittedRowOnce) {
  auto opts = Options(2);
  opts.batch_limit = 64;
  opts.flush_interval = 10s;  // batches form by batch_limit and Shutdown's flush only
  Store store(opts);
  store.Start();
  auto ds = RandomDigests(480);
  std::set<std::uint64_t> existing;
  for (std::size_t i = 0; i < ds.size(); i += 24) {
    ASSERT_EQ(SubmitAndWait(store, ds[i])->outcome, Outcome::kInserted);
    existing.insert(i);
  }
  RecordingSink sink;
  const auto rows = GroupRows(ds);
  ASSERT_EQ(store.SubmitWriteBehindGroup(rows, sink), rows.size());
  store.Shutdown();
  const auto counts = sink.Counts();
  ASSERT_EQ(counts.size(), rows.size());
  for (const auto& [tag, n] : counts) EXPECT_EQ(n, 1) << "tag " << tag;
  std::lock_guard lk(sink.mu);
  for (const auto& r : sink.rows) {
    ASSERT_LT(r.tag, ds.size());
    EXPECT_EQ(r.digest, ds[r.tag]);
    EXPECT_EQ(r.flag, r.tag % 2 == 1);
    EXPECT_EQ(r.outcome, existing.contains(r.tag) ? Outcome::kDuplicate : Outcome::kInserted) << r.tag;
  }
  const auto s = store.Stats();
  EXPECT_LE(static_cast<std::uint64_t>(sink.calls), s.batches);  // once per transaction at most
  EXPECT_GE(s.copy_fallbacks, 1u);
  EXPECT_EQ(s.queue_depth, 0u);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(ds.size()));
}

// A dead-lettered group row reaches the sink once, kUnavailable; the good rows of its batch kInserted.
TEST_F(PgTest, WriteBehindGroupSinkSeesADeadLetterOnce) {
  Latin1Db db;
  auto opts = Options(1);
  opts.url = db.url;
  Store store(opts);
  store.Start();
  const auto ds = RandomDigests(20);
  auto rows = GroupRows(ds);
  const std::string bad_source = "till-\xE2\x82\xAC";  // "till-€": LATIN1 cannot hold it
  rows[7].source = bad_source;
  RecordingSink sink;
  ASSERT_EQ(store.SubmitWriteBehindGroup(rows, sink), rows.size());
  store.Shutdown();
  EXPECT_EQ(store.Stats().dead_lettered, 1u);
  const auto counts = sink.Counts();
  ASSERT_EQ(counts.size(), rows.size());
  for (const auto& [tag, n] : counts) EXPECT_EQ(n, 1) << "tag " << tag;
  std::lock_guard lk(sink.mu);
  for (const auto& r : sink.rows) {
    EXPECT_EQ(r.outcome, r.tag == 7 ? Outcome::kUnavailable : Outcome::kInserted) << r.tag;
  }
}

// Rows given up at Shutdown() (database down past shutdown_retry) reach the sink once each, kUnavailable.
TEST_F(PgTest, WriteBehindGroupSinkSeesAGiveUpOnce) {
  Store store(GiveUpOptions(2));
  store.Start();
  RestartGuard guard;
  ASSERT_EQ(guard.Stop(), 0);
  const auto ds = RandomDigests(40);
  const auto rows = GroupRows(ds);
  RecordingSink sink;
  ASSERT_EQ(store.SubmitWriteBehindGroup(rows, sink), rows.size());
  store.Shutdown();
  EXPECT_EQ(store.Stats().write_behind_lost, rows.size());
  EXPECT_EQ(store.Stats().queue_depth, 0u);
  const auto counts = sink.Counts();
  ASSERT_EQ(counts.size(), rows.size());
  for (const auto& [tag, n] : counts) EXPECT_EQ(n, 1) << "tag " << tag;
  std::lock_guard lk(sink.mu);
  for (const auto& r : sink.rows) EXPECT_EQ(r.outcome, Outcome::kUnavailable) << r.tag;
}


// ---- The de-duplication horizon (StoreOptions::retention) ---------------------------------------------

// A horizon of seconds: a row backdated by an hour is far past it, and an answer read right after another
// (milliseconds) is well within it.
constexpr auto kShortHorizon = 2s;

// Moves `d`'s row back in time by `interval` (an SQL interval, e.g. "1 hour"), as if first seen that long ago.
void Backdate(const Digest& d, const std::string& interval) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto r = tx.exec_params("UPDATE scan_keys SET first_seen = now() - $2::interval WHERE digest = scangate_stored_digest($1::bytea)",
                                HexBytea(d), interval);
  ASSERT_EQ(r.affected_rows(), 1u) << "no row to backdate";
  tx.commit();
}

// `d`'s row as PostgreSQL holds it.
struct Row {
  std::string first_seen;             // to_char, the shape of Result::first_seen ("" = no row)
  std::optional<std::string> source;  // NULL = none
  double age_seconds = -1;            // now() - first_seen
};
Row RowOf(const Digest& d) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto r = tx.exec_params(
      "SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), seen_by, "
      "extract(epoch FROM now() - first_seen)::float8 FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)",
      HexBytea(d));
  Row row;
  if (r.empty()) return row;
  row.first_seen = r[0][0].as<std::string>();
  if (!r[0][1].is_null()) row.source = r[0][1].as<std::string>();
  row.age_seconds = r[0][2].as<double>();
  return row;
}

StoreOptions HorizonOptions(std::chrono::seconds retention, unsigned writers = 1) {
  StoreOptions o = Options(writers);
  o.retention = retention;
  return o;
}

// A row older than the horizon counts as absent: the next Submit takes it over — kInserted with a fresh
// first_seen, the row's first_seen and source replaced — and the Submit after that is a duplicate of the new
// record.
TEST_F(PgTest, ExpiredRowIsTakenOver) {
  Store store(HorizonOptions(kShortHorizon));
  store.Start();
  const Digest d = RandomDigest();
  const auto first = SubmitAndWait(store, d, "first");
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->outcome, Outcome::kInserted);
  Backdate(d, "1 hour");
  const Row old_row = RowOf(d);
  ASSERT_GT(old_row.age_seconds, 3599);

  const auto again = SubmitAndWait(store, d, "second");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, Outcome::kInserted);
  EXPECT_GT(again->first_seen, old_row.first_seen);  // fixed-width RFC 3339 UTC: ordered as text
  const Row row = RowOf(d);
  EXPECT_EQ(row.first_seen, again->first_seen);
  EXPECT_EQ(row.source, std::optional<std::string>("second"));
  EXPECT_GE(row.age_seconds, 0);
  EXPECT_LT(row.age_seconds, kShortHorizon.count()) << "the row was not renewed";

  const auto third = SubmitAndWait(store, d, "third");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->outcome, Outcome::kDuplicate);
  EXPECT_EQ(third->first_seen, again->first_seen);
  EXPECT_EQ(RowOf(d).source, std::optional<std::string>("second"));  // a duplicate changes nothing
  const auto s = store.Stats();
  EXPECT_EQ(s.batch_failures, 0u);
  EXPECT_EQ(s.copy_fallbacks, 0u);
}

// The horizon by PostgreSQL's clock alone (no backdating): a key is a duplicate right after its insert and new
// again once the horizon has passed.
TEST_F(PgTest, KeyIsNewAgainOnceTheHorizonPassed) {
  Store store(HorizonOptions(kShortHorizon));
  store.Start();
  const Digest d = RandomDigest();
  const auto first = SubmitAndWait(store, d, "a");
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(first->outcome, Outcome::kInserted);
  const auto repeat = SubmitAndWait(store, d, "b");
  ASSERT_TRUE(repeat.has_value());
  EXPECT_EQ(repeat->outcome, Outcome::kDuplicate);
  EXPECT_EQ(repeat->first_seen, first->first_seen);
  std::this_thread::sleep_for(kShortHorizon + 1s);
  const auto later = SubmitAndWait(store, d, "c");
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->outcome, Outcome::kInserted);
  EXPECT_GT(later->first_seen, first->first_seen);
  EXPECT_EQ(RowOf(d).source, std::optional<std::string>("c"));
}

// Near the edge, by backdating under an hour's horizon (no timing involved): 59 minutes old is a duplicate
// with the row untouched, 61 minutes old is taken over. With the horizon off (0) a row ten years old is a
// duplicate, its first_seen and source kept.
TEST_F(PgTest, RowWithinTheHorizonOrWithoutOneStaysDuplicate) {
  {
    Store store(HorizonOptions(std::chrono::hours(1)));
    store.Start();
    const Digest young = RandomDigest(), old = RandomDigest();
    for (const Digest& d : {young, old}) ASSERT_EQ(SubmitAndWait(store, d, "orig")->outcome, Outcome::kInserted);
    Backdate(young, "59 minutes");
    Backdate(old, "61 minutes");
    const Row young_row = RowOf(young);
    const auto y = SubmitAndWait(store, young, "later");
    ASSERT_TRUE(y.has_value());
    EXPECT_EQ(y->outcome, Outcome::kDuplicate);
    EXPECT_EQ(y->first_seen, young_row.first_seen);
    EXPECT_EQ(RowOf(young).first_seen, young_row.first_seen);
    EXPECT_EQ(RowOf(young).source, std::optional<std::string>("orig"));
    const auto o = SubmitAndWait(store, old, "later");
    ASSERT_TRUE(o.has_value());
    EXPECT_EQ(o->outcome, Outcome::kInserted);
    EXPECT_EQ(RowOf(old).source, std::optional<std::string>("later"));
  }
  {
    Store store(HorizonOptions(0s));
    store.Start();
    const Digest d = RandomDigest();
    ASSERT_EQ(SubmitAndWait(store, d, "orig")->outcome, Outcome::kInserted);
    Backdate(d, "10 years");
    const Row before = RowOf(d);
    for (const Expect expect : {Expect::kUnknown, Expect::kNew}) {
      const auto r = SubmitAndWait(store, d, "later", expect);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->outcome, Outcome::kDuplicate);
      EXPECT_EQ(r->first_seen, before.first_seen);
    }
    EXPECT_EQ(RowOf(d).first_seen, before.first_seen);
    EXPECT_EQ(RowOf(d).source, std::optional<std::string>("orig"));
  }
}

// One ON CONFLICT batch mixing expired rows (one of them repeated in the batch), rows within the horizon and
// absent keys: expired -> kInserted (its repeat kDuplicate with the same new first_seen), within -> kDuplicate
// with its own first_seen, absent -> kInserted; every answer's first_seen is the one PostgreSQL holds.
TEST_F(PgTest, BatchMixesExpiredPresentAndAbsentKeys) {
  auto opts = HorizonOptions(kShortHorizon);
  opts.batch_limit = 4096;
  Store store(opts);
  store.Start();
  const auto expired = RandomDigests(20), present = RandomDigests(20), absent = RandomDigests(20);
  for (const auto& d : expired) InsertBehindTheStoresBack(d, "2021-03-04 05:06:07.891011+00");
  for (const auto& d : present) ASSERT_EQ(SubmitAndWait(store, d, "orig")->outcome, Outcome::kInserted);
  const auto present_before = PgFirstSeen(present);
  std::vector<Digest> ds;
  for (std::size_t i = 0; i < 20; ++i) ds.insert(ds.end(), {expired[i], present[i], absent[i]});
  ds.push_back(expired[7]);  // an in-batch repeat of an expired key
  const auto results = SubmitAsOneBatch(store, ds, "batch");
  const auto pg = PgFirstSeen(ds);
  for (std::size_t i = 0; i < 60; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(results[i].first_seen, pg[i]);
    if (i % 3 == 1) {
      EXPECT_EQ(results[i].outcome, Outcome::kDuplicate);
      EXPECT_EQ(results[i].first_seen, present_before[i / 3]);
    } else {
      EXPECT_EQ(results[i].outcome, Outcome::kInserted);
      EXPECT_GT(results[i].first_seen, "2021-03-04T05:06:07.891011Z");
    }
  }
  EXPECT_EQ(results.back().outcome, Outcome::kDuplicate);
  EXPECT_EQ(results.back().first_seen, results[7 * 3].first_seen);
  for (const auto& d : expired) EXPECT_EQ(RowOf(d).source, std::optional<std::string>("batch"));
  for (const auto& d : present) EXPECT_EQ(RowOf(d).source, std::optional<std::string>("orig"));
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// The COPY path meets an expired row: a Submit the filter called new (Expect::kNew, by COPY) aborts on it,
// falls back to ON CONFLICT and takes the row over (kInserted); one fallback.
TEST_F(PgTest, CopyOfAHintedSubmitTakesAnExpiredRowOver) {
  Store store(HorizonOptions(kShortHorizon));
  store.Start();
  const Digest d = RandomDigest();
  InsertBehindTheStoresBack(d, "2022-05-06 07:08:09.000001+00");
  const auto before = store.Stats();
  const auto r = SubmitAndWait(store, d, "hinted", Expect::kNew);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, Outcome::kInserted);
  const auto after = store.Stats();
  EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 1u);
  EXPECT_EQ(after.copy_batches - before.copy_batches, 0u);
  EXPECT_EQ(after.write_behind_conflicts - before.write_behind_conflicts, 0u);
  const Row row = RowOf(d);
  EXPECT_EQ(row.first_seen, r->first_seen);
  EXPECT_EQ(row.source, std::optional<std::string>("hinted"));
  EXPECT_LT(row.age_seconds, kShortHorizon.count());
  EXPECT_EQ(SubmitAndWait(store, d, "", Expect::kNew)->outcome, Outcome::kDuplicate);
}

// A write-behind batch (by COPY) holding an expired row: the COPY aborts, the batch re-runs through ON
// CONFLICT and every row is kInserted — the expired one taken over, so NOT a write-behind conflict.
TEST_F(PgTest, WriteBehindCopyTakesAnExpiredRowOver) {
  constexpr std::size_t kBatch = 300;
  auto opts = HorizonOptions(kShortHorizon);
  opts.batch_limit = kBatch;
  opts.flush_interval = 30s;  // the writer takes a write-behind batch when it is full
  Store store(opts);
  store.Start();
  const Digest expired = RandomDigest();
  InsertBehindTheStoresBack(expired, "2022-05-06 07:08:09.000001+00");
  auto ds = RandomDigests(kBatch - 1);
  ds.insert(ds.begin() + kBatch / 2, expired);
  const auto before = store.Stats();
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    ASSERT_TRUE(store.SubmitWriteBehind(0, ds[i], "wb-" + std::to_string(i), answers[i].Setter(), 0));
  }
  std::vector<Result> results;
  for (auto& a : answers) results.push_back(a.Get());
  const auto after = store.Stats();
  EXPECT_EQ(after.batches - before.batches, 1u);
  EXPECT_EQ(after.copy_batches - before.copy_batches, 0u);
  EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 1u);
  EXPECT_EQ(after.write_behind_conflicts - before.write_behind_conflicts, 0u);
  EXPECT_EQ(after.batch_failures, 0u);
  const auto pg = PgFirstSeen(ds);
  for (std::size_t i = 0; i < ds.size(); ++i) {
    EXPECT_EQ(results[i].outcome, Outcome::kInserted) << i;
    EXPECT_EQ(results[i].first_seen, pg[i]) << i;
  }
  const Row row = RowOf(expired);
  EXPECT_EQ(row.source, std::optional<std::string>("wb-" + std::to_string(kBatch / 2)));
  EXPECT_LT(row.age_seconds, kShortHorizon.count());
}

// Two Stores (two processes' worth, two writers each) race on 200 expired keys: exactly one kInserted per key
// in total, every answer for a key carrying the same (new) first_seen; one row each. The horizon is an hour
// here (the rows are backdated by two): the race must end within the horizon, or a key is rightly new again.
TEST_F(PgTest, CrossStoreRaceOnExpiredKeysExactlyOneInserted) {
  constexpr std::size_t kDigests = 200;
  const auto ds = RandomDigests(kDigests);
  {
    pqxx::connection c(Url());
    pqxx::work tx(c);
    for (const auto& d : ds) {
      tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest($1::bytea), 'old', "
                      "now() - interval '2 hours')",
                      HexBytea(d));
    }
    tx.commit();
  }
  Store a(HorizonOptions(std::chrono::hours(1), 2));
  Store b(HorizonOptions(std::chrono::hours(1), 2));
  a.Start();
  b.Start();
  Tally tally;
  std::atomic<int> outstanding{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { SubmitAll(t % 2 == 0 ? a : b, ds, t, tally, outstanding); });
  }
  for (auto& t : threads) t.join();
  WaitOutstanding(outstanding);
  ExpectExactlyOneInserted(tally, kDigests, 4);
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(kDigests));
  std::size_t renewed = 0;
  for (const auto& d : ds) renewed += RowOf(d).age_seconds < 3600 ? 1 : 0;
  EXPECT_EQ(renewed, kDigests);
}

// ---- Packs (--keys=gs1, issue 24: PackAttrs, StoreOptions::pack_horizons) ----------------------------------

// µs since the epoch, `offset` from now (the test's clock; PostgreSQL's runs on the same host).
std::int64_t UsFromNow(std::chrono::seconds offset) {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             (std::chrono::system_clock::now() + offset).time_since_epoch())
      .count();
}

PackAttrs Pack(std::int32_t expiry_days, std::int64_t keep_until_us, bool with_lot = true) {
  PackAttrs a;
  if (with_lot) a.lot = RandomDigest();
  a.expiry = expiry_days;
  a.keep_until_us = keep_until_us;
  return a;
}

StoreOptions PackOptions(std::chrono::seconds retention, unsigned writers = 1) {
  StoreOptions o = HorizonOptions(retention, writers);
  o.pack_horizons = true;
  return o;
}

std::optional<Result> SubmitPackAndWait(Store& store, const Digest& d, const PackAttrs& attrs,
                                        std::string source = "", Expect expect = Expect::kUnknown) {
  Answer<Result> answer;
  if (!store.Submit(RouteOf(d), d, std::move(source), answer.Setter(), nullptr, expect, attrs)) return std::nullopt;
  auto r = answer.Within();
  if (!r.has_value()) ADD_FAILURE() << "no answer to the Submit within " << kAnswerBound.count() << " s";
  return r;
}

// `d`'s pack columns as PostgreSQL holds them (keep_until in µs); `present` false when there is no row.
struct PackRow {
  bool present = false;
  std::optional<Digest> lot;
  std::optional<std::int32_t> expiry;
  std::optional<std::int64_t> keep_until_us;
  std::int64_t first_seen_us = 0;
};
PackRow PackRowOf(const Digest& d) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto r = tx.exec_params("SELECT rpad(encode(uuid_send(lot), 'hex'), 64, '0'), expiry - date 'epoch', "
                                "(extract(epoch FROM keep_until) * 1000000)::int8, "
                                "(extract(epoch FROM first_seen) * 1000000)::int8 FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)",
                                HexBytea(d));
  PackRow row;
  if (r.empty()) return row;
  row.present = true;
  if (!r[0][0].is_null()) row.lot = DigestFromHex(r[0][0].as<std::string>());
  if (!r[0][1].is_null()) row.expiry = r[0][1].as<std::int32_t>();
  if (!r[0][2].is_null()) row.keep_until_us = r[0][2].as<std::int64_t>();
  row.first_seen_us = r[0][3].as<std::int64_t>();
  return row;
}

// Moves `d`'s keep_until to `interval` (SQL) before now: the pack's own horizon has passed.
void ExpireKeepUntil(const Digest& d, const std::string& interval) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto r = tx.exec_params("UPDATE scan_keys SET keep_until = now() - $2::interval WHERE digest = scangate_stored_digest($1::bytea)",
                                HexBytea(d), interval);
  ASSERT_EQ(r.affected_rows(), 1u) << "no row to expire";
  tx.commit();
}

void ExpectRecorded(const Result& r, const PackAttrs& want) {
  EXPECT_EQ(StoredLot(r.recorded.lot), StoredLot(want.lot));
  EXPECT_EQ(r.recorded.expiry, want.expiry);
  EXPECT_EQ(r.recorded.keep_until_us, 0) << "keep_until is not reported";
}

// A pack's attributes go into its row and come back: kInserted reports what was sent; a later scan of the pack
// with another lot and expiry is kDuplicate reporting the row's (first) lot and expiry, and changes nothing; a
// pack without attributes records NULLs and reports none.
TEST_F(PgTest, PackAttrsRoundTrip) {
  Store store(PackOptions(0s));
  store.Start();
  const Digest d = RandomDigest();
  const PackAttrs first = Pack(20'818, UsFromNow(std::chrono::hours(24 * 400)));
  const auto ins = SubmitPackAndWait(store, d, first, "scanner-1");
  ASSERT_TRUE(ins.has_value());
  ASSERT_EQ(ins->outcome, Outcome::kInserted);
  ExpectRecorded(*ins, first);
  const PackRow row = PackRowOf(d);
  ASSERT_TRUE(row.present);
  EXPECT_EQ(row.lot, StoredLot(first.lot));
  EXPECT_EQ(row.expiry, first.expiry);
  EXPECT_EQ(row.keep_until_us, first.keep_until_us);  // retention off: the pack's own horizon as sent
  EXPECT_EQ(row.first_seen_us, ins->first_seen_us);

  const PackAttrs other = Pack(20'900, UsFromNow(std::chrono::hours(24 * 500)));
  const auto dup = SubmitPackAndWait(store, d, other, "scanner-2");
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  EXPECT_EQ(dup->first_seen, ins->first_seen);
  ExpectRecorded(*dup, first);
  const PackRow after = PackRowOf(d);
  EXPECT_EQ(after.lot, StoredLot(first.lot));
  EXPECT_EQ(after.keep_until_us, first.keep_until_us);
  EXPECT_EQ(RowOf(d).source, std::optional<std::string>("scanner-1"));

  const Digest bare = RandomDigest();
  const auto b = SubmitPackAndWait(store, bare, PackAttrs{});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->outcome, Outcome::kInserted);
  EXPECT_TRUE(b->recorded.empty());
  const PackRow bare_row = PackRowOf(bare);
  EXPECT_TRUE(bare_row.present && !bare_row.lot && !bare_row.expiry && !bare_row.keep_until_us);
  EXPECT_TRUE(SubmitPackAndWait(store, bare, first)->recorded.empty()) << "a duplicate reports the row's (none)";
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// One ON CONFLICT batch of packs: a row recorded earlier (with a lot only), new packs (one repeated in the batch
// with other attributes) — the duplicates report what the row holds, the in-batch repeat its first item's.
TEST_F(PgTest, PackBatchDuplicatesReportTheRecordedAttrs) {
  auto opts = PackOptions(0s);
  opts.batch_limit = 4096;
  Store store(opts);
  store.Start();
  const Digest old = RandomDigest();
  PackAttrs old_attrs;
  old_attrs.lot = RandomDigest();
  ASSERT_EQ(SubmitPackAndWait(store, old, old_attrs)->outcome, Outcome::kInserted);
  const auto fresh = RandomDigests(30);
  std::vector<Digest> ds{old};
  std::vector<PackAttrs> attrs{Pack(20'000, UsFromNow(std::chrono::hours(24)))};
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    ds.push_back(fresh[i]);
    attrs.push_back(Pack(20'000 + static_cast<std::int32_t>(i), UsFromNow(std::chrono::hours(48)), i % 2 == 0));
  }
  ds.push_back(fresh[3]);
  attrs.push_back(Pack(19'000, UsFromNow(std::chrono::hours(72))));
  // One batch: the single writer held behind a row lock while the items queue (as SubmitAsOneBatchEach).
  const Digest blocked = RandomDigest();
  RowBlocker blocker(blocked);
  Answer<Result> held;
  ASSERT_TRUE(store.Submit(0, blocked, "", held.Setter()));
  ASSERT_TRUE(WaitForLockWaiter());
  const auto before = store.Stats();
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    ASSERT_TRUE(store.Submit(0, ds[i], "batch", answers[i].Setter(), nullptr, Expect::kUnknown, attrs[i]));
  }
  blocker.Rollback();
  EXPECT_EQ(held.Get().outcome, Outcome::kInserted);
  std::vector<Result> results;
  for (auto& a : answers) results.push_back(a.Get());
  EXPECT_EQ(store.Stats().batches - before.batches, 2u) << "the items did not form one batch";

  EXPECT_EQ(results[0].outcome, Outcome::kDuplicate);
  ExpectRecorded(results[0], old_attrs);
  for (std::size_t i = 1; i <= fresh.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(results[i].outcome, Outcome::kInserted);
    ExpectRecorded(results[i], attrs[i]);
    EXPECT_EQ(PackRowOf(ds[i]).lot, StoredLot(attrs[i].lot));
    EXPECT_EQ(PackRowOf(ds[i]).expiry, attrs[i].expiry);
  }
  EXPECT_EQ(results.back().outcome, Outcome::kDuplicate);
  ExpectRecorded(results.back(), attrs[4]);  // fresh[3]'s first item
  EXPECT_EQ(PackRowOf(fresh[3]).expiry, attrs[4].expiry);
}

// A pack row past its own keep_until counts as absent (retention off): the next scan takes it over — kInserted,
// everything replaced (first_seen, source, lot, expiry, keep_until) — and the scan after that is a duplicate.
// Each writer's statement does it, by ON CONFLICT and by a COPY that falls back.
TEST_F(PgTest, PackPastItsKeepUntilIsTakenOver) {
  Store store(PackOptions(0s));
  store.Start();
  for (const Expect expect : {Expect::kUnknown, Expect::kNew}) {
    SCOPED_TRACE(static_cast<int>(expect));
    const Digest d = RandomDigest();
    ASSERT_EQ(SubmitPackAndWait(store, d, Pack(19'000, UsFromNow(std::chrono::hours(1))), "old")->outcome,
              Outcome::kInserted);
    Backdate(d, "3 years");
    ExpireKeepUntil(d, "1 second");
    const PackAttrs renewed = Pack(21'000, UsFromNow(std::chrono::hours(24 * 365)));
    const auto r = SubmitPackAndWait(store, d, renewed, "new", expect);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kInserted);
    ExpectRecorded(*r, renewed);
    const PackRow row = PackRowOf(d);
    EXPECT_EQ(row.lot, StoredLot(renewed.lot));
    EXPECT_EQ(row.expiry, renewed.expiry);
    EXPECT_EQ(row.keep_until_us, renewed.keep_until_us);
    EXPECT_EQ(row.first_seen_us, r->first_seen_us);
    EXPECT_EQ(RowOf(d).source, std::optional<std::string>("new"));
    EXPECT_LT(RowOf(d).age_seconds, 60);
    const auto again = SubmitPackAndWait(store, d, Pack(22'000, UsFromNow(1h)), "", expect);
    EXPECT_EQ(again->outcome, Outcome::kDuplicate);
    ExpectRecorded(*again, renewed);
  }
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// With a retention R, a pack's keep_until is never before first_seen + R; a pack row older than R but within its
// own keep_until stays a duplicate (not taken over); a row without a keep_until follows R as raw rows do. With R
// off such a row is a duplicate for ever.
TEST_F(PgTest, PackWithinItsKeepUntilButPastTheRetentionStays) {
  {
    Store store(PackOptions(std::chrono::hours(1)));
    store.Start();
    const Digest pinned = RandomDigest(), short_lived = RandomDigest(), unpinned = RandomDigest();
    const PackAttrs long_pack = Pack(21'000, UsFromNow(std::chrono::hours(24 * 365)));
    const auto p = SubmitPackAndWait(store, pinned, long_pack, "orig");
    ASSERT_EQ(p->outcome, Outcome::kInserted);
    const auto s = SubmitPackAndWait(store, short_lived, Pack(21'000, UsFromNow(1s)), "orig");
    ASSERT_EQ(s->outcome, Outcome::kInserted);
    EXPECT_EQ(PackRowOf(short_lived).keep_until_us, s->first_seen_us + 3'600'000'000LL) << "first_seen + R";
    PackAttrs lot_only;
    lot_only.lot = RandomDigest();
    ASSERT_EQ(SubmitPackAndWait(store, unpinned, lot_only, "orig")->outcome, Outcome::kInserted);
    EXPECT_FALSE(PackRowOf(unpinned).keep_until_us.has_value());
    Backdate(pinned, "2 hours");
    Backdate(unpinned, "2 hours");
    const PackRow before = PackRowOf(pinned);
    for (const Expect expect : {Expect::kUnknown, Expect::kNew}) {
      const auto r = SubmitPackAndWait(store, pinned, Pack(22'000, UsFromNow(1h)), "later", expect);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->outcome, Outcome::kDuplicate);
      EXPECT_EQ(r->first_seen_us, before.first_seen_us);
      ExpectRecorded(*r, long_pack);
    }
    const PackRow after = PackRowOf(pinned);
    EXPECT_EQ(after.keep_until_us, before.keep_until_us);
    EXPECT_EQ(after.first_seen_us, before.first_seen_us);
    EXPECT_EQ(RowOf(pinned).source, std::optional<std::string>("orig"));
    const auto u = SubmitPackAndWait(store, unpinned, PackAttrs{}, "later");
    EXPECT_EQ(u->outcome, Outcome::kInserted) << "a row without keep_until follows the retention";
    EXPECT_FALSE(PackRowOf(unpinned).lot.has_value()) << "taken over with the new (absent) lot";
  }
  {
    Store store(PackOptions(0s));
    store.Start();
    const Digest d = RandomDigest();
    ASSERT_EQ(SubmitPackAndWait(store, d, PackAttrs{}, "orig")->outcome, Outcome::kInserted);
    Backdate(d, "10 years");
    EXPECT_EQ(SubmitPackAndWait(store, d, Pack(21'000, UsFromNow(1h)), "later")->outcome, Outcome::kDuplicate);
    EXPECT_EQ(RowOf(d).source, std::optional<std::string>("orig"));
  }
}

// The COPY path (Submit items the filter called new) writes the pack columns, keep_until as the INSERT computes
// it (never before first_seen + R), and reports what it sent.
TEST_F(PgTest, PackCopyWritesTheAttrs) {
  Store store(PackOptions(std::chrono::hours(1)));
  store.Start();
  const auto ds = RandomDigests(40);
  std::vector<PackAttrs> attrs;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    PackAttrs a = Pack(20'000 + static_cast<std::int32_t>(i),
                       i % 2 == 0 ? UsFromNow(std::chrono::hours(24 * 30)) : UsFromNow(1s), i % 3 != 0);
    if (i % 5 == 0) a.expiry.reset();
    if (i % 7 == 0) a.keep_until_us = 0;
    attrs.push_back(a);
  }
  const auto before = store.Stats();
  std::vector<Answer<Result>> answers(ds.size());
  for (std::size_t i = 0; i < ds.size(); ++i) {
    // All on route 0, one writer: the items form batches of Bloom negatives.
    ASSERT_TRUE(store.Submit(0, ds[i], "copy", answers[i].Setter(), nullptr, Expect::kNew, attrs[i]));
  }
  for (std::size_t i = 0; i < ds.size(); ++i) {
    SCOPED_TRACE(i);
    const Result r = answers[i].Get();
    ASSERT_EQ(r.outcome, Outcome::kInserted);
    ExpectRecorded(r, attrs[i]);
    const PackRow row = PackRowOf(ds[i]);
    EXPECT_EQ(row.lot, StoredLot(attrs[i].lot));
    EXPECT_EQ(row.expiry, attrs[i].expiry);
    EXPECT_EQ(row.first_seen_us, r.first_seen_us);
    if (attrs[i].keep_until_us == 0) {
      EXPECT_FALSE(row.keep_until_us.has_value());
    } else {
      EXPECT_EQ(row.keep_until_us, std::max<std::int64_t>(attrs[i].keep_until_us, r.first_seen_us + 3'600'000'000));
    }
  }
  const auto after = store.Stats();
  EXPECT_GT(after.copy_batches - before.copy_batches, 0u);
  EXPECT_EQ(after.copy_fallbacks - before.copy_fallbacks, 0u);
  EXPECT_EQ(after.batch_failures, 0u);
}

// Raw mode (no attrs, pack_horizons off) is unchanged: rows carry no pack columns, results report none — by
// ON CONFLICT, by COPY and by write-behind.
TEST_F(PgTest, RawRowsHaveNoPackColumns) {
  Store store(Options(1));
  store.Start();
  const Digest a = RandomDigest(), b = RandomDigest(), c = RandomDigest();
  const auto ra = SubmitAndWait(store, a, "raw");
  const auto rb = SubmitAndWait(store, b, "raw", Expect::kNew);
  ASSERT_TRUE(store.SubmitWriteBehind(0, c, "raw"));
  store.Shutdown();
  for (const auto& r : {ra, rb}) {
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kInserted);
    EXPECT_TRUE(r->recorded.empty());
  }
  for (const Digest& d : {a, b, c}) {
    const PackRow row = PackRowOf(d);
    EXPECT_TRUE(row.present);
    EXPECT_FALSE(row.lot || row.expiry || row.keep_until_us);
  }
}

// Two Stores (two writers each) race on 200 pack rows past their keep_until, every scan with attrs: exactly one
// kInserted per pack, every answer carrying the same first_seen and the winner's lot; one row each.
TEST_F(PgTest, CrossStoreRaceOnExpiredPacksExactlyOneInserted) {
  constexpr std::size_t kDigests = 200;
  const auto ds = RandomDigests(kDigests);
  {
    pqxx::connection c(Url());
    pqxx::work tx(c);
    for (const auto& d : ds) {
      tx.exec_params0("INSERT INTO scan_keys (digest, seen_by, first_seen, expiry, keep_until) VALUES (scangate_stored_digest($1::bytea), "
                      "'old', now() - interval '2 years', date '2025-01-31', now() - interval '1 day')",
                      HexBytea(d));
    }
    tx.commit();
  }
  Store a(PackOptions(0s, 2));
  Store b(PackOptions(0s, 2));
  a.Start();
  b.Start();
  Tally tally;
  std::atomic<int> outstanding{0};
  std::vector<std::thread> threads;
  const std::int64_t keep = UsFromNow(std::chrono::hours(24 * 365));
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Store& store = t % 2 == 0 ? a : b;
      std::vector<Digest> order = ds;
      std::shuffle(order.begin(), order.end(), std::mt19937(t));
      for (const auto& d : order) {
        PackAttrs attrs = Pack(21'000 + static_cast<std::int32_t>(t), keep);
        ++outstanding;
        while (!store.Submit(RouteOf(d), d, "", [&tally, &outstanding, d](const Result& r) {
          tally.Add(d, r);
          --outstanding;
        }, nullptr, Expect::kUnknown, attrs)) {
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  WaitOutstanding(outstanding);
  ExpectExactlyOneInserted(tally, kDigests, 4);
  for (const auto& [d, results] : tally.by_digest) {
    const PackRow row = PackRowOf(d);
    EXPECT_EQ(row.keep_until_us, keep);
    for (const auto& r : results) EXPECT_EQ(StoredLot(r.recorded.lot), row.lot);
  }
  pqxx::connection c(Url());
  EXPECT_EQ(CountRows(c, ds), static_cast<std::int64_t>(kDigests));
}

// ---- Idempotency records (issue 34: PackAttrs::request, sql/008) -------------------------------------------

RequestId RandomRequest() {
  const Digest d = RandomDigest();
  RequestId r{};
  std::copy_n(d.begin(), r.size(), r.begin());
  return r;
}

PackAttrs WithRequest(const RequestId& r) {
  PackAttrs a;
  a.request = r;
  return a;
}

// `d`'s request column: nullopt when NULL (or no row).
std::optional<RequestId> RequestOf(const Digest& d) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  const auto r = tx.exec_params("SELECT encode(uuid_send(request), 'hex') FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(d));
  if (r.empty() || r[0][0].is_null()) return std::nullopt;
  const std::string hex = r[0][0].as<std::string>();
  EXPECT_EQ(hex.size(), 32u);
  RequestId out{};
  for (std::size_t i = 0; i < out.size() && 2 * i + 1 < hex.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

// A raw key's idempotency record goes into its row, by ON CONFLICT and by COPY, and comes back: kInserted reports
// what was sent, a later kDuplicate the row's record (not its own), and a raw Submit leaves no record. Each says
// whether its record is the row's (request_known): always, but for a raw Submit's duplicate of a row present
// before it (the raw statements do not read the record: unknown, never "none").
TEST_F(PgTest, RequestRecordRoundTrips) {
  Store store(Options(1));
  store.Start();
  for (const Expect expect : {Expect::kUnknown, Expect::kNew}) {
    SCOPED_TRACE(expect == Expect::kNew ? "COPY" : "ON CONFLICT");
    const auto before = store.Stats();
    const Digest d = RandomDigest();
    const RequestId first = RandomRequest(), second = RandomRequest();
    const auto ins = SubmitPackAndWait(store, d, WithRequest(first), "till-1", expect);
    ASSERT_TRUE(ins.has_value());
    ASSERT_EQ(ins->outcome, Outcome::kInserted);
    EXPECT_EQ(ins->recorded.request, first);
    EXPECT_TRUE(ins->request_known);
    EXPECT_FALSE(ins->recorded.lot || ins->recorded.expiry);
    EXPECT_EQ(RequestOf(d), first);
    EXPECT_FALSE(PackRowOf(d).lot || PackRowOf(d).expiry || PackRowOf(d).keep_until_us) << "a raw key got pack columns";
    if (expect == Expect::kNew) {
      EXPECT_GT(store.Stats().copy_batches, before.copy_batches) << "not written by COPY";
    }

    const auto again = SubmitPackAndWait(store, d, WithRequest(first), "till-1");
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->outcome, Outcome::kDuplicate);
    EXPECT_EQ(again->recorded.request, first) << "a retry must see its own record";
    EXPECT_TRUE(again->request_known);
    const auto other = SubmitPackAndWait(store, d, WithRequest(second), "till-1");
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(other->outcome, Outcome::kDuplicate);
    EXPECT_EQ(other->recorded.request, first) << "a duplicate reports the row's record, not its own";
    EXPECT_EQ(RequestOf(d), first) << "a duplicate changed the record";
    const auto raw = SubmitAndWait(store, d, "till-1");
    ASSERT_TRUE(raw.has_value());
    EXPECT_EQ(raw->outcome, Outcome::kDuplicate);
    EXPECT_FALSE(raw->request_known) << "a raw duplicate claimed to know the row's record";
  }
  const Digest plain = RandomDigest();
  const auto plain_ins = SubmitAndWait(store, plain, "till-1");
  ASSERT_EQ(plain_ins->outcome, Outcome::kInserted);
  EXPECT_TRUE(plain_ins->request_known) << "an inserted row's record (none) is known";
  EXPECT_FALSE(plain_ins->recorded.request.has_value());
  EXPECT_FALSE(RequestOf(plain).has_value());
  const auto later = SubmitPackAndWait(store, plain, WithRequest(RandomRequest()));
  EXPECT_EQ(later->outcome, Outcome::kDuplicate);
  EXPECT_FALSE(later->recorded.request.has_value()) << "a row recorded without the header holds no record";
  EXPECT_TRUE(later->request_known) << "the pack statements read the row's record: known none";
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

// Past the horizon a row is taken over with the new observer's record — none for a raw Submit (the old request's
// retry is not the new observer's), the new one's for a Submit with one.
TEST_F(PgTest, TakenOverRowTakesTheNewObserversRecord) {
  Store store(HorizonOptions(kShortHorizon));
  store.Start();
  const Digest d = RandomDigest();
  const RequestId first = RandomRequest(), third = RandomRequest();
  ASSERT_EQ(SubmitPackAndWait(store, d, WithRequest(first))->outcome, Outcome::kInserted);
  Backdate(d, "1 hour");
  ASSERT_EQ(SubmitAndWait(store, d, "raw")->outcome, Outcome::kInserted);
  EXPECT_FALSE(RequestOf(d).has_value()) << "the raw take-over kept the previous observer's record";
  Backdate(d, "1 hour");
  const auto taken = SubmitPackAndWait(store, d, WithRequest(third));
  ASSERT_EQ(taken->outcome, Outcome::kInserted);
  EXPECT_EQ(RequestOf(d), third);
  EXPECT_EQ(SubmitPackAndWait(store, d, WithRequest(first))->recorded.request, third);
  EXPECT_EQ(store.Stats().batch_failures, 0u);
}

}  // namespace
}  // namespace scangate::storage
