// High availability under load (issue 10), against the local cluster of deploy/cluster.sh (etcd, two
// PostgreSQL 15 nodes run by Patroni in synchronous mode, HAProxy): run by deploy/ha_test.sh, not by CTest
// (it takes minutes: a host-loss failover alone waits out Patroni's 20 s leader TTL).
//
// Each PostgreSQL scenario runs one scangate (--ack=commit, database URL = the libpq multi-host URL with
// target_session_attrs=read-write) under a steady load of fresh and repeated keys, disrupts the cluster,
// waits until answers flow again, heals it (rejoin, resync) under load, drains every ambiguous key and
// checks on the primary of the moment: every key answered "new" or "duplicate" has its row, no key was
// answered "new" twice, no "duplicate" without an earlier attempt that could have inserted the key, and
// every outcome-unknown answer resolved by a later verdict. The gap (longest stretch without a 2xx), the
// 503s by problem type and /readyz during the gap are reported ("ha:" lines), not asserted (timings on a
// shared machine are not a pass/fail matter; deploy/RESULTS.md states them against the goals).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>

#include "follower_check.h"
#include "ha_load.h"

namespace scangate::ha {
namespace {

using hardening::Ledger;
using hardening::LedgerCheck;
using namespace std::chrono_literals;

constexpr auto kRecoverBound = 120s;  // bounds failure detection only
constexpr auto kQuietAfterFailure = 3s;
constexpr std::uint64_t kWarmupVerdicts = 1000;

// One figure for the log: "ha: <line>" (deploy/ha_test.sh collects these into deploy/RESULTS.md).
void Report(const std::string& line) { std::cout << "ha: " << line << std::endl; }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// Runs deploy/cluster.sh with HA_DIR / HA_PORT_BASE from the environment deploy/ha_test.sh set.
std::string Cluster(const std::string& args, bool must_succeed = true) {
  const auto r = hardening::RunCommand(it::Env().source_dir + "/deploy/cluster.sh " + args);
  if (must_succeed) {
    EXPECT_EQ(r.status, 0) << "cluster.sh " << args << ":\n" << r.output;
  }
  return Trim(r.output);
}

// Last line of the output (cluster.sh logs to stderr, which RunCommand merges).
std::string LastLine(const std::string& s) {
  const auto p = s.rfind('\n');
  return p == std::string::npos ? s : s.substr(p + 1);
}

std::uint16_t PortBase() {
  const char* b = std::getenv("HA_PORT_BASE");
  return static_cast<std::uint16_t>(b != nullptr ? std::atoi(b) : 25400);
}

// Waits until answers flow again after the event at `at`: 3 s passed, 300 verdicts since `at`, no failure
// for kQuietAfterFailure, and `db_ready()`. Returns that moment.
Clock::time_point WaitRecovered(const HaLoad& load, const Timeline& tl, Clock::time_point at,
                                std::uint64_t verdicts_at, const std::function<bool()>& db_ready = [] { return true; }) {
  const auto deadline = at + kRecoverBound;
  while (Clock::now() < deadline) {
    const auto now = Clock::now();
    const auto lf = tl.LastFailure();
    const bool quiet = !lf || *lf < at || now - *lf > kQuietAfterFailure;
    if (now - at > 3s && quiet && load.verdicts() >= verdicts_at + 300 && db_ready()) return now;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "answers did not flow again within " << kRecoverBound.count() << " s";
  return Clock::now();
}

// How the keys answered outcome-unknown were settled later (their last verdict).
std::string AccountOutcomeUnknown(const std::vector<Event>& events, const std::vector<std::string>& keys,
                                  std::uint64_t& unresolved) {
  std::set<std::string> want(keys.begin(), keys.end());
  std::map<std::string, int> last_verdict;
  for (const auto& e : events) {
    if (want.count(e.key) != 0 && (e.status == 200 || e.status == 201)) last_verdict[e.key] = e.status;
  }
  std::uint64_t dup = 0, fresh = 0;
  unresolved = 0;
  for (const auto& k : want) {
    const auto it = last_verdict.find(k);
    if (it == last_verdict.end()) {
      ++unresolved;
    } else {
      (it->second == 200 ? dup : fresh) += 1;
    }
  }
  return "outcome-unknown keys " + std::to_string(want.size()) + ": retry answered duplicate (had committed) " +
         std::to_string(dup) + ", new (had not) " + std::to_string(fresh) + ", never settled " +
         std::to_string(unresolved);
}

// Sum of the scangate_verdicts_total{verdict="new",...} samples of a /metrics text.
long NewVerdicts(const std::string& metrics) {
  long sum = 0;
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("scangate_verdicts_total{verdict=\"new\"", 0) == 0) {
      sum += std::atol(line.substr(line.rfind(' ') + 1).c_str());
    }
  }
  return sum;
}

// Sends every key once from `threads` threads to `port` (with `idems[i]` as key i's Idempotency-Key when
// given); returns {201s, 200s, others, 201s marked Idempotent-Replayed}.
std::array<std::uint64_t, 4> SendOnce(const std::vector<std::string>& keys, std::uint16_t port, int threads,
                                      const std::vector<std::string>* idems = nullptr) {
  std::atomic<std::uint64_t> n201{0}, n200{0}, other{0}, replayed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::unique_ptr<it::HttpClient> c;
      for (std::size_t i = static_cast<std::size_t>(t); i < keys.size(); i += static_cast<std::size_t>(threads)) {
        try {
          if (!c) c = std::make_unique<it::HttpClient>(port);
          const auto r = idems == nullptr
                             ? c->Post("/observe", it::ObserveBody(keys[i]))
                             : c->Request("POST", "/observe", it::ObserveBody(keys[i]), "application/json",
                                          {{"Idempotency-Key", (*idems)[i]}});
          (r.status == 201 ? n201 : r.status == 200 ? n200 : other) += 1;
          if (r.status == 201 && r.header("idempotent-replayed") == "true") ++replayed;
          if (!r.keep_alive) c.reset();
        } catch (const std::exception&) {
          ++other;
          c.reset();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  return {n201.load(), n200.load(), other.load(), replayed.load()};
}

enum class Leader { kSame, kOther };  // who is primary once answers flow again

struct Scenario {
  std::string name;
  std::string goal;
  Leader leader;
  std::function<void(const std::string& leader)> disrupt;
  std::function<void(const std::string& leader)> heal;  // under load, after answers flow again
  // Issue 32: two --ack=filter instances with their followers (key affinity, as behind deploy/haproxy.cfg's
  // filter frontend) instead of one --ack=commit; afterwards every answered key is sent to both instances.
  bool followers = false;
  // Called with the instances' ports just before `disrupt` (after = false) and after the cross-check, while the
  // instances still run (after = true): a scenario's own observations.
  std::function<void(const std::vector<std::uint16_t>& ports, bool after)> observe = nullptr;
};

void CheckLedger(const std::string& name, const Ledger& ledger, std::size_t left) {
  it::Pg pg;  // the multi-host URL: the primary of the moment
  const LedgerCheck check = ledger.Check(pg);
  Report(name + ": " + check.Summary());
  for (const auto& e : check.examples) Report(name + ": violation example: " + e);
  EXPECT_TRUE(check.ok()) << check.Summary();
  EXPECT_EQ(check.keys_new_twice, 0u) << "a key was answered new twice";
  EXPECT_EQ(check.duplicates_without_witness, 0u) << "a first observation was answered duplicate";
  EXPECT_EQ(check.verdict_keys_missing_in_pg, 0u) << "an acknowledged key is not on the primary";
  EXPECT_EQ(check.keys_without_verdict, 0u);
  EXPECT_EQ(left, 0u) << "retransmissions did not all get a verdict";
}

// After a followers scenario: every answered key sent to both instances (follower_check.h); a `new` at either is
// a key new twice in the ledger.
void CrossCheck(const std::string& name, Ledger& ledger, const std::vector<std::uint16_t>& ports) {
  EXPECT_TRUE(WaitSettled(ports, 120s)) << "journals not committed or followers not fresh after " << name;
  Report(name + ": afterwards " + SendAnsweredToAll(ledger, ports));
}

void RunScenario(const Scenario& s) {
  ASSERT_EQ(Cluster("wait-sync 180"), "") << "the cluster is not in sync before " << s.name;
  std::vector<std::unique_ptr<it::ScangateProcess>> sg;
  std::vector<std::uint16_t> ports;
  for (int i = 0; i < (s.followers ? 2 : 1); ++i) {
    sg.push_back(std::make_unique<it::ScangateProcess>(
        s.followers ? std::vector<std::string>{"--ack=filter", "--writers=2"}
                    : std::vector<std::string>{"--ack=commit", "--writers=2"}));
    ASSERT_TRUE(sg.back()->Start());
    ports.push_back(sg.back()->port());
  }
  Ledger ledger;
  Timeline tl;
  ReadyProbe probe({ports[0]});
  HaLoadOptions options;
  options.key_tag = s.name;
  options.key_affinity = s.followers;
  HaLoad load(ledger, tl, options, ports);
  load.Start();
  ASSERT_TRUE(load.WaitVerdicts(kWarmupVerdicts, 60s)) << "no steady load before the event";
  const std::string leader = Cluster("leader");
  const auto t0 = Clock::now();
  const auto req0 = load.requests();
  std::this_thread::sleep_for(1s);
  const double rate = static_cast<double>(load.requests() - req0) / Ms(Clock::now() - t0) * 1000.0;
  const std::uint64_t verdicts_at = load.verdicts();
  const auto at = Clock::now();
  // The database's own way back, apart from scangate's reconnect: every 100 ms a fresh connection from the
  // same multi-host URL (read-write) runs a one-row write that commits (synchronous commit included).
  // Reported: when writes first failed and when they worked again (ms after the event, -1 = not seen), and
  // the slowest write that worked. "Recovered" also waits for it: answers alone could flow from a
  // scangate that (wrongly) acknowledged without a database.
  std::atomic<std::int64_t> first_fail_ms{-1}, back_ms{-1}, slowest_ms{0};
  std::atomic<bool> probe_stop{false};
  auto since_at = [at] { return static_cast<std::int64_t>(Ms(Clock::now() - at)); };
  std::thread pg_probe([&] {
    while (!probe_stop && back_ms.load() < 0) {
      const auto t = Clock::now();
      try {
        pqxx::connection c(it::Env().pg_url);
        pqxx::work w(c);
        // statement_timeout also cancels a COMMIT stuck waiting for a synchronous standby that never
        // returns (it then commits locally with a warning), so the probe cannot hang the test.
        w.exec("SET statement_timeout = 10000; CREATE TEMP TABLE ha_probe (x int); INSERT INTO ha_probe VALUES (1)");
        w.commit();
        slowest_ms = std::max<std::int64_t>(slowest_ms.load(), static_cast<std::int64_t>(Ms(Clock::now() - t)));
        if (first_fail_ms.load() >= 0) back_ms = since_at();
      } catch (const std::exception&) {
        if (first_fail_ms.load() < 0) first_fail_ms = static_cast<std::int64_t>(Ms(t - at));
      }
      std::this_thread::sleep_for(100ms);
    }
  });
  // Issue 42: keys answered at one instance around the disruption, sent to the other past the window while it
  // lasts (follower_check.h CrossDuring): a 201 there is a key new twice.
  std::unique_ptr<CrossDuring> cross;
  if (s.followers) {
    cross = std::make_unique<CrossDuring>(ledger, tl, ports, [](const std::string& k) { return std::hash<std::string>{}(k); });
    cross->Start();
  }
  if (s.observe) s.observe(ports, false);
  s.disrupt(leader);
  const auto recovered =
      WaitRecovered(load, tl, at, verdicts_at, [&] { return first_fail_ms.load() < 0 || back_ms.load() >= 0; });
  probe_stop = true;
  pg_probe.join();
  const std::string leader_after = Cluster("leader", false);
  if (s.leader == Leader::kSame) {
    EXPECT_EQ(leader_after, leader) << "the primary moved; expected it to stay (restart in place)";
  } else {
    EXPECT_NE(leader_after, leader) << "the primary did not move";
  }
  if (cross) {
    std::this_thread::sleep_for(3s);  // the keys answered just before recovery are crossed too
    cross->Stop();
    Report(s.name + ": " + cross->Summary());
    EXPECT_EQ(cross->news(), 0u) << "a key answered new at one instance was new again at the other during the stall";
  }
  s.heal(leader);
  load.WaitVerdicts(500, 60s);
  const std::size_t left = load.Drain(60s);
  load.Stop();
  probe.Stop();

  const auto events = tl.Snapshot();
  const GapReport gap = MeasureGap(events, at, recovered);
  std::uint64_t unresolved = 0;
  const std::string ou = AccountOutcomeUnknown(events, gap.outcome_unknown_keys, unresolved);
  std::ostringstream head;
  head.setf(std::ios::fixed);
  head.precision(0);
  head << s.name << ": leader " << leader << " -> " << leader_after << "; load " << rate << " requests/s before; "
       << load.requests() << " requests, " << load.verdicts() << " verdicts in all; goal: " << s.goal;
  Report(head.str());
  std::string pg_line = "PostgreSQL write probe (fresh read-write connection every 100 ms): ";
  if (first_fail_ms.load() >= 0) {
    pg_line += "failing from " + std::to_string(first_fail_ms.load()) + " ms, writes again at " +
               (back_ms.load() >= 0 ? std::to_string(back_ms.load()) + " ms" : std::string("- (not seen)"));
  } else {
    pg_line += "never failed";
  }
  pg_line += "; slowest successful write " + std::to_string(slowest_ms.load()) + " ms";
  Report(s.name + ": " + pg_line);
  Report(s.name + ": " + gap.Summary());
  Report(s.name + ": " + probe.Describe(0, at));
  Report(s.name + ": " + ou);
  EXPECT_EQ(gap.other, 0u) << "a status other than 2xx/503 during the event";
  EXPECT_EQ(unresolved, 0u);
  if (s.followers) CrossCheck(s.name, ledger, ports);
  if (s.observe) s.observe(ports, true);
  CheckLedger(s.name, ledger, left);
}

// (c) Planned switchover: the primary hands over to the synchronous standby.
TEST(HaPostgres, Switchover) {
  RunScenario({"switchover", "answers again within 5 s", Leader::kOther,
       [](const std::string&) { Cluster("switchover"); },
       [](const std::string&) { Cluster("wait-sync 180"); }});
}

// Issue 32: the same switchover under two --ack=filter instances whose followers follow the primary (by the
// default, poll): their connections end with it, each follower is stale (new keys decided in PostgreSQL) until it
// has reconnected to the new primary (a new snapshot there; with --follow=logical a new TEMPORARY slot) and read
// the window again; no key is new twice, at either instance.
TEST(HaPostgres, SwitchoverWithFollowers) {
  RunScenario({"switchover-followers", "answers again within 5 s; 0 keys new twice across the instances",
               Leader::kOther, [](const std::string&) { Cluster("switchover"); },
               [](const std::string&) { Cluster("wait-sync 180"); }, true});
}

// (b) The primary's postmaster dies alone (kill -9); its Patroni restarts it in place.
TEST(HaPostgres, PostmasterKilled) {
  RunScenario({"postmaster-kill", "restarted in place, answers again within 10 s", Leader::kSame,
       [](const std::string& leader) { Cluster("kill-postmaster " + leader); },
       [](const std::string&) { Cluster("wait-sync 180"); }});
}

// (a) Host loss: the primary's Patroni, postmaster and backends die together (kill -9); the standby is
// promoted once the leader key expires (ttl 20 s); then the old node rejoins as a standby (pg_rewind).
TEST(HaPostgres, PrimaryHostLoss) {
  RunScenario({"host-loss", "503s for at most ttl + 5 s = 25 s", Leader::kOther,
       [](const std::string& leader) { Cluster("kill-host " + leader); },
       [](const std::string& leader) {
         Cluster("node-start " + leader);
         Cluster("wait-sync 240");
       }});
}

// Issue 32: host loss under two --ack=filter instances with followers (failover: their connections — and with
// --follow=logical their slots — die with the host; the followers follow the promoted standby).
TEST(HaPostgres, PrimaryHostLossWithFollowers) {
  RunScenario({"host-loss-followers", "503s for new keys while stale; 0 keys new twice across the instances",
               Leader::kOther, [](const std::string& leader) { Cluster("kill-host " + leader); },
               [](const std::string& leader) {
                 Cluster("node-start " + leader);
                 Cluster("wait-sync 240");
               },
               true});
}

// Issue 55: host loss onto a standby whose wall clock is 30 s behind the lost primary's (its PostgreSQL runs with
// tests/clock_shift preloaded: deploy/cluster.sh node-start --clock-shift), under two --ack=filter instances with
// followers. now() steps 30 s back at the promotion: a watermark an instance published under the old primary's
// clock would cover keys "until" a moment the new clock has not reached, so every instance's watermark must move
// to a new clock epoch (scangate_watermark_clock_epoch grows) and, as in every scenario, no key is new twice at
// either instance. Afterwards the cluster is handed back to the other node and the shifted one restarted
// unshifted, for the scenarios after this one.
TEST(HaPostgres, PrimaryHostLossOntoLaggingStandby) {
  ASSERT_EQ(Cluster("wait-sync 180"), "") << "the cluster is not in sync before the standby's restart";
  const std::string lagging = LastLine(Cluster("standby"));
  Cluster("kill-host " + lagging);
  Cluster("node-start " + lagging + " --clock-shift -30");
  ASSERT_EQ(Cluster("wait-sync 240"), "") << "the lagging standby did not rejoin";
  const std::string offset = LastLine(Cluster("clock-offset " + lagging));
  Report("host-loss-lagging-standby: " + lagging + "'s PostgreSQL clock offset before the failover: " + offset + " s");
  const long off = std::atol(offset.c_str());
  ASSERT_TRUE(off <= -28 && off >= -32) << "the standby's clock is not 30 s behind (offset '" << offset << "')";

  auto epochs = std::make_shared<std::vector<double>>();
  RunScenario({"host-loss-lagging-standby",
               "503s for new keys while stale; every watermark under a new clock epoch; 0 keys new twice",
               Leader::kOther, [](const std::string& leader) { Cluster("kill-host " + leader); },
               [](const std::string& leader) {
                 Cluster("node-start " + leader);
                 Cluster("wait-sync 240");
               },
               true,
               [epochs](const std::vector<std::uint16_t>& ports, bool after) {
                 for (std::size_t i = 0; i < ports.size(); ++i) {
                   it::HttpClient c(ports[i]);
                   const double epoch = it::ScrapeMetric(c, "scangate_watermark_clock_epoch");
                   const double steps = it::ScrapeMetric(c, "scangate_pg_clock_steps_total");
                   const double wsteps = it::ScrapeMetric(c, "scangate_watermark_clock_steps_total");
                   std::ostringstream line;
                   line << "host-loss-lagging-standby: instance " << i << (after ? " after" : " before")
                        << ": watermark clock epoch " << epoch << ", clock steps seen " << steps << " (reader) / "
                        << wsteps << " (watermark)";
                   Report(line.str());
                   if (!after) {
                     epochs->push_back(epoch);
                   } else {
                     EXPECT_GE(epochs->at(i), 0) << "instance " << i << " published no watermark before the failover";
                     EXPECT_GT(epoch, epochs->at(i))
                         << "instance " << i << "'s watermark is still under the lost primary's clock epoch";
                   }
                 }
               }});
  // Back to a primary with a true clock, then the shifted node restarted unshifted.
  Cluster("switchover");
  ASSERT_EQ(Cluster("wait-sync 240"), "");
  ASSERT_EQ(LastLine(Cluster("standby")), lagging) << "the switchover did not move the primary off " << lagging;
  Cluster("kill-host " + lagging);
  Cluster("node-start " + lagging);
  ASSERT_EQ(Cluster("wait-sync 240"), "");
  const long after = std::atol(LastLine(Cluster("clock-offset " + lagging)).c_str());
  EXPECT_TRUE(after >= -2 && after <= 2) << lagging << "'s clock is still off after its restart: " << after << " s";
}

// (d) The synchronous standby's host is lost. With synchronous_mode_strict off, Patroni on the primary
// drops the synchronous requirement once it sees the standby gone: COMMITs wait until then, no error.
TEST(HaPostgres, StandbyHostLoss) {
  RunScenario({"standby-loss", "COMMITs stall at most until Patroni's next loop (loop_wait 3 s), no wrong verdict",
               Leader::kSame,
       [](const std::string&) { Cluster("kill-host " + LastLine(Cluster("standby"))); },
       [](const std::string& leader) {
         Cluster("node-start " + std::string(leader == "node1" ? "node2" : "node1"));
         Cluster("wait-sync 240");
       }});
}

// Counts servers of `backend` that HAProxy reports UP (stats CSV).
int HaproxyUp(const std::string& backend) {
  try {
    it::HttpClient c(static_cast<std::uint16_t>(PortBase() + 8));
    const auto r = c.Get("/stats;csv");
    int up = 0;
    std::istringstream in(r.body);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(backend + ",", 0) == 0 && line.find("BACKEND") == std::string::npos &&
          line.find(",UP,") != std::string::npos) {
        ++up;
      }
    }
    return up;
  } catch (const std::exception&) {
    return -1;
  }
}

bool WaitHaproxyUp(const std::string& backend, int n, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (HaproxyUp(backend) == n) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Instances behind deploy/haproxy.cfg: it sends PROXY v2 headers from 127.0.0.2 (SG_PROXY_SOURCE's default).
constexpr const char* kBehindHaproxy = "--proxy-protocol-from=127.0.0.2";

void StartHaproxy(const std::vector<std::unique_ptr<it::ScangateProcess>>& sg, const std::string& prefix) {
  for (std::size_t i = 0; i < sg.size(); ++i) {
    const std::string var = prefix + std::to_string(i + 1);
    ::setenv(var.c_str(), ("127.0.0.1:" + std::to_string(sg[i]->port())).c_str(), 1);
  }
  Cluster("haproxy-stop", false);
  Cluster("haproxy-start");
}

// Three --ack=commit instances behind HAProxy (round robin, /readyz checks); one is killed with SIGKILL
// under load. Clients see only retryable failures; nothing acknowledged is lost; no key new twice.
TEST(HaHaproxy, CommitInstanceKilled) {
  ASSERT_EQ(Cluster("wait-sync 180"), "");
  std::vector<std::unique_ptr<it::ScangateProcess>> sg;
  for (int i = 0; i < 3; ++i) {
    sg.push_back(
        std::make_unique<it::ScangateProcess>(std::vector<std::string>{"--ack=commit", "--writers=2", kBehindHaproxy}));
    ASSERT_TRUE(sg.back()->Start());
  }
  StartHaproxy(sg, "SG_COMMIT_");
  ASSERT_TRUE(WaitHaproxyUp("sg_commit", 3, 20s)) << "HAProxy does not see 3 instances up";
  const auto port = static_cast<std::uint16_t>(PortBase() + 6);
  Ledger ledger;
  Timeline tl;
  HaLoadOptions options;
  options.key_tag = "lb-commit";
  HaLoad load(ledger, tl, options, {port});
  load.Start();
  ASSERT_TRUE(load.WaitVerdicts(kWarmupVerdicts, 60s));
  const std::uint64_t verdicts_at = load.verdicts();
  const auto at = Clock::now();
  sg[1]->Kill();
  const auto recovered = WaitRecovered(load, tl, at, verdicts_at);
  const bool marked_down = WaitHaproxyUp("sg_commit", 2, 10s);
  load.WaitVerdicts(500, 60s);
  const std::size_t left = load.Drain(60s);
  load.Stop();
  const GapReport gap = MeasureGap(tl.Snapshot(), at, recovered);
  Report("lb-commit: SIGKILL of 1 of 3 instances behind HAProxy; " + gap.Summary() +
         "; HAProxy marked it down: " + (marked_down ? "yes" : "no") + "; requests " +
         std::to_string(load.requests()));
  EXPECT_EQ(gap.other, 0u) << "a status other than 2xx/503 (e.g. a raw 502) reached the client";
  EXPECT_TRUE(marked_down);
  CheckLedger("lb-commit", ledger, left);
  Cluster("haproxy-stop", false);
}

// A fake instance for the test below: answers GET /readyz 200, reads a POST and closes without answering
// (an instance that died mid-request), counting the POSTs it received.
class DyingBackend {
 public:
  DyingBackend() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0) {
      throw std::runtime_error("DyingBackend: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~DyingBackend() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int posts() const { return posts_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string in;
      char buf[4096];
      timeval tv{2, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      auto read_more = [&] {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n > 0) in.append(buf, static_cast<std::size_t>(n));
        return n > 0;
      };
      // HAProxy opens with a PROXY v2 header (send-proxy-v2, deploy/haproxy.cfg), checks included: skipped.
      static const std::string kProxySignature("\r\n\r\n\0\r\nQUIT\n", 12);
      while (in.size() < 16 && read_more()) {
      }
      if (in.size() >= 16 && in.compare(0, kProxySignature.size(), kProxySignature) == 0) {
        const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(in[i])); };
        const std::size_t total = 16 + (byte(14) << 8 | byte(15));
        while (in.size() < total && read_more()) {
        }
        in.erase(0, std::min(total, in.size()));
      }
      while (in.find("\r\n\r\n") == std::string::npos && read_more()) {
      }
      if (in.rfind("GET /readyz", 0) == 0) {
        static constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        ::send(c, kOk.data(), kOk.size(), MSG_NOSIGNAL);
      } else if (in.rfind("POST ", 0) == 0) {
        ++posts_;
      }
      ::close(c);
    }
  }
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> posts_{0};
  std::thread thread_;
};

// An instance that dies after HAProxy sent it the request: HAProxy must not re-send the POST elsewhere
// (the first instance may have committed it: a resend would turn the client's "new" into "duplicate"),
// and its own 502 reaches the client as 503 outcome-unknown with Retry-After (deploy/errors/502.http).
TEST(HaHaproxy, InstanceDyingMidRequestIsOutcomeUnknown) {
  DyingBackend backend;
  const std::string addr = "127.0.0.1:" + std::to_string(backend.port());
  for (const char* var : {"SG_COMMIT_1", "SG_COMMIT_2", "SG_COMMIT_3"}) ::setenv(var, addr.c_str(), 1);
  Cluster("haproxy-stop", false);
  Cluster("haproxy-start");
  ASSERT_TRUE(WaitHaproxyUp("sg_commit", 3, 20s));
  it::HttpClient c(static_cast<std::uint16_t>(PortBase() + 6));
  const auto r = c.Post("/observe", it::ObserveBody(it::UniqueKey("dying")));
  Report("lb-dying: an instance closing after the request -> HTTP " + std::to_string(r.status) + " " +
         ProblemSlug(r.body) + ", Retry-After " + r.header("retry-after") + ", POSTs it received " +
         std::to_string(backend.posts()));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(ProblemSlug(r.body), "outcome-unknown");
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_EQ(backend.posts(), 1) << "HAProxy re-sent a request an instance may have committed";
  Cluster("haproxy-stop", false);
}

// Three --ack=filter instances behind HAProxy hashing the body's key (consistent hashing): a repeat meets
// the filter that saw the key, so no key is new twice; a batch cannot be routed by key and is refused
// (421). When an instance dies, its keys move to the other instances, whose followers (issue 32) learned every
// key it committed; what its journal still held uncommitted they do not decide `new` (issue 42: its watermark
// stopped; they wait, then 503) until it is retired (scangate --retire-instance) — then keys scanned with an
// Idempotency-Key (issue 34) before the kill, retried through HAProxy, land on another instance and are replayed.
TEST(HaHaproxy, FilterKeyAffinity) {
  ASSERT_EQ(Cluster("wait-sync 180"), "");
  std::vector<std::unique_ptr<it::ScangateProcess>> sg;
  for (int i = 0; i < 3; ++i) {
    sg.push_back(
        std::make_unique<it::ScangateProcess>(std::vector<std::string>{"--ack=filter", "--writers=2", kBehindHaproxy}));
    ASSERT_TRUE(sg.back()->Start());
  }
  StartHaproxy(sg, "SG_FILTER_");
  ASSERT_TRUE(WaitHaproxyUp("sg_filter", 3, 20s)) << "HAProxy does not see 3 instances up";
  const auto port = static_cast<std::uint16_t>(PortBase() + 7);
  constexpr int kKeys = 3000;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(it::UniqueKey("lb-filter"));

  constexpr int kIdemKeys = 300;
  std::vector<std::string> idem_keys, idems;
  for (int i = 0; i < kIdemKeys; ++i) {
    idem_keys.push_back(it::UniqueKey("lb-filter-idem"));
    idems.push_back(it::RandomHex(16));
  }
  const auto idem_first = SendOnce(idem_keys, port, 6, &idems);
  EXPECT_EQ(idem_first[0], static_cast<std::uint64_t>(kIdemKeys));
  EXPECT_EQ(idem_first[3], 0u);

  const auto first = SendOnce(keys, port, 6);
  const auto second = SendOnce(keys, port, 6);  // every repeat must meet the filter that saw the key
  Report("lb-filter: " + std::to_string(kKeys) + " keys through HAProxy key hashing: first pass 201/200/other " +
         std::to_string(first[0]) + "/" + std::to_string(first[1]) + "/" + std::to_string(first[2]) +
         ", second pass " + std::to_string(second[0]) + "/" + std::to_string(second[1]) + "/" +
         std::to_string(second[2]));
  EXPECT_EQ(first[0], static_cast<std::uint64_t>(kKeys));
  EXPECT_EQ(second[0], 0u) << "a repeat was answered new: key affinity broken";
  EXPECT_EQ(second[1], static_cast<std::uint64_t>(kKeys));

  // Where each instance's share went: its own counters.
  std::string shares;
  for (auto& p : sg) {
    it::HttpClient c(p->port());
    shares += (shares.empty() ? "" : "/") + std::to_string(NewVerdicts(c.Get("/metrics").body));
  }
  Report("lb-filter: keys answered new per instance (scangate_verdicts_total{verdict=\"new\"}): " + shares);

  {  // a batch body has no "$.key": refused at the balancer
    it::HttpClient c(port);
    const auto r = c.Post("/observe/batch", "{\"keys\":[\"" + keys[0] + "\",\"" + keys[1] + "\"]}");
    Report("lb-filter: POST /observe/batch -> " + std::to_string(r.status) + " " + ProblemSlug(r.body));
    EXPECT_EQ(r.status, 421);
    EXPECT_EQ(ProblemSlug(r.body), "batch-not-routable");
    // A form body has no "$.key" either (issue 33): it would hash as empty, to one instance whatever its key.
    const auto form = c.Post("/observe", "key=" + keys[0], "application/x-www-form-urlencoded");
    Report("lb-filter: POST /observe form body -> " + std::to_string(form.status) + " " + ProblemSlug(form.body));
    EXPECT_EQ(form.status, 400);
    EXPECT_EQ(ProblemSlug(form.body), "key-not-routable");
    // "key" twice: HAProxy routes on the first, scangate refuses the body (it would decide the last).
    const auto dup = c.Post("/observe", "{\"key\":\"" + keys[0] + "\",\"key\":\"" + keys[1] + "\"}");
    Report("lb-filter: POST /observe with \"key\" twice -> " + std::to_string(dup.status) + " " + ProblemSlug(dup.body));
    EXPECT_EQ(dup.status, 400);
    EXPECT_EQ(ProblemSlug(dup.body), "duplicate-member");
  }

  // The kill comes right after the passes (no wait): what instance 1's journal had not committed yet is counted.
  it::Pg pg;
  std::vector<std::string> hexes;
  for (const auto& k : keys) hexes.push_back(it::Sha256Hex(k));
  sg[0]->Kill();
  const auto rows_at_kill = pg.CountDigests(hexes);
  ASSERT_TRUE(WaitHaproxyUp("sg_filter", 2, 10s));
  const auto third = SendOnce(keys, port, 6);
  const auto rows = pg.CountDigests(hexes);
  Report("lb-filter: after SIGKILL of instance 1 (out of HAProxy), the same keys again: 201/200/other " +
         std::to_string(third[0]) + "/" + std::to_string(third[1]) + "/" + std::to_string(third[2]) +
         " -> double counts " + std::to_string(third[0]) + " = " +
         std::to_string(100.0 * static_cast<double>(third[0]) / kKeys).substr(0, 4) +
         " % of the keys (keys not yet in PostgreSQL right after the kill: " +
         std::to_string(kKeys - rows_at_kill) + "); rows in PostgreSQL " + std::to_string(rows) + " of " +
         std::to_string(kKeys));
  EXPECT_EQ(rows, kKeys) << "a key answered new is missing (write-behind lost)";
  // Issue 42: not even the keys its journal had not committed: the survivors wait for its watermark, then 503.
  EXPECT_EQ(third[0], 0u) << "a key the dead instance answered new was answered new again";
  // The dead instance does not come back: the operator retires it (an explicit loss window; nothing was
  // uncommitted here), and the survivors decide new keys again — the Idempotency-Key retries below are replayed.
  const auto retire_at = Clock::now();
  EXPECT_EQ(it::RetireInstance(sg[0]->journal_dir()), 0);
  const auto after_retire = SendOnce({it::UniqueKey("lb-filter-after-retire")}, port, 1);
  Report("lb-filter: instance 1 retired (scangate --retire-instance) " +
         std::to_string(static_cast<long>(Ms(Clock::now() - retire_at))) + " ms before a fresh key was answered " +
         std::to_string(after_retire[0] == 1 ? 201 : 0));
  std::this_thread::sleep_for(500ms);  // the survivors' next polls read the retirement
  const auto idem_retry = SendOnce(idem_keys, port, 6, &idems);
  const auto idem_second = SendOnce(idem_keys, port, 6);
  Report("lb-filter: " + std::to_string(kIdemKeys) + " keys scanned with an Idempotency-Key before the kill, retried "
         "after it with the same one: 201/200/other " + std::to_string(idem_retry[0]) + "/" +
         std::to_string(idem_retry[1]) + "/" + std::to_string(idem_retry[2]) + " (replayed " +
         std::to_string(idem_retry[3]) + "); then scanned again without one: 201/200/other " +
         std::to_string(idem_second[0]) + "/" + std::to_string(idem_second[1]) + "/" + std::to_string(idem_second[2]));
  EXPECT_EQ(idem_retry[0], static_cast<std::uint64_t>(kIdemKeys)) << "a retry was not answered its first verdict";
  EXPECT_EQ(idem_retry[3], static_cast<std::uint64_t>(kIdemKeys));
  EXPECT_EQ(idem_second[1], static_cast<std::uint64_t>(kIdemKeys)) << "a second scan must be a duplicate";
  Cluster("haproxy-stop", false);
}

}  // namespace
}  // namespace scangate::ha
