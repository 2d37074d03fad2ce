// Tests the write paths against closed epochs (storage/pg/batch_statement.h PlanClosedProbes, the batch runner; issue
// 54) in the fixture's PostgreSQL: closed epochs are made by hand — a table like scan_keys with rows and a catalog
// row, with or without a summary. A key live in a closed epoch is a duplicate of that row on every write path (the
// batch INSERT, the COPY of Bloom negatives, the pack INSERT) and is never inserted into the open epoch; a row there
// past the horizon does not count (the key is new, inserted into the open epoch); a pinned one does; a summary that
// says absent spares the look-up, one that says maybe does not (a Bloom negative's batch still goes by COPY, looked
// up before it); write-behind batches mixing keys
// of two closed epochs and new keys insert exactly the new ones; under switches forced every ~200 ms while two
// stores write overlapping keys by every path (the product's switch, sql/019), each key is answered new exactly once
// and has exactly one row, and both followers see every key answered new.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "storage/epochs/catalog.h"
#include "storage/epochs/summary_build.h"
#include "storage/follow/follower.h"
#include "storage/pg/pg_connection.h"
#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/event_log.h"
#include "tests/storage/epochs/hand_closed_epoch.h"
#include "tests/storage/epochs/write_paths.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

constexpr auto kRetention = std::chrono::hours(1);

StoreOptions Options() {
  StoreOptions o;
  o.url = PgTestUrl();
  o.writers = 1;
  o.reconnect_backoff_max = 200ms;
  o.retention = kRetention;
  o.log = std::make_shared<EventLog>();
  return o;
}

std::optional<Result> SubmitAndWait(Store& store, const Digest& d, const WritePath& path) {
  Answer<Result> answer;
  if (!SubmitBy(store, d, path, answer)) return std::nullopt;
  return answer.Within();
}

class ClosedWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgTestUrl().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
  }
};

// Live in a closed epoch (young, or older than the horizon but pinned): a duplicate of that row, nothing inserted.
// Past the horizon there: new, inserted into the open epoch. A key in no epoch: new. On every write path.
TEST_F(ClosedWriteTest, EveryWritePathChecksTheClosedEpochs) {
  for (const WritePath& path : kWritePaths) {
    SCOPED_TRACE(path.name);
    HandClosedEpoch older(Unique("scan_keys_e_older")), newer(Unique("scan_keys_e_newer"));
    const Digest young = RandomDigest(), pinned = RandomDigest(), expired = RandomDigest(), twice = RandomDigest(),
                 fresh = RandomDigest();
    newer.Add(young, 60s);
    newer.Add(pinned, 2 * std::chrono::duration_cast<std::chrono::seconds>(kRetention), std::chrono::hours(24));
    older.Add(expired, 2 * std::chrono::duration_cast<std::chrono::seconds>(kRetention));
    older.Add(twice, 600s);  // in both: the newest row answers
    newer.Add(twice, 30s);
    older.Close(false);
    newer.Close(false);
    Store store(Options());
    store.Start();
    ASSERT_TRUE(store.up());
    pqxx::connection watch(PgTestUrl());
    for (const Digest* d : {&young, &pinned, &twice}) {
      const auto r = SubmitAndWait(store, *d, path);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->outcome, Outcome::kDuplicate);
      EXPECT_EQ(r->first_seen_us, newer.FirstSeenUs(*d));
      EXPECT_EQ(CountRows(watch, {*d}), 0) << "a key live in a closed epoch was inserted into the open one";
    }
    for (const Digest* d : {&expired, &fresh}) {
      const auto r = SubmitAndWait(store, *d, path);
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->outcome, Outcome::kInserted);
      EXPECT_EQ(CountRows(watch, {*d}), 1);
      const auto again = SubmitAndWait(store, *d, path);  // now in the open epoch
      ASSERT_TRUE(again.has_value());
      EXPECT_EQ(again->outcome, Outcome::kDuplicate);
    }
    store.Shutdown();
  }
}

// A summary that says absent spares the look-up: a Bloom negative goes by COPY. One that says maybe, or none (an
// epoch without a summary), sends the batch through the INSERT, which looks the digest up.
// The partition function (the operators' path, sql/018) checks the closed epochs as the writers do: a key live in
// one is answered from that row (not inserted), one past the horizon there and one in no epoch are inserted; a repeat
// within the call is answered once.
TEST_F(ClosedWriteTest, ThePartitionFunctionChecksTheClosedEpochs) {
  HandClosedEpoch closed(Unique("scan_keys_e_observe"));
  const Digest live = RandomDigest(), expired = RandomDigest(), fresh = RandomDigest();
  closed.Add(live, 60s);
  closed.Add(expired, 2 * std::chrono::duration_cast<std::chrono::seconds>(kRetention));
  closed.Close(true);
  pqxx::connection c(PgTestUrl());
  pqxx::work tx(c);
  const std::int64_t r_us = std::chrono::duration_cast<std::chrono::microseconds>(kRetention).count();
  const auto r = tx.exec_params(
      "SELECT encode(digest, 'hex'), inserted, first_seen_us FROM scangate_observe("
      "ARRAY[$1::bytea, $2::bytea, $3::bytea, $1::bytea], ARRAY['op', 'op', 'op', 'op'], ARRAY[0, 0, 0, 0]::int8[], $4)",
      HexBytea(live), HexBytea(expired), HexBytea(fresh), r_us);
  tx.commit();
  std::map<std::string, std::pair<bool, std::int64_t>> by;
  for (const auto& row : r) by[row[0].as<std::string>()] = {row[1].as<bool>(), row[2].as<std::int64_t>()};
  ASSERT_EQ(r.size(), 3u) << "one row per distinct digest";
  const auto hex = [](const Digest& d) { return HexBytea(d).substr(2); };
  EXPECT_FALSE(by[hex(live)].first);
  EXPECT_EQ(by[hex(live)].second, closed.FirstSeenUs(live));
  EXPECT_TRUE(by[hex(expired)].first);
  EXPECT_TRUE(by[hex(fresh)].first);
  pqxx::connection watch(PgTestUrl());
  EXPECT_EQ(CountRows(watch, {live}), 0);
  EXPECT_EQ(CountRows(watch, {expired, fresh}), 2);
}

// How many COPY batches a Bloom negative of a new key took on a fresh store (1: no look-up; 0: looked up, so the
// INSERT), and that it was answered new; then, when given, that `held` (a key of a closed epoch) is a duplicate
// without a COPY.
// A Bloom negative (the COPY path) of a new key: whether it was looked up in the closed epochs (false when its batch
// was not), and that it went by COPY and was answered new either way; then, when given, that `held` (a key of a
// closed epoch) is a duplicate, looked up, without a row of its own.
bool ANewKeyWasLookedUp(const std::optional<Digest>& held = std::nullopt) {
  const WritePath copy = kWritePaths[1];
  Store store(Options());
  store.Start();
  EXPECT_TRUE(store.up());
  const auto before = store.Stats();
  const auto r = SubmitAndWait(store, RandomDigest(), copy);
  EXPECT_TRUE(r.has_value() && r->outcome == Outcome::kInserted);
  const auto after = store.Stats();
  EXPECT_EQ(after.copy_batches - before.copy_batches, 1u) << "a new key's look-up took it off the COPY path";
  const bool looked_up = after.closed_lookup_batches != before.closed_lookup_batches;
  if (held) {
    const auto h = SubmitAndWait(store, *held, copy);
    EXPECT_TRUE(h.has_value() && h->outcome == Outcome::kDuplicate);
    EXPECT_EQ(store.Stats().closed_lookup_batches - after.closed_lookup_batches, 1u) << "a held key not looked up";
    pqxx::connection watch(PgTestUrl());
    EXPECT_EQ(CountRows(watch, {*held}), 0) << "a key live in a closed epoch was written into the open one";
  }
  store.Shutdown();
  return looked_up;
}

// A summary that says absent spares the look-up; one that says maybe, or none (an epoch without a summary), has
// the digest looked up — before the COPY, which then writes what was not found.
TEST_F(ClosedWriteTest, ASummarySparesTheLookUpOfAbsentKeys) {
  HandClosedEpoch summarised(Unique("scan_keys_e_summarised"));
  std::vector<Digest> held = RandomDigests(200);
  for (const Digest& d : held) summarised.Add(d, 60s);
  summarised.Close(true);
  EXPECT_FALSE(ANewKeyWasLookedUp(held[7])) << "a digest the summary calls absent was looked up";
  HandClosedEpoch bare(Unique("scan_keys_e_bare"));
  for (int i = 0; i < 3; ++i) bare.Add(held[100 + i], 60s);
  bare.Close(false);
  EXPECT_TRUE(ANewKeyWasLookedUp(held[101])) << "an epoch without a summary was not looked up";
}

// Write-behind batches (ack=filter's rows) mixing keys live in two closed epochs with new keys and repeats: the new
// ones are inserted once, the others not at all.
TEST_F(ClosedWriteTest, MixedBatchesInsertExactlyTheNewKeys) {
  HandClosedEpoch a(Unique("scan_keys_e_mixed_a")), b(Unique("scan_keys_e_mixed_b"));
  const std::vector<Digest> in_a = RandomDigests(150), in_b = RandomDigests(150), fresh = RandomDigests(300);
  for (const Digest& d : in_a) a.Add(d, 120s);
  for (const Digest& d : in_b) b.Add(d, 60s);
  a.Close(true);
  b.Close(false);
  {
    Store store(Options());
    store.Start();
    ASSERT_TRUE(store.up());
    for (std::size_t i = 0; i < 300; ++i) {
      ASSERT_TRUE(store.SubmitWriteBehind(fresh[i][0], fresh[i], "wb"));
      const Digest& old = i % 2 == 0 ? in_a[i / 2] : in_b[i / 2];
      ASSERT_TRUE(store.SubmitWriteBehind(old[0], old, "wb"));
      if (i % 3 == 0) {
        ASSERT_TRUE(store.SubmitWriteBehind(fresh[i][0], fresh[i], "wb"));
      }
    }
    store.Shutdown();  // writes every write-behind row
  }
  pqxx::connection watch(PgTestUrl());
  EXPECT_EQ(CountRows(watch, fresh), 300);
  EXPECT_EQ(CountRows(watch, in_a), 0);
  EXPECT_EQ(CountRows(watch, in_b), 0);
}

// The product's switch (sql/019): the next epoch prepared outside the order, then closed and opened under its
// exclusive side in one transaction, retried when a lock does not come within lock_timeout. Returns the closed
// epoch's table.
std::string Switch(pqxx::connection& c) {
  {
    pqxx::nontransaction tx(c);
    tx.exec("SELECT scangate_epoch_prepare()");
  }
  for (;;) {
    try {
      pqxx::work tx(c);
      tx.exec("SET LOCAL lock_timeout = '200ms'");
      const auto closed = tx.exec1("SELECT scangate_epoch_relation(scangate_epoch_switch())")[0].as<std::string>();
      tx.commit();
      return closed;
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() != "55P03") throw;  // lock_not_available: writers and readers pass, then again
      std::this_thread::sleep_for(20ms);
    }
  }
}

// What a follower applied.
struct Followed {
  std::mutex mu;
  std::set<Digest> digests;
  Follower::Apply Apply() {
    return [this](std::span<const Digest> ds) {
      const std::lock_guard lk(mu);
      digests.insert(ds.begin(), ds.end());
    };
  }
  bool Has(const Digest& d) {
    const std::lock_guard lk(mu);
    return digests.contains(StoredDigest(d));
  }
};

// Forced switches every ~200 ms while two stores (two writers each) write 300 overlapping keys by every path: every
// key answered kInserted exactly once across both stores, and every key has exactly one row across all epochs (the
// open one and every closed one); a poll follower and a logical one, following from the start, have seen every key
// answered new (the rows of an epoch written before its switch included: sql/019 scangate_follow_switched). A
// writer that meets a switch reads the catalog again (epoch_catalog_changed) and looks the new closed epoch up, again
// at each of up to 4 changes in a row; past them it answers kUnavailable (rare: fewer than 1 in 10 verdicts; never a
// second new).
TEST_F(ClosedWriteTest, ForcedSwitchesNeverGiveASecondNew) {
  constexpr int kVerdicts = 1000;        // duplicates answered (each a check of the closed epochs)...
  constexpr std::size_t kSwitches = 10;  // ...across at least this many switches
  // 300 overlapping keys at a time, from a window that moves on by one key every millisecond: new keys are first
  // written all along, across every switch (the followers' case), each repeated for 300 ms around it.
  constexpr std::size_t kOverlap = 300;
  const std::vector<Digest> keys = RandomDigests(kOverlap + 60'000);
  const auto began = std::chrono::steady_clock::now();
  std::mutex mu;
  std::map<std::size_t, int> inserted;  // key index -> kInserted answers
  std::map<Outcome, int> outcomes;
  std::vector<std::string> closed_tables;
  Followed polled, decoded;
  {
    auto log = std::make_shared<EventLog>();
    auto o = Options();
    o.writers = 2;
    o.log = log;
    Store a(o), b(o);
    a.Start();
    b.Start();
    auto reload = [&](const Follower::Apply&) -> std::uint64_t { return 0; };  // they follow from before any key
    FollowerOptions fo;
    fo.conninfo = PgTestUrl();
    fo.probe_interval = 20ms;
    fo.method = FollowMethod::kPoll;
    Follower poll(fo, polled.Apply(), reload);
    fo.method = FollowMethod::kLogical;
    Follower logical(fo, decoded.Apply(), reload);
    ASSERT_TRUE(poll.Start()) << poll.Stats().error;
    ASSERT_TRUE(logical.Start()) << logical.Stats().error;
    std::atomic<bool> stop{false}, enough{false};
    std::thread switcher([&] {
      pqxx::connection c(PgTestUrl());
      while (!stop.load()) {
        std::this_thread::sleep_for(200ms);
        const std::string t = Switch(c);
        const std::lock_guard lk(mu);
        closed_tables.push_back(t);
      }
    });
    std::vector<std::thread> submitters;
    for (int t = 0; t < 4; ++t) {
      submitters.emplace_back([&, t] {
        Store& store = t % 2 == 0 ? a : b;
        std::mt19937 rng(static_cast<unsigned>(t) * 7919u + std::random_device{}());
        // Until enough verdicts met enough switches (a slow build — ASan, a loaded machine — takes longer), or 60 s.
        const auto until = std::chrono::steady_clock::now() + 60s;
        while (std::chrono::steady_clock::now() < until && !enough.load()) {
          std::vector<std::pair<std::size_t, std::unique_ptr<Answer<Result>>>> wave;
          for (int i = 0; i < 16; ++i) {  // a wave in flight at once: the writers batch it
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                  began).count();
            const std::size_t k =
                std::min<std::size_t>(static_cast<std::size_t>(ms), keys.size() - kOverlap) + rng() % kOverlap;
            const WritePath& path = kWritePaths[rng() % 3];
            PackAttrs attrs;
            if (path.pack) attrs.expiry = 20'000;
            auto answer = std::make_unique<Answer<Result>>();
            if (store.Submit(keys[k][0], keys[k], "sw", answer->Setter(), nullptr, path.expect, attrs)) {
              wave.emplace_back(k, std::move(answer));
            }
          }
          for (auto& [k, answer] : wave) {
            const auto r = answer->Within();
            if (!r) continue;  // Within() reported it
            const std::lock_guard lk(mu);
            ++outcomes[r->outcome];
            if (r->outcome == Outcome::kInserted) ++inserted[k];
            if (outcomes[Outcome::kDuplicate] >= kVerdicts && closed_tables.size() >= kSwitches) enough = true;
          }
          if (wave.empty()) std::this_thread::sleep_for(20ms);  // a writer down for a moment: Submit refused
        }
      });
    }
    for (auto& th : submitters) th.join();
    stop = true;
    switcher.join();
    a.Shutdown();
    b.Shutdown();
    EXPECT_GT(log->Count("epoch_catalog_changed"), 0) << "no writer met a switch: the test did not test it";
    // Every key answered new reached both followers (a key's row is committed before its answer).
    for (Follower* f : {&poll, &logical}) {
      const auto until = std::chrono::steady_clock::now() + 30s;
      Followed& seen = f == &poll ? polled : decoded;
      auto missing = [&] {
        std::size_t n = 0;
        for (const auto& [k, count] : inserted) n += seen.Has(keys[k]) ? 0 : 1;
        return n;
      };
      while (missing() != 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
      EXPECT_EQ(missing(), 0u) << (f == &poll ? "poll" : "logical") << " follower: of " << inserted.size()
                               << " keys answered new, these were never followed; " << f->Stats().error;
      f->Stop();
    }
  }
  EXPECT_GE(closed_tables.size(), kSwitches);
  EXPECT_GE(outcomes[Outcome::kDuplicate], kVerdicts) << "too few verdicts within 60 s to mean anything";
  EXPECT_LT(outcomes[Outcome::kUnavailable], outcomes[Outcome::kDuplicate] / 10) << "a writer met a switch and gave up";
  std::cout << "switches " << closed_tables.size() << ", inserted " << outcomes[Outcome::kInserted] << ", duplicate "
            << outcomes[Outcome::kDuplicate] << ", unavailable " << outcomes[Outcome::kUnavailable] << "\n";
  for (const auto& [k, n] : inserted) EXPECT_EQ(n, 1) << "key " << k << " was answered new " << n << " times";
  // Exactly one row per key answered new, across every epoch; none for a key never answered new.
  pqxx::connection c(PgTestUrl());
  pqxx::work tx(c);
  std::string all = "SELECT digest FROM scan_keys";
  for (const auto& t : closed_tables) all += " UNION ALL SELECT digest FROM " + t;
  std::map<std::string, int> rows;  // stored digest (hex bytea) -> rows across the epochs
  for (const auto& row : tx.exec("SELECT " + std::string(kStoredHexByteaSql) + ", count(*) FROM (" + all +
                                 ") AS e GROUP BY digest")) {
    rows[row[0].as<std::string>()] = row[1].as<int>();
  }
  for (std::size_t k = 0; k < keys.size(); ++k) {  // the other cases' rows are in scan_keys too: not counted
    const auto it = rows.find(StoredHexBytea(keys[k]));
    EXPECT_EQ(it == rows.end() ? 0 : it->second, inserted.count(k) != 0 ? 1 : 0) << "key " << k;
  }
  // Leave the database as other cases expect it: one open epoch.
  for (const auto& t : closed_tables) {
    tx.exec("DELETE FROM scangate_epochs WHERE relation = " + tx.quote(t));
    tx.exec("DROP TABLE " + t);
  }
  tx.exec("DROP TABLE IF EXISTS scan_keys_upcoming");
  tx.commit();
}

}  // namespace
}  // namespace scangate::storage
