// Tests storage/epochs/switcher.h and closer.h against the fixture's PostgreSQL (a database of this test's own): the
// open epoch switches at its size bound under load from a Store, by two switchers at once as two instances would
// run them, and the switched epochs are closed (compact, summarized) under that load — every key answered new once
// with one row across the epochs, and every epoch holds at least the bound (a bound seen by both switchers closes
// one epoch, not an empty one after it); the age bound switches an idle epoch; a switch or a close that cannot get
// its locks is postponed (counted, logged, nothing changed) and a later pass does it; a close interrupted after its
// rewrite, or during it, is finished by the next pass; the next epoch is prepared ahead of every switch; an empty
// closed epoch is dropped (the horizon's drops: epoch_switch_test); past the bound, closed epochs are merged.
#include "storage/epochs/switcher.h"

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/epochs/catalog.h"
#include "storage/store.h"
#include "tests/answer_within.h"
#include "tests/storage/event_log.h"
#include "tests/storage/epochs/one_open_epoch.h"
#include "tests/storage/epochs/write_paths.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

class EpochSwitcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(PgTestUrl().empty()) << "SCANGATE_TEST_PG_DIR not set (run through ctest)";
    MigrateOnce();
  }
  // Leaves one open epoch, as the cases start.
  void TearDown() override { LeaveOneOpenEpoch(PgTestUrl()); }
};

EpochSwitcherOptions SwitcherOptions(std::shared_ptr<EventLog> log) {
  EpochSwitcherOptions o;
  o.conninfo = PgTestUrl();
  o.interval = 50ms;
  o.log = std::move(log);
  return o;
}

std::string One(pqxx::connection& c, const std::string& sql) {
  pqxx::nontransaction tx(c);
  const auto r = tx.exec1(sql);
  return r[0].is_null() ? "NULL" : r[0].as<std::string>();
}

// Under load from a Store (new keys, and repeats of the last 200), two switchers at a 300-key bound: until 3
// switches, or 60 s.
TEST_F(EpochSwitcherTest, TheSizeBoundSwitchesUnderLoadOnceByTwoSwitchers) {
  constexpr std::int64_t kBound = 300;
  auto log = std::make_shared<EventLog>();
  auto so = SwitcherOptions(log);
  so.max_keys = kBound;
  EpochSwitcher one(so), two(so);
  StoreOptions o;
  o.url = PgTestUrl();
  o.writers = 2;
  o.retention = std::chrono::hours(1);
  o.reconnect_backoff_max = 200ms;
  o.log = log;
  Store store(o);
  store.Start();
  one.Start();
  two.Start();
  const std::vector<Digest> keys = RandomDigests(60'000);
  std::map<std::size_t, int> inserted;
  std::map<Outcome, int> outcomes;
  std::mt19937 rng(std::random_device{}());
  std::size_t next = 0;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (one.Stats().switches + two.Stats().switches < 3 && next + 16 < keys.size() &&
         std::chrono::steady_clock::now() < until) {
    std::vector<std::pair<std::size_t, std::unique_ptr<Answer<Result>>>> wave;
    for (int i = 0; i < 16; ++i) {
      const std::size_t k = i % 2 == 0 || next < 200 ? next++ : next - 1 - rng() % 200;
      const WritePath& path = kWritePaths[rng() % 3];
      auto answer = std::make_unique<Answer<Result>>();
      if (SubmitBy(store, keys[k], path, *answer)) wave.emplace_back(k, std::move(answer));
    }
    for (auto& [k, answer] : wave) {
      const auto r = answer->Within();
      if (!r) continue;
      ++outcomes[r->outcome];
      if (r->outcome == Outcome::kInserted) ++inserted[k];
    }
  }
  one.Shutdown();
  two.Shutdown();
  store.Shutdown();
  // The epochs switched last may still be closing: close them now (as the next passes would).
  for (int i = 0; i < 5; ++i) one.RunOnce();
  const auto switches = one.Stats().switches + two.Stats().switches;
  ASSERT_GE(switches, 3u) << "the bound was never reached (or never seen) under load";
  EXPECT_EQ(log->Count("epoch_switch", "switched"), static_cast<int>(switches)) << "a switch without its log line";
  EXPECT_EQ(log->Count("epoch_switch", "failing"), 0) << [&] {
    std::lock_guard lk(log->mu);
    std::string lines;
    for (const auto& [e, fields] : log->events) {
      if (e == "epoch_switch") lines += boost::json::serialize(fields) + "\n";
    }
    return lines;
  }();
  EXPECT_EQ(outcomes[Outcome::kUnavailable], 0) << "a switch made the store answer 503";
  for (const auto& [k, n] : inserted) EXPECT_EQ(n, 1) << "key " << k << " was answered new " << n << " times";
  pqxx::connection c(PgTestUrl());
  const EpochCatalog catalog = ReadEpochCatalog(c, false);
  ASSERT_EQ(catalog.relations.size(), switches);
  EXPECT_GE(one.Stats().closes + two.Stats().closes, switches) << "an epoch switched was not closed";
  EXPECT_EQ(One(c, "SELECT count(*) FROM scangate_epochs WHERE state = 'closed' AND summary IS NOT NULL AND "
                   "relation LIKE 'scan\\_keys\\_c%' AND keys >= " + std::to_string(kBound)),
            std::to_string(switches));
  EXPECT_EQ(One(c, "SELECT count(*) FROM pg_class WHERE relname LIKE 'scan\\_keys\\_e%' AND relkind = 'r'"), "0")
      << "a closing table was left behind";
  EXPECT_EQ(log->Count("epoch_close", "closed"), static_cast<int>(switches));
  std::string all = "SELECT digest FROM scan_keys";
  for (const auto& rel : catalog.relations) {
    all += " UNION ALL SELECT digest FROM " + rel;
    EXPECT_GE(std::stoll(One(c, "SELECT count(*) FROM " + rel)), kBound)
        << rel << " was closed before its bound: switched twice on one bound?";
  }
  std::map<std::string, int> rows;
  {
    pqxx::nontransaction tx(c);
    for (const auto& row : tx.exec("SELECT " + std::string(kStoredHexByteaSql) + ", count(*) FROM (" + all +
                                   ") AS e GROUP BY digest")) {
      rows[row[0].as<std::string>()] = row[1].as<int>();
    }
  }
  for (std::size_t k = 0; k < next; ++k) {
    const auto it = rows.find(StoredHexBytea(keys[k]));
    EXPECT_EQ(it == rows.end() ? 0 : it->second, inserted.count(k) != 0 ? 1 : 0) << "key " << k;
  }
  EXPECT_EQ(One(c, "SELECT to_regclass('scan_keys_upcoming') IS NOT NULL"), "t") << "the next epoch is not prepared";
  const auto stats = one.Stats();
  EXPECT_GT(stats.passes, 0u);
  EXPECT_EQ(stats.failures, 0u);
  EXPECT_GE(stats.open_keys, 0);
}

// An epoch older than the age bound switches however few keys it holds (none here); a younger one does not.
TEST_F(EpochSwitcherTest, TheAgeBoundSwitchesAnIdleEpoch) {
  auto log = std::make_shared<EventLog>();
  auto so = SwitcherOptions(log);
  so.max_age = 1s;
  EpochSwitcher s(so);
  pqxx::connection c(PgTestUrl());
  {
    pqxx::work tx(c);  // the open epoch opened just now, with a key (an empty epoch is dropped once closed)
    tx.exec("UPDATE scangate_epochs SET opened_at = now() WHERE state = 'open'");
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec("INSERT INTO scan_keys (digest) VALUES (gen_random_uuid())");
    tx.commit();
  }
  EXPECT_FALSE(s.RunOnce()) << "switched an epoch younger than its bound";
  EXPECT_EQ(One(c, "SELECT to_regclass('scan_keys_upcoming') IS NOT NULL"), "t") << "not prepared ahead";
  std::this_thread::sleep_for(1100ms);
  EXPECT_TRUE(s.RunOnce());
  EXPECT_EQ(One(c, "SELECT string_agg(state, ' ') FROM scangate_epochs WHERE state <> 'open'"), "closed")
      << "switched and closed in the same pass";
  EXPECT_EQ(log->Count("epoch_switch", "switched"), 1);
  EXPECT_EQ(One(c, "SELECT to_regclass('scan_keys_upcoming') IS NOT NULL"), "t") << "the next one not prepared";
  // The open epoch (empty) is an hour old by now: switched, closed, and, holding no row, dropped.
  {
    pqxx::work tx(c);
    tx.exec("UPDATE scangate_epochs SET opened_at = now() - interval '1 hour' WHERE state = 'open'");
    tx.commit();
  }
  EXPECT_TRUE(s.RunOnce());
  EXPECT_EQ(log->Count("epoch_drop"), 1);
  EXPECT_EQ(s.Stats().drops, 1u);
  EXPECT_EQ(One(c, "SELECT count(*) FROM scangate_epochs WHERE state <> 'open'"), "1");
}

// A reader holding scan_keys: every attempt gives up at its lock_timeout, the switch is postponed (logged, counted,
// the catalog unchanged); once the reader is gone, the next pass switches.
TEST_F(EpochSwitcherTest, ASwitchThatCannotGetItsLocksIsPostponed) {
  auto log = std::make_shared<EventLog>();
  auto so = SwitcherOptions(log);
  so.max_age = 1s;
  so.lock_timeout = 50ms;
  so.attempts = 2;
  EpochSwitcher s(so);
  pqxx::connection c(PgTestUrl()), reader(PgTestUrl());
  {
    pqxx::work tx(c);
    tx.exec("UPDATE scangate_epochs SET opened_at = now() - interval '1 hour' WHERE state = 'open'");
    tx.commit();
  }
  const auto generation = ReadEpochCatalog(c).generation;
  {
    pqxx::work holding(reader);
    holding.exec("SELECT count(*) FROM scan_keys");
    EXPECT_FALSE(s.RunOnce());
    EXPECT_EQ(s.Stats().lock_timeouts, 2u);
    EXPECT_EQ(log->Count("epoch_switch", "postponed"), 1);
    EXPECT_EQ(ReadEpochCatalog(c).generation, generation);
    holding.commit();
  }
  EXPECT_TRUE(s.RunOnce());
  EXPECT_EQ(s.Stats().switches, 1u);
  EXPECT_EQ(s.Stats().failures, 0u);
}

// A close that cannot get its locks (a reader holds the closing table) is postponed, its rewrite kept; one whose
// closer died after its rewrite, or during it (its transaction rolled back), is finished by the next pass — the
// rewrite reused when it committed.
TEST_F(EpochSwitcherTest, AnInterruptedOrPostponedCloseIsFinishedLater) {
  auto log = std::make_shared<EventLog>();
  auto so = SwitcherOptions(log);
  so.lock_timeout = 50ms;
  so.attempts = 2;
  EpochSwitcher s(so);
  pqxx::connection c(PgTestUrl()), reader(PgTestUrl());
  auto switch_now = [&] {  // an epoch of 100 keys (an empty one would be dropped as soon as it is closed)
    {
      pqxx::work tx(c);
      tx.exec("SELECT scangate_write_order(NULL)");
      tx.exec("INSERT INTO scan_keys (digest) SELECT gen_random_uuid() FROM generate_series(1, 100)");
      tx.commit();
    }
    {
      pqxx::nontransaction tx(c);
      tx.exec("SELECT scangate_epoch_prepare()");
    }
    pqxx::work tx(c);
    const auto id = tx.exec1("SELECT scangate_epoch_switch()")[0].as<std::int64_t>();
    tx.commit();
    return std::to_string(id);
  };
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec("DELETE FROM scan_keys");  // the earlier cases' rows
    tx.commit();
  }
  // Died during the rewrite: rolled back, nothing left; the pass closes it.
  const std::string first = switch_now();
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_epoch_compact(" + first + ")");
    tx.abort();
  }
  EXPECT_FALSE(s.RunOnce());
  EXPECT_EQ(One(c, "SELECT state || ' ' || keys FROM scangate_epochs WHERE id = " + first), "closed 100");
  // Died after the rewrite: the pass reuses it. A reader of the closing table: postponed first.
  const std::string second = switch_now();
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_epoch_compact(" + second + ")");
    tx.commit();
  }
  const std::string compact_oid = One(c, "SELECT scangate_epoch_compact_relation(" + second + ")::regclass::oid");
  const std::string closing = One(c, "SELECT scangate_epoch_relation(" + second + ")");
  {
    pqxx::work holding(reader);
    holding.exec("SELECT count(*) FROM " + closing);
    s.RunOnce();
    EXPECT_EQ(log->Count("epoch_close", "postponed"), 1);
    EXPECT_EQ(s.Stats().closes_postponed, 1u);
    EXPECT_EQ(One(c, "SELECT state FROM scangate_epochs WHERE id = " + second), "closing");
    holding.commit();
  }
  s.RunOnce();
  EXPECT_EQ(One(c, "SELECT state FROM scangate_epochs WHERE id = " + second), "closed");
  EXPECT_EQ(One(c, "SELECT relation::regclass::oid FROM scangate_epochs WHERE id = " + second), compact_oid)
      << "the committed rewrite was not reused";
  EXPECT_EQ(s.Stats().closes, 2u);
  EXPECT_EQ(s.Stats().failures, 0u);
}

// Past max_closed_epochs, the passes merge two adjacent closed epochs at a time until no more remain than that; the
// merged epochs hold every row (all inside the horizon here), and a Store finds a key of each as a duplicate.
TEST_F(EpochSwitcherTest, PastTheBoundClosedEpochsAreMerged) {
  auto log = std::make_shared<EventLog>();
  auto so = SwitcherOptions(log);
  so.max_closed_epochs = 2;
  so.retention = std::chrono::hours(1);
  EpochSwitcher s(so);
  pqxx::connection c(PgTestUrl());
  {
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    tx.exec("DELETE FROM scan_keys");
    tx.commit();
  }
  std::vector<Digest> firsts;  // a key of each epoch
  for (int e = 0; e < 5; ++e) {
    const std::vector<Digest> keys = RandomDigests(40);
    firsts.push_back(keys[0]);
    pqxx::work tx(c);
    tx.exec("SELECT scangate_write_order(NULL)");
    for (const Digest& d : keys) {
      tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest($1::bytea))", HexBytea(d));
    }
    tx.exec("SELECT scangate_epoch_prepare()");
    tx.exec("SELECT scangate_epoch_switch()");
    tx.commit();
  }
  for (int pass = 0; pass < 12; ++pass) s.RunOnce();  // closes one per pass, merges one pair per pass
  EXPECT_EQ(One(c, "SELECT count(*) || ' ' || sum(keys) FROM scangate_epochs WHERE state <> 'open'"), "2 200");
  EXPECT_EQ(s.Stats().merges, 3u);
  EXPECT_EQ(log->Count("epoch_merge", "merged"), 3);
  EXPECT_EQ(One(c, "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE 'scan\\_keys\\_%' AND "
                   "relname NOT IN (SELECT relation FROM scangate_epochs) AND relname <> 'scan_keys_upcoming'"),
            "0")
      << "a merged epoch's table was left";
  StoreOptions o;
  o.url = PgTestUrl();
  o.retention = std::chrono::hours(1);
  o.log = log;
  Store store(o);
  store.Start();
  for (const Digest& d : firsts) {
    Answer<Result> answer;
    ASSERT_TRUE(SubmitBy(store, d, kWritePaths[1], answer));  // a Bloom negative: the summaries decide
    const auto r = answer.Within();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, Outcome::kDuplicate);
  }
  store.Shutdown();
}

}  // namespace
}  // namespace scangate::storage
