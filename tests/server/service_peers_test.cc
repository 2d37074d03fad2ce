// Black-box tests of the peer watermark (issue 42): two --ack=filter instances A and B on one database, each with
// its own journal, following each other (--follow=poll). While PostgreSQL's commits stall, A holds keys it
// answered `new` (fsynced in its journal) that PostgreSQL has not committed; B must not answer them `new` again —
// it answers `duplicate` once they commit, waits for that (bounded), or gets 503 with Retry-After:
// - the reproduction: one transaction holds LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE (inserts
//   wait, reads go on, so B's follower stays fresh); 50 fresh keys are answered 201 at A; after more than the
//   window the same 50 at B: none is 201 (on 87ad733: 50 of 50);
// - the same stall released while B's requests wait: they are answered 200 within the bounded wait;
// - a key PostgreSQL already holds is answered `duplicate` by B while coverage is lacking (a read), not 503;
// - across both ack modes: an --ack=commit instance does not insert a key a journal owner holds uncommitted;
// - a journal owner killed with uncommitted keys holds the others' new keys until it returns or is retired.
// Short settings keep it seconds-long: --follow-max-lag=200ms with the default --max-commit-lag (1 s) makes the
// window W = 1.2 s.
#include <stdlib.h>

#include <atomic>
#include <iostream>
#include <chrono>
#include <map>
#include <mutex>
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
// Longer than the window (--max-commit-lag 1 s + --follow-max-lag 200 ms): a key A answered this long ago must
// never be new at B.
constexpr auto kPastTheWindow = std::chrono::milliseconds(2000);

std::vector<std::string> Flags(const std::string& journal_dir, std::vector<std::string> more = {},
                               const std::string& follow = "poll") {
  std::vector<std::string> f = {"--ack=filter", "--capacity=1000000", "--journal-dir=" + journal_dir,
                                "--follow=" + follow, "--follow-max-lag=200ms"};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

bool Fresh(HttpClient& c) {
  const json::object f = FollowerOf(c);
  return f.contains("fresh") && f.at("fresh").as_bool();
}

std::vector<std::string> Hexes(const std::vector<std::string>& keys) {
  std::vector<std::string> hexes;
  for (const auto& k : keys) hexes.push_back(Sha256Hex(k));
  return hexes;
}


// The follower's two methods (--follow): the peers' rows are read in the poll itself, or in the logical follower's
// probe (whose flush position the stream must pass).
class ServicePeersBy : public ::testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> MethodFlags(const std::string& journal_dir, std::vector<std::string> more = {}) const {
    return Flags(journal_dir, std::move(more), GetParam());
  }
};

// The reproduction, in the test command.
TEST_P(ServicePeersBy, NoSecondNewWhileCommitsStallBehindALock) {
  const std::string dir = TempDir("peers-lock");
  ScangateProcess a(MethodFlags(dir + "/a")), b(MethodFlags(dir + "/b"));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const auto keys = UniqueKeys(50, "peers-lock");
  std::map<int, int> at_a, at_b;
  bool b_fresh = false;
  {
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    std::this_thread::sleep_for(kPastTheWindow);
    b_fresh = Fresh(cb);
    at_b = ObserveConcurrently(b.port(), keys);
    lock.Release();
  }
  EXPECT_EQ(at_a[201], 50) << "A did not answer the keys from its journal: " << Describe(at_a);
  EXPECT_TRUE(b_fresh) << "B's follower was not fresh during the lock (reads must go on): not the issue's case";
  EXPECT_EQ(at_b[201], 0) << "keys A answered new were new again at B: " << Describe(at_b);
  std::cout << "B during the lock: " << Describe(at_b) << "\n";
  EXPECT_EQ(at_b[200] + at_b[503], 50) << "B's answers: 200, or 503 with Retry-After: " << Describe(at_b);
  ASSERT_TRUE(WaitJournalDrained(ca));
  Pg pg;
  EXPECT_EQ(pg.CountDigests(Hexes(keys)), 50);
  ASSERT_TRUE(WaitFollowerFresh(cb));
  auto after = ObserveConcurrently(b.port(), keys);
  EXPECT_EQ(after[201], 0) << Describe(after);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// The stall ends while B's requests wait for coverage (--peer-wait longer than A's drain): they are answered 200 —
// a bounded wait, not a 503 and never a second `new`.
TEST(ServicePeers, WaitingKeysAreAnsweredDuplicateOnceThePeerCommits) {
  const std::string dir = TempDir("peers-wait");
  ScangateProcess a(Flags(dir + "/a")), b(Flags(dir + "/b", {"--peer-wait=4s"}));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const auto keys = UniqueKeys(20, "peers-wait");
  std::map<int, int> at_a, at_b;
  {
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    std::this_thread::sleep_for(kPastTheWindow);
    std::thread waiting([&] { at_b = ObserveConcurrently(b.port(), keys); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // B's requests are waiting now
    lock.Release();
    waiting.join();
  }
  EXPECT_EQ(at_a[201], 20) << Describe(at_a);
  EXPECT_EQ(at_b[200], 20) << "B's waiting requests: " << Describe(at_b);
  EXPECT_GE(ScrapeMetric(cb, "scangate_peer_waits_total"), 20.0);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// While a peer lags, a key PostgreSQL already holds is answered duplicate by a read (reads go on under the lock):
// one lagging peer does not make repeats 503. (On 1558fbb their inserts waited behind the lock: 503 at the request
// deadline.)
TEST(ServicePeers, RecordedKeysAreDuplicatesByAReadWhileAPeerLags) {
  const std::string dir = TempDir("peers-read");
  ScangateProcess a(Flags(dir + "/a")), b(Flags(dir + "/b"));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const auto recorded = UniqueKeys(20, "peers-read");
  for (const auto& k : recorded) ASSERT_EQ(ca.Post("/observe", ObserveBody(k)).status, 201);
  ASSERT_TRUE(WaitJournalDrained(ca));
  std::map<int, int> at_b;
  {
    TableLock lock;
    ASSERT_EQ(ca.Post("/observe", ObserveBody(UniqueKey("peers-read-held"))).status, 201);  // A's coverage stops
    std::this_thread::sleep_for(kPastTheWindow);
    for (const auto& k : recorded) ++at_b[cb.Post("/observe", ObserveBody(k)).status];
    lock.Release();
  }
  EXPECT_EQ(at_b[200], 20) << Describe(at_b);
  EXPECT_GE(ScrapeMetric(cb, "scangate_peer_read_duplicates_total"), 20.0);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// Across both ack modes: an --ack=commit instance C shares the database with a journal owner A whose write-behind is
// stuck (its one writer waits on a row lock another transaction holds). A key A answered `new` from its journal,
// sent to C past the window: C's insert would not be blocked (another key) and PostgreSQL cannot know A's
// uncommitted answer — on 1558fbb it was answered 201 again. Now C waits for A's watermark, then 503; once A
// commits, C answers it duplicate.
TEST(ServicePeers, CommitModeInstanceDoesNotInsertAKeyAJournalOwnerHoldsUncommitted) {
  const std::string dir = TempDir("peers-mixed");
  ScangateProcess a(Flags(dir + "/a", {"--writers=1"})), c({"--ack=commit", "--follow-max-lag=200ms"});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(c.Start());
  HttpClient ca(a.port()), cc(c.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  const std::string blocked = UniqueKey("peers-mixed-blocked"), held = UniqueKey("peers-mixed-held");
  RowBlocker blocker({blocked});
  ASSERT_EQ(ca.Post("/observe", ObserveBody(blocked)).status, 201);
  Pg pg;
  ASSERT_TRUE(pg.WaitForLockWaiter()) << "A's writer never reached the locked row";
  ASSERT_EQ(ca.Post("/observe", ObserveBody(held)).status, 201);  // journalled, queued behind the stuck batch
  std::this_thread::sleep_for(kPastTheWindow);
  const HttpResponse during = cc.Post("/observe", ObserveBody(held));
  EXPECT_NE(during.status, 201) << "a key A answered new was new again at the --ack=commit instance: " << during;
  EXPECT_EQ(during.status, 503) << during;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(held)), 0) << "C inserted the key";
  blocker.Release();
  ASSERT_TRUE(WaitJournalDrained(ca));
  const HttpResponse after = cc.Post("/observe", ObserveBody(held));
  EXPECT_EQ(after.status, 200) << after;
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(c.Stop(), 0);
}

// A journal owner killed with answered keys in its journal that PostgreSQL has not committed: the others decide no
// key `new` behind its back — its keys and any other new key wait, then 503 — until it restarts (it replays its
// journal and publishes again) or an operator retires it (scangate --retire-instance: an explicit loss window,
// counted). A clean stop marks its row stopped: nobody waits for it. (On 1558fbb the dead instance's uncommitted
// key was answered 201 again at B.)
TEST_P(ServicePeersBy, DeadPeerHoldsNewKeysUntilItReturnsOrIsRetired) {
  const std::string dir = TempDir("peers-dead");
  ScangateProcess b(MethodFlags(dir + "/b"));
  ASSERT_TRUE(b.Start());
  HttpClient cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const std::string blocked = UniqueKey("peers-dead-blocked"), held = UniqueKey("peers-dead-held");
  {
    ScangateProcess a(MethodFlags(dir + "/a", {"--writers=1"}));
    ASSERT_TRUE(a.Start());
    HttpClient ca(a.port());
    ASSERT_TRUE(WaitFollowerFresh(ca));
    RowBlocker blocker({blocked});
    ASSERT_EQ(ca.Post("/observe", ObserveBody(blocked)).status, 201);
    Pg pg;
    ASSERT_TRUE(pg.WaitForLockWaiter());
    ASSERT_EQ(ca.Post("/observe", ObserveBody(held)).status, 201);
    a.Kill();  // both keys only in its journal
    blocker.Release();
  }
  std::this_thread::sleep_for(kPastTheWindow);
  EXPECT_EQ(ObserveKey(cb, held).status, 503) << "a dead instance's uncommitted key was decided at B";
  EXPECT_EQ(ObserveKey(cb, UniqueKey("peers-dead-other")).status, 503) << "a new key was decided behind its back";
  {
    ScangateProcess a(MethodFlags(dir + "/a"));  // the same journal: the same instance, replaying its keys
    ASSERT_TRUE(a.Start());
    ASSERT_TRUE(WaitFollowerFresh(cb));
    const auto deadline = Clock::now() + kBound;
    int status = 0;
    while (Clock::now() < deadline && (status = ObserveKey(cb, held).status) != 200) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_EQ(status, 200) << "the restarted instance's replayed key";
    EXPECT_EQ(ObserveKey(cb, UniqueKey("peers-dead-after")).status, 201);
    a.Kill();  // nothing uncommitted now, but B cannot know what it answered last
  }
  std::this_thread::sleep_for(kPastTheWindow);
  EXPECT_EQ(ObserveKey(cb, UniqueKey("peers-dead-killed")).status, 503);
  EXPECT_EQ(RetireInstance(dir + "/a"), 0);
  const auto deadline = Clock::now() + kBound;
  int status = 0;
  while (Clock::now() < deadline && (status = ObserveKey(cb, UniqueKey("peers-dead-retired")).status) != 201) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 201) << "B still waited for a retired instance";
  EXPECT_GE(ScrapeMetric(cb, "scangate_peer_retired_total{partition=\"db\"}"), 1.0);
  EXPECT_EQ(RetireInstance(dir + "/a"), 3) << "retiring twice retires nothing";
  {
    ScangateProcess a(MethodFlags(dir + "/a"));  // it comes back after all (rejoins), then stops cleanly
    ASSERT_TRUE(a.Start());
    EXPECT_EQ(a.Stop(), 0);
  }
  std::this_thread::sleep_for(kPastTheWindow);
  EXPECT_EQ(ObserveKey(cb, UniqueKey("peers-dead-stopped")).status, 201) << "B waited for a cleanly stopped instance";
  EXPECT_EQ(b.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Methods, ServicePeersBy, ::testing::Values("poll", "logical"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace scangate::it
