// Black-box tests of the de-duplication horizon (--retention) across a FORWARD step of PostgreSQL's clock: an NTP
// step, a VM resumed, a failover onto a host whose clock is ahead. The horizon is PostgreSQL's clock's: the batch
// INSERT takes over a row older than R (ON CONFLICT DO UPDATE ... WHERE first_seen < now() - R), the expiry deletes
// such rows, /lookup, the warm start and the journal's recovery skip them. After a step of S seconds forward every
// row written before it looks S older than it is, so a key seen again within the horizon but within S of its end
// would be `new` a second time: "exactly one `new` per key within the horizon" broken. The step is made by
// tests/clock_shift's LD_PRELOAD in PostgreSQL's postmaster (tests/server/clock_shift_cluster.h): a shift file
// while it runs, or a restart with its clock shifted. Each check is made DURING the step (PostgreSQL's clock stays
// ahead for the rest of the case), a few seconds after it so that the instances' clock readers (one reading a
// second) saw the new clock; every key's real age is then well inside the horizon (checked). And the horizon
// still ends: a key past R + 3 s of real age is `new` again, once. Fixture "pg_clock", one test at a time.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "clock_shift_cluster.h"
#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr int kKeys = 20;  // per instance
// A case's horizon and PostgreSQL's step: the step is longer than the horizon, so every row looks past it in the
// stepped clock. The horizon is the smallest that keeps every key's real age well inside it at the checks on a
// loaded machine (with kCheckRoom to spare), so that the case stays short.
struct Case {
  std::chrono::seconds retention;
  std::int64_t step_s;
};
// The live step: the checks come ~7 s after the first sighting (10 s under ASan in CI).
constexpr Case kLive{std::chrono::seconds(20), 30};
// A restart of PostgreSQL (and a start of an instance) before the check: ~12 s on a quiet machine, 17 s in a CI
// run under ASan with other tests beside it (too slow for a 20 s horizon).
constexpr Case kRestart{std::chrono::seconds(30), 40};
// The journal case waits for a restart of PostgreSQL and of A before its check.
constexpr Case kJournal{std::chrono::seconds(30), 60};
constexpr auto kBeforeStep = std::chrono::seconds(3);  // the rows have some age in the old clock
constexpr auto kReadersSee = std::chrono::seconds(3);  // the clock readers read once a second
// A key's real age at which it must be `new` again: R + 3 s (a clock reader's bounds of a step, the expiry's pass).
constexpr auto kPastHorizon = std::chrono::seconds(3);
constexpr auto kNewAgainBound = std::chrono::seconds(15);  // past R: failure detection only
constexpr auto kPastTheWindow = std::chrono::milliseconds(2000);  // as in service_clock_step_test
// The least room a check keeps before the horizon ends (else the machine was too slow for the case to mean anything).
constexpr auto kCheckRoom = std::chrono::seconds(4);

int Count(const std::map<int, int>& by_status, int status) {
  const auto it = by_status.find(status);
  return it == by_status.end() ? 0 : it->second;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string Horizon(std::chrono::seconds r) { return std::to_string(r.count()) + "s"; }

// The --ack=commit instance (every verdict from PostgreSQL).
std::vector<std::string> CommitFlags(std::chrono::seconds retention) {
  return {"--ack=commit", "--capacity=1000000", "--retention=" + Horizon(retention), "--window=" + Horizon(retention)};
}

// An --ack=filter instance on its own journal (clock_shift_cluster.h InstanceFlags: it follows the database).
std::vector<std::string> FilterFlags(const std::string& journal_dir, std::chrono::seconds retention) {
  std::vector<std::string> f = InstanceFlags(journal_dir);
  f.push_back("--retention=" + Horizon(retention));
  f.push_back("--window=" + Horizon(retention));
  return f;
}

HttpResponse Lookup(std::uint16_t port, const std::string& key) {
  HttpClient c(port);
  return c.Post("/lookup", ObserveBody(key));
}

::testing::AssertionResult FollowerFresh(std::uint16_t port) {
  HttpClient c(port);
  if (WaitFollowerFresh(c)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the follower of the instance at port " << port << " is not fresh";
}

::testing::AssertionResult JournalDrained(std::uint16_t port) {
  HttpClient c(port);
  if (WaitJournalDrained(c)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the journal of the instance at port " << port << " did not drain";
}

// The last event `event` of `p`'s log that has member `member`, as JSON text.
std::string LastEvent(const ScangateProcess& p, std::string_view event, std::string_view member) {
  std::string last = "(no " + std::string(event) + " event)";
  for (const auto& e : p.LogEvents(event)) {
    if (e.contains(member)) last = json::serialize(e);
  }
  return last;
}

std::vector<std::string> Concat(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<std::string> Half(const std::vector<std::string>& keys, bool second) {
  const auto mid = keys.begin() + static_cast<std::ptrdiff_t>(keys.size() / 2);
  return second ? std::vector<std::string>(mid, keys.end()) : std::vector<std::string>(keys.begin(), mid);
}

class ServiceClockForward : public ClockShiftCluster {
 protected:
  // Past R + 3 s of the keys' real age (`recorded`: every one was seen by then), each key is `new` once at C: polled
  // until it is (up to R + 15 s, failure detection only), then both instances answer every key duplicate.
  static void ExpectNewOncePastTheHorizon(const ScangateProcess& c, const ScangateProcess& f,
                                          const std::vector<std::string>& keys, Clock::time_point recorded,
                                          std::chrono::seconds retention, const std::string& what) {
    std::this_thread::sleep_until(recorded + retention + kPastHorizon);
    int news = 0;
    int first_pass = -1;
    std::vector<std::string> waiting = keys;
    const auto deadline = recorded + retention + kNewAgainBound;
    while (!waiting.empty()) {
      std::vector<std::string> still;
      HttpClient cc(c.port());
      for (const auto& k : waiting) {
        if (ObserveKey(cc, k).status == 201) ++news;
        else still.push_back(k);
      }
      if (first_pass < 0) first_pass = news;
      waiting.swap(still);
      if (waiting.empty() || Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    const double age = Seconds(Clock::now() - recorded);
    std::cout << what << ": past the horizon, " << news << " of " << keys.size() << " keys new again at C by " << age
              << " s after they were recorded (" << first_pass << " on the first pass, at R + "
              << kPastHorizon.count() << " s)\n";
    EXPECT_TRUE(waiting.empty()) << waiting.size() << " of " << keys.size() << " keys were not new again " << age
                                 << " s after they were recorded (horizon " << retention.count() << " s)";
    const auto after_c = ObserveConcurrently(c.port(), keys);
    ASSERT_TRUE(FollowerFresh(f.port()));
    const auto after_f = ObserveConcurrently(f.port(), keys);
    std::cout << what << ": then at C: " << Describe(after_c) << "; at F: " << Describe(after_f) << "\n";
    EXPECT_EQ(Count(after_c, 201), 0) << "new twice past the horizon, at C: " << Describe(after_c);
    EXPECT_EQ(Count(after_f, 201), 0) << "new twice past the horizon, at F: " << Describe(after_f);
  }

  // C (--ack=commit) and F (--ack=filter) on one database, --retention=shape.retention: each records kKeys fresh
  // keys, `step` moves PostgreSQL's clock shape.step_s forward (and checks it did), and then, with both ready and
  // their clock readers past the step, every key is observed again well inside its real horizon: none may be `new`
  // (each instance its own keys and the other's, so that each one's path is seen on its own: the first `new` of a
  // key hides the others). /lookup still finds the keys. Then, past R + 3 s of real age, each key is `new` once at
  // C, and only once (both instances answer duplicate after).
  void Run(const Case& shape, const std::string& dir, const std::string& what,
           const std::function<::testing::AssertionResult()>& step) {
    const std::chrono::seconds retention = shape.retention;
    ScangateProcess c(CommitFlags(retention)), f(FilterFlags(dir + "/f", retention));
    ASSERT_TRUE(c.Start());
    ASSERT_TRUE(f.Start());
    ASSERT_TRUE(FollowerFresh(f.port()));
    const auto keys_c = UniqueKeys(kKeys, "clock-forward-c"), keys_f = UniqueKeys(kKeys, "clock-forward-f");
    const auto first = Clock::now();  // no key was seen before this
    const auto new_c = ObserveConcurrently(c.port(), keys_c);
    const auto new_f = ObserveConcurrently(f.port(), keys_f);
    const auto recorded = Clock::now();  // every key was seen by this
    ASSERT_EQ(Count(new_c, 201), kKeys) << "C's fresh keys: " << Describe(new_c);
    ASSERT_EQ(Count(new_f, 201), kKeys) << "F's fresh keys: " << Describe(new_f);
    ASSERT_TRUE(JournalDrained(f.port()));
    ASSERT_TRUE(FollowerFresh(f.port()));
    std::this_thread::sleep_for(kBeforeStep);

    ASSERT_TRUE(step());
    ASSERT_TRUE(WaitReady(c.port())) << "C did not become ready after the step";
    ASSERT_TRUE(WaitReady(f.port())) << "F did not become ready after the step";
    ASSERT_TRUE(FollowerFresh(f.port()));
    std::this_thread::sleep_for(kReadersSee);

    // During the step: every key's real age is well inside the horizon (else this case checks nothing).
    const double age = Seconds(Clock::now() - first);
    ASSERT_LT(age, Seconds(retention - kCheckRoom)) << "too slow: the keys are " << age << " s old at the check";
    const HttpResponse looked_f = Lookup(f.port(), keys_c.front());  // C's key, asked at F
    const HttpResponse looked_c = Lookup(c.port(), keys_f.front());  // F's key, asked at C
    std::cout << what << ": /lookup of keys " << age << " s old (horizon " << retention.count()
              << " s, PostgreSQL's clock +" << shape.step_s << " s): " << looked_f.status << " at F, "
              << looked_c.status << " at C\n";
    EXPECT_EQ(looked_f.status, 200) << "a key seen " << age << " s ago is not recorded: " << looked_f;
    EXPECT_EQ(looked_c.status, 200) << "a key seen " << age << " s ago is not recorded: " << looked_c;
    // Each key once, at one instance: C half its own keys and half F's, F the other halves.
    const std::vector<std::pair<std::string, std::map<int, int>>> first_round{
        {"C, its own keys", ObserveConcurrently(c.port(), Half(keys_c, false))},
        {"C, F's keys", ObserveConcurrently(c.port(), Half(keys_f, false))},
        {"F, its own keys", ObserveConcurrently(f.port(), Half(keys_f, true))},
        {"F, C's keys", ObserveConcurrently(f.port(), Half(keys_c, true))}};
    for (const auto& [who, by_status] : first_round) {
      std::cout << what << ": " << who << " again " << age << " s after their first sighting: " << Describe(by_status)
                << "\n";
      EXPECT_EQ(Count(by_status, 201), 0) << who << ": keys seen " << age << " s ago were new again within the "
                                          << retention.count() << " s horizon: " << Describe(by_status);
      EXPECT_EQ(Count(by_status, 200), kKeys / 2) << who << ": " << Describe(by_status);
    }
    // Every key at both instances.
    const auto all = Concat(keys_c, keys_f);
    const auto again_c = ObserveConcurrently(c.port(), all);
    const auto again_f = ObserveConcurrently(f.port(), all);
    std::cout << what << ": all " << all.size() << " keys at C: " << Describe(again_c) << "; at F: "
              << Describe(again_f) << "\n";
    EXPECT_EQ(Count(again_c, 201), 0) << "within the horizon, at C: " << Describe(again_c);
    EXPECT_EQ(Count(again_f, 201), 0) << "within the horizon, at F: " << Describe(again_f);
    EXPECT_LT(Seconds(Clock::now() - first), Seconds(retention)) << "the checks ran past the horizon";

    // The horizon still ends, by the keys' real age.
    ExpectNewOncePastTheHorizon(c, f, all, recorded, retention, what);
    EXPECT_EQ(c.Stop(), 0);
    EXPECT_EQ(f.Stop(), 0);
  }
};

// PostgreSQL's clock steps 30 s forward while it runs (an NTP step; no restart): the instances' own statements and
// clock readers must see it. On main the take-over (and the expiry, /lookup) count every row 30 s older than it is:
// every key, seen ~6 s before, was `new` again inside the 20 s horizon (201:10 in each of the four groups: C and F,
// each its own keys and the other's), and /lookup answered 404 not-recorded at both.
TEST_F(ServiceClockForward, StepForwardWhilePostgreSQLRuns) {
  std::string dir;
  const std::string file = MakeShiftFile("clock-forward-live", dir);
  ASSERT_EQ(PgClusterStop(), 0);
  ASSERT_EQ(StartCluster(0, file), 0);
  ASSERT_LT(std::abs(ServerOffsetSeconds()), 5);
  const auto step = [&file]() -> ::testing::AssertionResult {
    StepRunningClock(file, kLive.step_s);
    const double offset = ServerOffsetSeconds();
    if (std::abs(offset - static_cast<double>(kLive.step_s)) > 5) {
      return ::testing::AssertionFailure() << "PostgreSQL's clock is " << offset << " s off, not " << kLive.step_s;
    }
    return ::testing::AssertionSuccess();
  };
  Run(kLive, dir, "a " + std::to_string(kLive.step_s) + " s step forward while PostgreSQL runs", step);
}

// PostgreSQL restarted with its clock 40 s ahead (a failover onto a host whose clock is ahead; the horizon 30 s, as
// the restart makes the checks later); the instances stay up and reconnect, and see the new clock only at their
// first reading of it (across the outage). On 410eb9c (20 s horizon, 30 s step), as above: the keys, ~8-10 s old,
// were `new` again (201:10 in each group) and /lookup answered 404 at both.
TEST_F(ServiceClockForward, StepForwardAcrossARestart) {
  Run(kRestart, TempDir("clock-forward-restart"),
      "a " + std::to_string(kRestart.step_s) + " s step forward across a restart",
      [] { return StepTheClock(kRestart.step_s); });
}

// A step that is undone: PostgreSQL's clock steps 30 s forward while it runs and, 3 s later, back (a failover onto a
// host ahead and the failback; an NTP step corrected). Keys K1 recorded before the steps, K2 just after (while the
// forward step's own time, in the clock that was ahead, still lies in the future): with the clock back, none is new
// within the horizon, and each is new once past R + 3 s of its real age. A fix that keeps subtracting the forward
// step after its undoing (or counts it for rows written "before" it in the corrected clock) stretches the horizon by
// 30 s: the keys are not new again by R + 15 s. On main the expiry deletes K1's rows while the clock is ahead, and
// K1 is new again within its horizon.
TEST_F(ServiceClockForward, StepForwardAndBackWhilePostgreSQLRuns) {
  std::string dir;
  const std::string file = MakeShiftFile("clock-forward-back", dir);
  ASSERT_EQ(PgClusterStop(), 0);
  ASSERT_EQ(StartCluster(0, file), 0);
  ASSERT_LT(std::abs(ServerOffsetSeconds()), 5);
  ScangateProcess c(CommitFlags(kLive.retention)), f(FilterFlags(dir + "/f", kLive.retention));
  ASSERT_TRUE(c.Start());
  ASSERT_TRUE(f.Start());
  ASSERT_TRUE(FollowerFresh(f.port()));
  // kKeys fresh keys, half observed at C, half at F; `fresh` counts those answered new.
  const auto record = [&](const char* tag, int& fresh) {
    const auto keys = UniqueKeys(kKeys, tag);
    fresh = Count(ObserveConcurrently(c.port(), Half(keys, false)), 201) +
            Count(ObserveConcurrently(f.port(), Half(keys, true)), 201);
    return keys;
  };
  int fresh1 = 0, fresh2 = 0;
  const auto first = Clock::now();
  const auto k1 = record("clock-forward-k1", fresh1);
  const auto recorded1 = Clock::now();
  ASSERT_EQ(fresh1, kKeys);
  ASSERT_TRUE(JournalDrained(f.port()));
  std::this_thread::sleep_for(kBeforeStep);
  StepRunningClock(file, kLive.step_s);
  EXPECT_NEAR(ServerOffsetSeconds(), static_cast<double>(kLive.step_s), 5) << "PostgreSQL's clock did not step forward";
  std::this_thread::sleep_for(kReadersSee);
  StepRunningClock(file, 0);
  EXPECT_NEAR(ServerOffsetSeconds(), 0.0, 5) << "PostgreSQL's clock did not step back";
  ASSERT_TRUE(WaitReady(c.port()));
  ASSERT_TRUE(WaitReady(f.port()));
  ASSERT_TRUE(FollowerFresh(f.port()));
  std::this_thread::sleep_for(kReadersSee);
  // The expiry ran while the clock was ahead (every R / 10): K1's rows are kept all the same.
  std::vector<std::string> hexes;
  for (const auto& k : k1) hexes.push_back(Sha256Hex(k));
  Pg pg;
  const std::int64_t k1_rows = pg.CountDigests(hexes);
  const auto k2 = record("clock-forward-k2", fresh2);
  const auto recorded2 = Clock::now();
  EXPECT_EQ(fresh2, kKeys) << "fresh keys after the clock stepped back";
  ASSERT_TRUE(JournalDrained(f.port()));
  ASSERT_TRUE(FollowerFresh(f.port()));
  const double age = Seconds(Clock::now() - first);
  ASSERT_LT(age, Seconds(kLive.retention - kCheckRoom)) << "too slow: K1 is " << age << " s old at the check";
  const auto all = Concat(k1, k2);
  const auto at_c = ObserveConcurrently(c.port(), all);
  const auto at_f = ObserveConcurrently(f.port(), all);
  const std::string what = "a " + std::to_string(kLive.step_s) + " s step forward and back";
  std::cout << what << ": K1's rows after it: " << k1_rows << " of " << kKeys << "; K1 (" << age
            << " s old) and K2 at C: " << Describe(at_c) << "; at F: " << Describe(at_f) << "\n";
  EXPECT_EQ(k1_rows, kKeys) << "rows of keys " << age << " s old were deleted (horizon " << kLive.retention.count()
                            << " s)";
  EXPECT_EQ(Count(at_c, 201), 0) << "within the horizon, at C: " << Describe(at_c);
  EXPECT_EQ(Count(at_f, 201), 0) << "within the horizon, at F: " << Describe(at_f);
  ExpectNewOncePastTheHorizon(c, f, k1, recorded1, kLive.retention, what + ", K1");
  ExpectNewOncePastTheHorizon(c, f, k2, recorded2, kLive.retention, what + ", K2");
  EXPECT_EQ(c.Stop(), 0);
  EXPECT_EQ(f.Stop(), 0);
}

// The journal's recovery across a step: --ack=filter instance A answers 20 keys `new` from its journal during a write
// stall that outlives a restart (clock_shift_cluster.h PrepareStall), is killed (kill -9) with the keys still in its
// journal, PostgreSQL restarts with its clock 60 s ahead while instance B stays up (B's clock reader sees the step),
// then A restarts and replays its journal, the stall released. The keys' real age is well inside the 30 s horizon:
// all 20 reach PostgreSQL, and B answers none of them `new`. On main A's recovery skipped every record as older than
// R by PostgreSQL's stepped clock (journal event: recovered 0, recovered_expired 20): none of the acknowledged keys
// reached PostgreSQL, and B answered all 20 `new`.
TEST_F(ServiceClockForward, JournalRecoveryAcrossAStepForward) {
  const std::string dir = TempDir("clock-forward-journal");
  ScangateProcess a(FilterFlags(dir + "/a", kJournal.retention)), b(FilterFlags(dir + "/b", kJournal.retention));
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(FollowerFresh(a.port()));
  ASSERT_TRUE(FollowerFresh(b.port()));
  const auto keys = UniqueKeys(kKeys, "clock-forward-journal");
  PrepareStall();
  const auto first = Clock::now();
  const auto at_a = ObserveConcurrently(a.port(), keys);
  ASSERT_EQ(Count(at_a, 201), kKeys) << "A did not answer the keys from its journal: " << Describe(at_a);
  // Past the window (--max-commit-lag 1 s + --follow-max-lag 200 ms), as in service_clock_step_test.
  std::this_thread::sleep_for(kPastTheWindow);
  a.Kill();
  ASSERT_TRUE(StepTheClock(kJournal.step_s));
  ASSERT_TRUE(WaitReady(b.port())) << "B did not become ready after the restart";
  std::this_thread::sleep_for(kReadersSee);
  ReleaseStall();
  ASSERT_TRUE(a.Start()) << "A's restart (it replays its journal)";
  ASSERT_TRUE(JournalDrained(a.port()));
  const double age = Seconds(Clock::now() - first);
  ASSERT_LT(age, Seconds(kJournal.retention - kCheckRoom)) << "too slow: the keys are " << age << " s old at the check";
  const std::string recovery = LastEvent(a, "journal", "recovered");
  Pg pg;
  std::vector<std::string> hexes;
  for (const auto& k : keys) hexes.push_back(Sha256Hex(k));
  const std::int64_t in_pg = pg.CountDigests(hexes);
  ASSERT_TRUE(FollowerFresh(b.port()));
  const auto at_b = ObserveConcurrently(b.port(), keys);
  std::cout << "A's journal across a " << kJournal.step_s << " s step forward, keys " << age << " s old (horizon "
            << kJournal.retention.count() << " s): " << in_pg << " of " << kKeys << " in PostgreSQL; at B: "
            << Describe(at_b) << "; A's recovery: " << recovery << "\n";
  EXPECT_EQ(in_pg, kKeys) << "keys A acknowledged were lost in its journal's recovery: " << recovery;
  EXPECT_EQ(Count(at_b, 201), 0) << "A's journalled keys were new again at B within the horizon: " << Describe(at_b);
  EXPECT_EQ(Count(at_b, 200), kKeys) << Describe(at_b);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// The warm start across a step: C (--ack=commit) records 20 keys, PostgreSQL restarts with its clock 40 s ahead while
// C stays up (C's clock reader sees the step), and only then --ack=filter instance F starts: its warm start loads the
// rows within the window (= the horizon here) by PostgreSQL's clock, and its filter's negatives are `new` from its
// journal. The keys' real age is well inside the 30 s horizon: F answers none of them `new`. On main the warm start
// skips the rows as older than the window, and F answers C's keys `new` from its filter.
TEST_F(ServiceClockForward, WarmStartAfterAStepForward) {
  const std::string dir = TempDir("clock-forward-warm");
  ScangateProcess c(CommitFlags(kRestart.retention));
  ASSERT_TRUE(c.Start());
  const auto keys = UniqueKeys(kKeys, "clock-forward-warm");
  const auto first = Clock::now();
  const auto at_c = ObserveConcurrently(c.port(), keys);
  ASSERT_EQ(Count(at_c, 201), kKeys) << "C's fresh keys: " << Describe(at_c);
  std::this_thread::sleep_for(kBeforeStep);
  ASSERT_TRUE(StepTheClock(kRestart.step_s));
  ASSERT_TRUE(WaitReady(c.port())) << "C did not become ready after the restart";
  std::this_thread::sleep_for(kReadersSee);
  ScangateProcess f(FilterFlags(dir + "/f", kRestart.retention));
  ASSERT_TRUE(f.Start());
  {
    HttpClient cf(f.port());
    ASSERT_TRUE(WaitWarm(cf)) << "F's warm start did not finish";
  }
  ASSERT_TRUE(FollowerFresh(f.port()));
  const double age = Seconds(Clock::now() - first);
  ASSERT_LT(age, Seconds(kRestart.retention - kCheckRoom)) << "too slow: the keys are " << age << " s old at the check";
  const auto at_f = ObserveConcurrently(f.port(), keys);
  const std::string warm = LastEvent(f, "warm_start", "keys");
  std::cout << "F started after a " << kRestart.step_s << " s step forward, keys " << age << " s old (horizon "
            << kRestart.retention.count() << " s): at F " << Describe(at_f)
            << "; F's warm start (rows of any case): " << warm << "\n";
  EXPECT_EQ(Count(at_f, 201), 0) << "C's keys were new again at F within the horizon: " << Describe(at_f)
                                 << "; F's warm start: " << warm;
  EXPECT_EQ(Count(at_f, 200), kKeys) << Describe(at_f);
  EXPECT_EQ(c.Stop(), 0);
  EXPECT_EQ(f.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
