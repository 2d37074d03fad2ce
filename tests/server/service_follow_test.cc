// Black-box tests of the follower (issue 32, --follow with --ack=filter), the first five for both methods
// (--follow=logical and --follow=poll): two instances on one database, each with its own journal, learn each
// other's keys —
// - 300 keys new at A are duplicates at B a moment later, and the other way round;
// - after a kill -9 of A (its journal drained into PostgreSQL first) its keys are duplicates at B, and A's
//   follower connection — and with logical its temporary slot (pg_replication_slots) — is gone;
// - a follower whose connection the server terminates (pg_terminate_backend) reconnects by itself, reads again
//   what committed meanwhile, and those keys are duplicates too;
// - transactions that commit in another order than they started (the older one held open across several polls)
//   are both followed;
// - a database without what the method needs (poll: sql/010's column) stops the start with the setting named;
// - --ack=commit with --follow=poll: repeats of keys another instance recorded are answered from the recent set;
// - a follower that cannot keep within --follow-max-lag leaves the filter's "definitely new" untrusted: new keys
//   are decided in PostgreSQL (counted as fallbacks) and are still answered new exactly once;
// - --max-commit-lag: while a key A answered new waits for its commit (its row is locked by another transaction)
//   longer than the bound, A's new keys are decided in PostgreSQL; once it commits, the filter answers again.
#include <stdlib.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr auto kBound = std::chrono::seconds(20);  // failure detection only

std::vector<std::string> FilterFlags(const std::string& journal_dir, std::vector<std::string> more = {}) {
  std::vector<std::string> f = {"--ack=filter", "--capacity=1000000", "--journal-dir=" + journal_dir};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

// This database's replication slots, once their count is `want` (or the bound passed).
std::int64_t WaitSlots(Pg& pg, std::int64_t want) {
  const auto deadline = Clock::now() + kBound;
  std::int64_t slots = -1;
  while (Clock::now() < deadline) {
    pqxx::nontransaction tx(pg.conn());
    slots = tx.exec1("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")[0]
                .as<std::int64_t>();
    if (slots == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return slots;
}

// This database's follower connections (both methods name theirs scangate-follower), once their count is `want`.
std::int64_t WaitFollowerConnections(Pg& pg, std::int64_t want) {
  const auto deadline = Clock::now() + kBound;
  std::int64_t n = -1;
  while (Clock::now() < deadline) {
    pqxx::nontransaction tx(pg.conn());
    n = tx.exec1("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'scangate-follower' "
                 "AND datname = current_database()")[0]
            .as<std::int64_t>();
    if (n == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return n;
}

// Each key at `c`: its status code, counted.
std::map<int, int> ObserveAll(HttpClient& c, const std::vector<std::string>& keys) {
  std::map<int, int> by_status;
  for (const auto& k : keys) ++by_status[c.Post("/observe", ObserveBody(k)).status];
  return by_status;
}

// The method under test: --follow=logical or --follow=poll.
class ServiceFollowBy : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> Flags(const std::string& journal_dir, std::vector<std::string> more = {}) const {
    more.push_back("--follow=" + GetParam());
    return FilterFlags(journal_dir, std::move(more));
  }
};

// Keys committed at one instance are in the other's filter within about a probe interval (the followers are
// fresh, so the definitely-new path is taken and still answers duplicate).
TEST_P(ServiceFollowBy, TwoInstancesLearnEachOthersKeysBothWays) {
  const std::string dir = TempDir("follow-two");
  ScangateProcess a(Flags(dir + "/a")), b(Flags(dir + "/b"));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(ca)) << json::serialize(FollowerOf(ca));
  ASSERT_TRUE(WaitFollowerFresh(cb)) << json::serialize(FollowerOf(cb));
  for (int direction = 0; direction < 2; ++direction) {
    SCOPED_TRACE(direction == 0 ? "A then B" : "B then A");
    HttpClient& first = direction == 0 ? ca : cb;
    HttpClient& second = direction == 0 ? cb : ca;
    const auto keys = UniqueKeys(300, "follow");
    EXPECT_EQ(ObserveAll(first, keys)[201], 300);
    ASSERT_TRUE(WaitJournalDrained(first));
    std::this_thread::sleep_for(std::chrono::seconds(2));  // the check: the same keys 2 s later
    const auto at_second = ObserveAll(second, keys);
    EXPECT_EQ(at_second.count(201), 0u) << "keys new at one instance were new again at the other";
    EXPECT_EQ(at_second.at(200), 300);
  }
  const json::object f = FollowerOf(cb);
  EXPECT_GE(f.at("keys").to_number<std::uint64_t>(), 600u) << json::serialize(f);
  const HttpResponse metrics = cb.Get("/metrics");
  EXPECT_EQ(MetricValue(metrics.body, "scangate_follower_fresh{partition=\"db\"}").value_or(-1), 1.0)
      << metrics.body.substr(0, 2000);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// A kill -9 of A: its committed keys stay duplicates at B, and neither its connection nor (logical) its
// replication slot is left behind.
TEST_P(ServiceFollowBy, KillNineLeavesNoSlotAndItsKeysDuplicates) {
  const std::string dir = TempDir("follow-kill");
  ScangateProcess b(Flags(dir + "/b"));
  ASSERT_TRUE(b.Start());
  HttpClient cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const auto keys = UniqueKeys(300, "follow-kill");
  Pg pg;
  {
    ScangateProcess a(Flags(dir + "/a"));
    ASSERT_TRUE(a.Start());
    HttpClient ca(a.port());
    ASSERT_EQ(WaitFollowerConnections(pg, 2), 2);
    EXPECT_EQ(ObserveAll(ca, keys)[201], 300);
    ASSERT_TRUE(WaitJournalDrained(ca));
    a.Kill();
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto at_b = ObserveAll(cb, keys);
  EXPECT_EQ(at_b.count(201), 0u) << "a dead instance's committed keys were new again";
  // A's connection (and temporary slot) went with its process; B's is the only one left, and none once B stopped.
  const std::int64_t slots = GetParam() == "logical" ? 1 : 0;
  EXPECT_EQ(WaitFollowerConnections(pg, 1), 1) << "a killed instance's follower connection was left behind";
  EXPECT_EQ(WaitSlots(pg, slots), slots) << "a killed instance's slot was left behind";
  // Issue 42: the dead instance's watermark row holds every other instance's new keys until it returns or is
  // retired (service_peers_test): the operator's command, so the tests after this one are not held.
  EXPECT_EQ(RetireInstance(dir + "/a"), 0);
  EXPECT_EQ(b.Stop(), 0);
  EXPECT_EQ(WaitSlots(pg, 0), 0) << "a stopped instance's slot was left behind";
  EXPECT_EQ(WaitFollowerConnections(pg, 0), 0);
}

// The server ends B's follower connection; A (not following) records keys meanwhile. B reconnects by itself,
// reads the window again, and A's keys are duplicates at B.
TEST_P(ServiceFollowBy, TerminatedFollowerReconnectsAndCatchesUpWithoutAGap) {
  const std::string dir = TempDir("follow-term");
  ScangateProcess a(FilterFlags(dir + "/a", {"--follow=off"})), b(Flags(dir + "/b"));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  Pg pg;
  {
    pqxx::nontransaction tx(pg.conn());
    const auto r = tx.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = "
                           "'scangate-follower' AND datname = current_database()");
    ASSERT_EQ(r.size(), 1u) << "B's follower is not the one follower connection of this database";
  }
  const auto keys = UniqueKeys(200, "follow-gap");
  EXPECT_EQ(ObserveAll(ca, keys)[201], 200);
  ASSERT_TRUE(WaitJournalDrained(ca));
  const auto deadline = Clock::now() + kBound;
  while (Clock::now() < deadline && FollowerOf(cb).at("reloads").to_number<std::uint64_t>() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const json::object f = FollowerOf(cb);
  EXPECT_GE(f.at("reconnects").to_number<std::uint64_t>(), 1u) << json::serialize(f);
  EXPECT_GE(f.at("reloads").to_number<std::uint64_t>(), 1u) << json::serialize(f);
  const auto at_b = ObserveAll(cb, keys);
  EXPECT_EQ(at_b.count(201), 0u) << "keys committed while the follower was away were new again";
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// Two transactions commit in the other order than they took their xids: the older one is held open across
// several of B's polls (its xid is in their snapshots' running list) and commits after the younger one was
// followed. Both keys are then duplicates at B — a follower that read "everything past the last xid it saw"
// would have skipped the older one, and B would have answered it new from its filter.
TEST_P(ServiceFollowBy, TransactionsCommittingOutOfOrderAreBothFollowed) {
  const std::string dir = TempDir("follow-order");
  ScangateProcess b(Flags(dir + "/b"));
  ASSERT_TRUE(b.Start());
  HttpClient cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const std::string older = UniqueKey("follow-older"), younger = UniqueKey("follow-younger");
  const char* kInsert = "INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest(decode($1, 'hex')))";
  Pg held_pg, pg;
  pqxx::work held(held_pg.conn());
  held.exec_params(kInsert, Sha256Hex(older));
  {
    pqxx::work tx(pg.conn());
    tx.exec_params(kInsert, Sha256Hex(younger));
    tx.commit();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // several polls (probes) pass
  const HttpResponse y = cb.Post("/observe", ObserveBody(younger));
  EXPECT_EQ(y.status, 200) << y;
  held.commit();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const HttpResponse o = cb.Post("/observe", ObserveBody(older));
  EXPECT_EQ(o.status, 200) << "a transaction that committed after a younger one was not followed: " << o;
  EXPECT_EQ(b.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Methods, ServiceFollowBy, ::testing::Values("logical", "poll"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// A database scangate did not migrate to sql/010 (its commit_xid column dropped here): --follow=poll refuses to
// start and names what is missing, instead of never following.
TEST(ServiceFollow, PollWithoutTheCommitXidColumnRefusesToStart) {
  const std::string dir = TempDir("follow-nocolumn");
  {
    ScangateProcess migrate(FilterFlags(dir + "/m", {"--follow=off"}));  // this database has scan_keys from here on
    ASSERT_TRUE(migrate.Start());
    ASSERT_EQ(migrate.Stop(), 0);
  }
  Pg pg;
  {
    pqxx::nontransaction tx(pg.conn());
    tx.exec("ALTER TABLE scan_keys DROP COLUMN commit_xid");
  }
  ScangateProcess a(FilterFlags(dir + "/a", {"--follow=poll"}));
  const bool started = a.Start();
  {
    pqxx::nontransaction tx(pg.conn());  // put it back as sql/010 made it, for the tests after this one
    tx.exec("ALTER TABLE scan_keys ADD COLUMN commit_xid xid8");
    tx.exec("ALTER TABLE scan_keys ALTER COLUMN commit_xid SET DEFAULT pg_current_xact_id()");
    tx.exec("CREATE INDEX scan_keys_commit_xid ON scan_keys (commit_xid) WHERE commit_xid IS NOT NULL");
  }
  EXPECT_FALSE(started);
  EXPECT_NE(a.Stop(), 0);
  EXPECT_NE(a.Log().find("commit_xid"), std::string::npos) << a.Log();
}

// --ack=commit with --follow=poll (Config::follow_commit): B's follower feeds its recent set with the raw keys A
// commits, so B answers their repeats duplicate — with A's first_seen — from memory (recent-set hits), where
// its twin C without --follow asks PostgreSQL for each one.
TEST(ServiceFollow, CommitModeLearnsOtherInstancesKeysIntoItsRecentSet) {
  ScangateProcess a({"--ack=commit", "--follow=off"}), b({"--ack=commit", "--follow=poll"}), c({"--ack=commit"});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(c.Start());
  HttpClient ca(a.port()), cb(b.port()), cc(c.port());
  const auto keys = UniqueKeys(200, "follow-commit");
  const HttpResponse first = ca.Post("/observe", ObserveBody(keys[0]));
  ASSERT_EQ(first.status, 201) << first;
  EXPECT_EQ(ObserveAll(ca, std::vector<std::string>(keys.begin() + 1, keys.end()))[201], 199);
  const auto deadline = Clock::now() + kBound;
  while (Clock::now() < deadline) {
    const json::object f = FollowerOf(cb);
    if (f.contains("keys") && f.at("keys").to_number<std::uint64_t>() >= 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto hits = [](HttpClient& h) { return MetricValue(h.Get("/metrics").body, "scangate_recent_hits_total").value_or(-1); };
  const double b_before = hits(cb), c_before = hits(cc);
  const HttpResponse again = cb.Post("/observe", ObserveBody(keys[0]));
  ASSERT_EQ(again.status, 200) << again;
  EXPECT_EQ(ObserveAll(cb, std::vector<std::string>(keys.begin() + 1, keys.end()))[200], 199);
  EXPECT_EQ(hits(cb) - b_before, 200.0) << "B asked PostgreSQL for keys its follower had learned";
  const HttpResponse from_pg = cc.Post("/observe", ObserveBody(keys[0]));
  ASSERT_EQ(from_pg.status, 200) << from_pg;
  EXPECT_EQ(again.json().at("first_seen"), from_pg.json().at("first_seen")) << "B's first_seen is not the row's";
  EXPECT_EQ(ObserveAll(cc, std::vector<std::string>(keys.begin() + 1, keys.end()))[200], 199);
  EXPECT_EQ(hits(cc) - c_before, 0.0) << "without --follow a repeat recorded elsewhere cannot be in the recent set";
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  EXPECT_EQ(c.Stop(), 0);
}

// --follow-max-lag below what the probes can reach: the follower is never fresh for long, so the filter's
// "definitely new" is not the verdict — PostgreSQL decides (fallbacks counted) and /readyz names the follower;
// every key is still new exactly once.
TEST(ServiceFollow, StaleFollowerSendsNewKeysToPostgreSQL) {
  const std::string dir = TempDir("follow-stale");
  ScangateProcess a(FilterFlags(dir + "/a", {"--follow-max-lag=10ms"}));
  ASSERT_TRUE(a.Start());
  HttpClient c(a.port());
  const auto keys = UniqueKeys(200, "follow-stale");
  EXPECT_EQ(ObserveAll(c, keys)[201], 200);
  EXPECT_EQ(ObserveAll(c, keys)[200], 200);
  const HttpResponse metrics = c.Get("/metrics");
  EXPECT_GT(MetricValue(metrics.body, "scangate_follower_fallbacks_total").value_or(0), 0.0)
      << metrics.body.substr(0, 2000);
  EXPECT_EQ(a.Stop(), 0);
}

// The Store writer a key's write-behind row and exact insert go to (server: first four digest bytes, little
// endian, modulo --writers): with 2 writers, the low bit of the digest's first byte.
int WriterOf(const std::string& key) { return std::stoi(Sha256Hex(key).substr(0, 2), nullptr, 16) & 1; }

TEST(ServiceFollow, CommitLagPastTheBoundSendsNewKeysToPostgreSQL) {
  const std::string dir = TempDir("follow-commit-lag");
  ScangateProcess a(FilterFlags(dir + "/a", {"--max-commit-lag=100ms", "--writers=2"}));
  ASSERT_TRUE(a.Start());
  HttpClient c(a.port());
  ASSERT_TRUE(WaitFollowerFresh(c));
  Pg pg;
  const std::string held = UniqueKey("follow-lag-held");
  RowBlocker blocker({held});
  const HttpResponse first = c.Post("/observe", ObserveBody(held));
  ASSERT_EQ(first.status, 201) << first;
  EXPECT_EQ(first.json().at("via"), "filter") << first;
  ASSERT_TRUE(pg.WaitForLockWaiter()) << "the key's write-behind row never reached the locked row";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the bound
  std::vector<std::string> others;  // keys of the other writer, which is not stuck behind the lock
  while (others.size() < 20) {
    std::string k = UniqueKey("follow-lag");
    if (WriterOf(k) != WriterOf(held)) others.push_back(std::move(k));
  }
  // Decided in PostgreSQL, not journalled (their answer's "via" says "filter" either way: the filter said new).
  auto journalled = [&c] { return MetricValue(c.Get("/metrics").body, "scangate_journal_records_total").value_or(-1); };
  const double before = journalled();
  for (const auto& k : others) {
    const HttpResponse r = c.Post("/observe", ObserveBody(k));
    EXPECT_EQ(r.status, 201) << r;
  }
  EXPECT_EQ(journalled(), before) << "a key was answered new from the journal while a key waited past the bound";
  EXPECT_GE(MetricValue(c.Get("/metrics").body, "scangate_commit_lag_fallbacks_total").value_or(0), 20.0);
  EXPECT_EQ(pg.CountDigests([&] {
              std::vector<std::string> hexes;
              for (const auto& k : others) hexes.push_back(Sha256Hex(k));
              return hexes;
            }()),
            20)
      << "their rows are committed before their answer";
  blocker.Release();
  ASSERT_TRUE(WaitJournalDrained(c));
  const HttpResponse after = c.Post("/observe", ObserveBody(UniqueKey("follow-lag-after")));
  EXPECT_EQ(after.status, 201) << after;
  EXPECT_EQ(journalled(), before + 1) << "the journal did not answer again once the backlog committed";
  for (const auto& k : others) EXPECT_EQ(c.Post("/observe", ObserveBody(k)).status, 200);
  EXPECT_EQ(c.Post("/observe", ObserveBody(held)).status, 200);
  EXPECT_EQ(a.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
