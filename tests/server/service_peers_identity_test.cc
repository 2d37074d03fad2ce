// Black-box tests of issue 55's two identity cases (storage/peers/watermark_publisher.h "THE LEASE",
// storage/peers/presence.h), each checked during a write stall (one transaction holding LOCK TABLE scan_keys IN
// SHARE ROW EXCLUSIVE MODE: inserts wait, reads go on), as the issue measured them on main:
// - a cloned journal: a copy of A's journal folder started beside the live A is refused (exit 2, an
//   `instance_lease` event saying what to do) and answers none of A's stalled keys (on main: 20 of 20 201);
// - a copy that slipped in while A's heartbeat had lapsed (A stopped by SIGSTOP past the lease) takes the row over;
//   A, resumed, is fenced: it answers nothing `new` from its journal, and none of the copy's stalled keys `new`
//   (on main: it shares the id, takes the copy's row for its own, and answers them 201);
// - a copy older than its original's latest start (a restored backup) is refused even once the original is dead;
// - a legitimate restart after kill -9 (its predecessor's heartbeat milliseconds old) still starts: it waits out
//   the lease (logged, bounded) while the peer it left keys with still answers none of them `new`;
// - --ack=filter --journal=off is refused beside any other instance, in both start orders (on main it started and
//   its peer answered its stalled keys 201: 20 of 20).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
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
// The delay between A's answers and the same keys elsewhere: past the window (W = 1.2 s here).
constexpr auto kLater = std::chrono::seconds(3);
// Longer than the lease (storage::kLease, 2 s): a heartbeat this old has lapsed.
constexpr auto kPastTheLease = std::chrono::milliseconds(2600);

std::vector<std::string> Flags(const std::string& journal_dir, std::vector<std::string> more = {}) {
  std::vector<std::string> f = {"--ack=filter", "--capacity=1000000", "--journal-dir=" + journal_dir,
                                "--follow=poll", "--follow-max-lag=200ms"};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}


int Count(std::map<int, int> m, int status) { return m[status]; }

// A copy of a journal folder as a cloned VM or a restored backup would have it (the flock is not copied).
void CopyJournal(const std::string& from, const std::string& to) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

bool HasEvent(const ScangateProcess& p, std::string_view event, std::string_view state) {
  for (const json::object& o : p.LogEvents(event)) {
    if (o.contains("state") && o.at("state").is_string() && o.at("state").as_string() == state) return true;
  }
  return false;
}

bool WaitEvent(const ScangateProcess& p, std::string_view event, std::string_view state) {
  const auto deadline = Clock::now() + kBound;
  while (Clock::now() < deadline) {
    if (HasEvent(p, event, state)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The case: a copy of the live A's folder started beside it during the stall, the keys A answered 3 s
// before sent to the copy.
TEST(ServicePeersIdentity, ACloneOfALiveInstanceIsRefusedAndAnswersNoneOfItsKeys) {
  const std::string dir = TempDir("identity-clone");
  ScangateProcess a(Flags(dir + "/a"));
  ASSERT_TRUE(a.Start());
  HttpClient ca(a.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  CopyJournal(dir + "/a", dir + "/clone");  // before the keys: the clone's journal does not hold them
  const auto keys = UniqueKeys(20, "identity-clone");
  ScangateProcess clone(Flags(dir + "/clone"));
  std::map<int, int> at_a, at_clone;
  std::string start_message;
  {
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    const auto answered = Clock::now();
    const ::testing::AssertionResult started = clone.Start();
    start_message = started.message();
    std::this_thread::sleep_until(answered + kLater);
    at_clone = clone.running() ? ObserveConcurrently(clone.port(), keys) : std::map<int, int>{{-1, 20}};
    lock.Release();
  }
  EXPECT_EQ(Count(at_a, 201), 20) << Describe(at_a);
  EXPECT_EQ(Count(at_clone, 201), 0) << "keys the live A answered new were new again at its clone: "
                                     << Describe(at_clone);
  EXPECT_FALSE(clone.running()) << "the clone serves beside its original";
  EXPECT_NE(start_message.find("exited with status 2"), std::string::npos) << start_message;
  bool says_what_to_do = false;
  for (const json::object& o : clone.LogEvents("instance_lease")) {
    if (o.contains("state") && o.at("state").as_string() == "refused" && o.contains("todo")) says_what_to_do = true;
  }
  EXPECT_TRUE(says_what_to_do) << "no instance_lease refused event with what to do:\n" << clone.LogTail();
  ASSERT_TRUE(WaitJournalDrained(ca));
  EXPECT_EQ(a.Stop(), 0);
}

// A copy that slipped in: A's heartbeat lapsed past the lease (SIGSTOP), the copy took the row over; A, resumed, is
// fenced. During the stall: the copy answers 20 keys new; 3 s later A answers none of them new (its view counts
// the row, now the copy's, as a peer) and no fresh key new from its journal.
TEST(ServicePeersIdentity, AnOwnerWhoseRowWasTakenOverIsFenced) {
  const std::string dir = TempDir("identity-fenced");
  ScangateProcess a(Flags(dir + "/a", {"--request-timeout=2s"}));
  ASSERT_TRUE(a.Start());
  HttpClient ca(a.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  CopyJournal(dir + "/a", dir + "/copy");
  ASSERT_EQ(::kill(a.pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(kPastTheLease);
  ScangateProcess copy(Flags(dir + "/copy"));
  const ::testing::AssertionResult copy_started = copy.Start();
  ASSERT_EQ(::kill(a.pid(), SIGCONT), 0);
  ASSERT_TRUE(copy_started);
  EXPECT_TRUE(HasEvent(copy, "instance_lease", "taken_over")) << copy.LogTail();
  EXPECT_TRUE(WaitEvent(a, "instance_lease", "fenced")) << "A was not fenced:\n" << a.LogTail();
  HttpClient cc(copy.port());
  ASSERT_TRUE(WaitFollowerFresh(cc));
  ASSERT_TRUE(WaitFollowerFresh(ca));
  const auto keys = UniqueKeys(20, "identity-fenced"), fresh = UniqueKeys(20, "identity-fenced-fresh");
  std::map<int, int> at_copy, at_a, fresh_at_a;
  {
    TableLock lock;
    at_copy = ObserveConcurrently(copy.port(), keys);
    std::this_thread::sleep_for(kLater);
    std::thread t([&] { fresh_at_a = ObserveConcurrently(a.port(), fresh); });
    at_a = ObserveConcurrently(a.port(), keys);
    t.join();
    lock.Release();
  }
  EXPECT_EQ(Count(at_copy, 201), 20) << Describe(at_copy);
  EXPECT_EQ(Count(at_a, 201), 0) << "keys the copy answered new were new again at the fenced A: " << Describe(at_a);
  EXPECT_EQ(Count(fresh_at_a, 201), 0) << "the fenced A answered new keys from its journal during the stall: "
                                       << Describe(fresh_at_a);
  ASSERT_TRUE(WaitJournalDrained(cc));
  EXPECT_EQ(copy.Stop(), 0);
  EXPECT_EQ(a.Stop(), 0);
}

// A legitimate restart after kill -9: the same journal, its predecessor's heartbeat milliseconds old. It waits out
// the lease (bounded, logged) and starts; meanwhile the peer B it left stalled keys with answers none of them new.
TEST(ServicePeersIdentity, ARestartAfterKillWaitsOutTheLeaseAndStarts) {
  const std::string dir = TempDir("identity-restart");
  ScangateProcess b(Flags(dir + "/b"));
  ASSERT_TRUE(b.Start());
  HttpClient cb(b.port());
  ASSERT_TRUE(WaitFollowerFresh(cb));
  const auto keys = UniqueKeys(20, "identity-restart");
  std::map<int, int> at_a, at_b;
  ScangateProcess a2(Flags(dir + "/a"));
  ::testing::AssertionResult restarted = ::testing::AssertionFailure();
  double restart_seconds = 0;
  {
    ScangateProcess a(Flags(dir + "/a"));
    ASSERT_TRUE(a.Start());
    HttpClient ca(a.port());
    ASSERT_TRUE(WaitFollowerFresh(ca));
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    const auto answered = Clock::now();
    a.Kill();  // the keys only in its journal; its row's heartbeat a few ms old
    // B's answers on a thread of their own: the restart is started on this one (the harness's children die with
    // the thread that forked them).
    std::thread at_peer([&] {
      std::this_thread::sleep_until(answered + kLater);
      at_b = ObserveConcurrently(b.port(), keys);
      lock.Release();  // the restart's replay commits: it becomes ready
    });
    const auto t0 = Clock::now();
    restarted = a2.Start();
    restart_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    at_peer.join();
  }
  EXPECT_EQ(Count(at_a, 201), 20) << Describe(at_a);
  EXPECT_EQ(Count(at_b, 201), 0) << "a killed instance's keys were new at its peer: " << Describe(at_b);
  ASSERT_TRUE(restarted) << "the restart after kill -9 did not start";
  double waited = -1;
  for (const json::object& o : a2.LogEvents("instance_lease")) {
    if (o.contains("state") && o.at("state").as_string() == "taken_over") waited = o.at("waited_seconds").to_number<double>();
  }
  EXPECT_GE(waited, 0) << "no instance_lease taken_over event:\n" << a2.LogTail();
  EXPECT_LE(waited, 3.0) << "waited longer than the lease";
  std::cout << "restart after kill -9: lease waited " << waited << " s, start to ready " << restart_seconds << " s\n";
  try {
    HttpClient ca2(a2.port());
    ASSERT_TRUE(WaitJournalDrained(ca2));
    for (const auto& k : keys) EXPECT_EQ(ca2.Post("/observe", ObserveBody(k)).status, 200);
    EXPECT_EQ(ca2.Post("/observe", ObserveBody(UniqueKey("identity-restart-new"))).status, 201);
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n" << a2.LogTail();
  }
  EXPECT_EQ(a2.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// A copy older than its original's latest start (a restored backup): the original restarted since (a new
// incarnation), answered 20 keys during the stall and died. Past the lease, the old copy is started: refused
// (exit 2) although the row's holder is dead — the folder never ran under it — so it answers none of those keys
// new; the real folder then restarts and answers them duplicate.
TEST(ServicePeersIdentity, ACopyOlderThanItsOriginalsLastStartIsRefused) {
  const std::string dir = TempDir("identity-stale");
  {
    ScangateProcess a(Flags(dir + "/a"));
    ASSERT_TRUE(a.Start());
    CopyJournal(dir + "/a", dir + "/backup");
    a.Kill();
  }
  const auto keys = UniqueKeys(20, "identity-stale");
  ScangateProcess backup(Flags(dir + "/backup"));
  std::map<int, int> at_a, at_backup;
  std::string backup_message;
  {
    ScangateProcess a(Flags(dir + "/a"));  // the original again: a new incarnation takes its row over
    ASSERT_TRUE(a.Start());
    HttpClient ca(a.port());
    ASSERT_TRUE(WaitFollowerFresh(ca));
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    a.Kill();  // its keys only in its own folder's journal
    std::this_thread::sleep_for(kPastTheLease);
    backup_message = backup.Start().message();
    at_backup = backup.running() ? ObserveConcurrently(backup.port(), keys) : std::map<int, int>{{-1, 20}};
    lock.Release();
  }
  EXPECT_EQ(Count(at_a, 201), 20) << Describe(at_a);
  EXPECT_EQ(Count(at_backup, 201), 0) << "an old copy answered its original's keys new: " << Describe(at_backup);
  EXPECT_NE(backup_message.find("exited with status 2"), std::string::npos) << backup_message;
  EXPECT_TRUE(HasEvent(backup, "instance_lease", "refused")) << backup.LogTail();
  if (backup.running()) backup.Stop();
  ScangateProcess a(Flags(dir + "/a"));
  ASSERT_TRUE(a.Start()) << "the real folder did not restart";
  HttpClient ca(a.port());
  ASSERT_TRUE(WaitJournalDrained(ca));
  std::map<int, int> after;
  for (const auto& k : keys) ++after[ca.Post("/observe", ObserveBody(k)).status];
  EXPECT_EQ(Count(after, 200), 20) << Describe(after);
  EXPECT_EQ(a.Stop(), 0);
}

// --journal=off started second, beside a journal owner: refused at start (exit 2, an instance_presence event).
TEST(ServicePeersIdentity, JournalOffIsRefusedBesideARunningInstance) {
  const std::string dir = TempDir("identity-journal-off-second");
  ScangateProcess b(Flags(dir + "/b"));
  ASSERT_TRUE(b.Start());
  ScangateProcess a({"--ack=filter", "--journal=off", "--capacity=1000000", "--follow=poll", "--follow-max-lag=200ms"});
  const ::testing::AssertionResult started = a.Start();
  EXPECT_FALSE(started) << "--journal=off started beside another instance";
  EXPECT_NE(std::string(started.message()).find("exited with status 2"), std::string::npos) << started.message();
  EXPECT_TRUE(HasEvent(a, "instance_presence", "refused")) << a.LogTail();
  if (a.running()) a.Stop();
  EXPECT_EQ(b.Stop(), 0);
}

// --journal=off started first, alone: it answers 20 keys during the stall (queued in memory, uncommitted); an
// instance started beside it during the stall is refused (exit 2) and answers none of them new — a journal owner
// and an --ack=commit instance alike. Once it stops, they start.
TEST(ServicePeersIdentity, JournalOffRunningRefusesTheNextDuringAStall) {
  const std::string dir = TempDir("identity-journal-off-first");
  ScangateProcess a({"--ack=filter", "--journal=off", "--capacity=1000000", "--follow=poll", "--follow-max-lag=200ms"});
  ASSERT_TRUE(a.Start());
  HttpClient ca(a.port());
  ASSERT_TRUE(WaitFollowerFresh(ca));
  const auto keys = UniqueKeys(20, "identity-journal-off");
  ScangateProcess b(Flags(dir + "/b")), c({"--ack=commit", "--follow-max-lag=200ms"});
  std::map<int, int> at_a, at_b, at_c;
  std::string b_message, c_message;
  {
    TableLock lock;
    at_a = ObserveConcurrently(a.port(), keys);
    const auto answered = Clock::now();
    b_message = b.Start().message();
    c_message = c.Start().message();
    std::this_thread::sleep_until(answered + kLater);
    at_b = b.running() ? ObserveConcurrently(b.port(), keys) : std::map<int, int>{{-1, 20}};
    at_c = c.running() ? ObserveConcurrently(c.port(), keys) : std::map<int, int>{{-1, 20}};
    lock.Release();
  }
  EXPECT_EQ(Count(at_a, 201), 20) << Describe(at_a);
  EXPECT_EQ(Count(at_b, 201), 0) << "keys the --journal=off instance answered new were new at B: " << Describe(at_b);
  EXPECT_EQ(Count(at_c, 201), 0) << "... and at the --ack=commit instance: " << Describe(at_c);
  EXPECT_NE(b_message.find("exited with status 2"), std::string::npos) << b_message;
  EXPECT_NE(c_message.find("exited with status 2"), std::string::npos) << c_message;
  EXPECT_TRUE(HasEvent(b, "instance_presence", "refused")) << b.LogTail();
  if (b.running()) b.Stop();
  if (c.running()) c.Stop();
  EXPECT_EQ(a.Stop(), 0);
  ScangateProcess b2(Flags(dir + "/b"));
  EXPECT_TRUE(b2.Start()) << "refused after the --journal=off instance stopped";
  EXPECT_EQ(b2.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
