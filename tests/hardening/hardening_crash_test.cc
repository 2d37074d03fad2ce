// Crash under load (--ack=commit): 12 keep-alive clients stream fresh keys and repeats; scangate is killed
// with SIGKILL mid-run and restarted on a new port (two cycles) while the stream continues, retransmitting
// every key whose request got no answer. Promises checked across the whole run: every key answered 201 or
// 200 is in PostgreSQL, no key is answered 201 twice, and a 200 is only ever given for a key sent earlier.
// With Idempotency-Key on every scan (issue 34), also: no retransmitted scan whose earlier attempt was cut off is
// ever told `duplicate` — each such key ends with exactly one 201 answered to its terminal.
#include <gtest/gtest.h>

#include <thread>

#include "util.h"

namespace scangate::hardening {
namespace {

constexpr int kThreads = 12;
constexpr int kCrashes = 2;                             // kill + restart cycles in one run
constexpr std::uint64_t kVerdictsPerPhase = 1500;       // enough traffic that each kill lands mid-stream
constexpr auto kPhaseBound = std::chrono::seconds(15);  // bounds each phase on a slow machine
constexpr auto kDrainBound = std::chrono::seconds(30);

void WaitVerdicts(const LoadGenerator& load, std::uint64_t target) {
  const auto deadline = Clock::now() + kPhaseBound;
  while (load.verdicts() < target && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::uint64_t WarmStartKeys(const it::ScangateProcess& p) {
  std::uint64_t keys = 0;
  for (const auto& e : p.LogEvents("warm_start")) {
    if (const auto* k = e.if_contains("keys"); k != nullptr && k->is_number()) keys = k->to_number<std::uint64_t>();
  }
  return keys;
}

// SIGKILL mid-run (twice), restart on a new port: exactly-once verdicts and durability of every 201 hold.
void SigkillUnderLoad(bool idempotency_keys) {
  Ledger ledger;
  std::vector<std::unique_ptr<it::ScangateProcess>> instances;
  instances.push_back(std::make_unique<it::ScangateProcess>(std::vector<std::string>{"--ack=commit"}));
  ASSERT_TRUE(instances.back()->Start());

  LoadOptions options;
  options.threads = kThreads;
  options.repeat_fraction = 0.3;
  options.key_tag = "crash";
  options.idempotency_keys = idempotency_keys;
  LoadGenerator load(ledger, options, {instances.back()->port()});
  const auto run_start = Clock::now();
  load.Start();
  for (int crash = 0; crash < kCrashes; ++crash) {
    WaitVerdicts(load, load.verdicts() + kVerdictsPerPhase);
    const std::uint64_t verdicts_at_kill = load.verdicts();
    const std::uint64_t errors_before = ledger.CountOutcome(AttemptOutcome::kConnectionError);
    const std::uint16_t old_port = instances.back()->port();
    instances.back()->Kill();  // SIGKILL: no flush, no goodbye
    const auto killed_at = Clock::now();
    instances.push_back(std::make_unique<it::ScangateProcess>(std::vector<std::string>{"--ack=commit"}));
    ASSERT_TRUE(instances.back()->Start());
    const auto restart_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
    load.SetPorts({instances.back()->port()});
    Report("crash #" + std::to_string(crash + 1) + ": SIGKILL at " + std::to_string(verdicts_at_kill) +
           " verdicts, port " + std::to_string(old_port) + " -> " + std::to_string(instances.back()->port()) +
           ", restart until ready " + std::to_string(restart_ms) + " ms, warm_start keys " +
           std::to_string(WarmStartKeys(*instances.back())) + ", requests cut off so far " +
           std::to_string(ledger.CountOutcome(AttemptOutcome::kConnectionError) - errors_before));
  }
  WaitVerdicts(load, load.verdicts() + kVerdictsPerPhase);
  const std::size_t still_pending = load.Drain(kDrainBound);
  load.Stop();
  const auto run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - run_start).count();

  it::Pg pg;
  const LedgerCheck check = ledger.Check(pg);
  Report("crash: " + std::to_string(kThreads) + " threads, " + std::to_string(kCrashes) + " crashes, run " +
         std::to_string(run_ms) + " ms, requests " + std::to_string(load.requests()) + ", retransmissions " +
         std::to_string(load.retransmissions()) + ", failed connects while down " +
         std::to_string(load.connect_failures()) + ", pending after drain " + std::to_string(still_pending) +
         (idempotency_keys ? ", retries replayed " + std::to_string(load.replays()) : std::string()));
  Report("crash: " + check.Summary());
  for (const auto& e : check.examples) Report("crash: violation example: " + e);

  EXPECT_TRUE(check.ok()) << check.Summary();
  EXPECT_EQ(check.keys_new_twice, 0u) << "a key was answered 201 twice";
  EXPECT_EQ(check.duplicates_without_witness, 0u) << "a 200 was given for a key never sent before";
  EXPECT_EQ(check.verdict_keys_missing_in_pg, 0u) << "an answered key is not in PostgreSQL";
  EXPECT_EQ(still_pending, 0u) << "retransmissions did not all get a verdict";
  EXPECT_EQ(check.keys_without_verdict, 0u);
  // The test only means something if the kills hit requests in flight and they were retransmitted.
  EXPECT_GT(check.connection_errors, 0u) << "the crashes hit no request";
  EXPECT_GT(load.retransmissions(), 0u);
  EXPECT_GT(check.answered_duplicate, 0u) << "no repeat was answered 200";
  if (idempotency_keys) {
    EXPECT_EQ(check.ambiguous_then_duplicate, 0u) << "a retried scan was told duplicate of its own first attempt";
    EXPECT_GT(check.ambiguous_then_new, 0u) << "no cut-off scan was retried";
  }
}

TEST(HardeningCrash, SigkillUnderLoadKeepsVerdictsExactlyOnce) { SigkillUnderLoad(false); }

TEST(HardeningCrash, SigkillUnderLoadWithIdempotencyKeysAnswersEveryRetryItsFirstVerdict) { SigkillUnderLoad(true); }

it::HttpResponse Verdict(int status, const std::string& key, const std::string& digest = {}) {
  it::HttpResponse r;
  r.status = status;
  r.body = std::string("{\"verdict\":\"") + (status == 201 ? "new" : "duplicate") + "\",\"digest\":\"" +
           (digest.empty() ? it::Sha256Hex(key) : digest) + "\",\"via\":\"exact\"" +
           (status == 200 ? ",\"first_seen\":\"2026-01-01T00:00:00.000000Z\"" : "") + "}";
  return r;
}

it::HttpResponse Problem503(std::string_view type) {
  it::HttpResponse r;
  r.status = 503;
  r.body = std::string("{\"type\":\"") + std::string(type) + "\",\"title\":\"t\",\"status\":503,\"detail\":\"d\"}";
  return r;
}

// The checker itself: fabricated histories with each kind of violation are caught, so the tests above
// can fail when the server breaks a promise.
TEST(HardeningLedger, CheckerDetectsEachViolation) {
  {
    it::ScangateProcess migrate;  // applies the migrations: scan_keys exists for the checker's queries
    ASSERT_TRUE(migrate.Start());
    ASSERT_EQ(migrate.Stop(), 0);
  }
  Ledger l;
  const auto t0 = Clock::now();
  auto at = [&](int ms) { return t0 + std::chrono::milliseconds(ms); };
  const std::string twice = it::UniqueKey("self-twice"), lone_dup = it::UniqueKey("self-lonedup"),
                    early_dup = it::UniqueKey("self-earlydup"), lost = it::UniqueKey("self-lost"),
                    bad = it::UniqueKey("self-bad"), odd = it::UniqueKey("self-odd");
  auto r201 = Verdict(201, twice);
  l.Record(twice, &r201, at(0), at(1), 0);
  l.Record(twice, &r201, at(2), at(3), 0);  // violation: 201 twice
  auto d = Verdict(200, lone_dup);
  l.Record(lone_dup, &d, at(0), at(1), 0);  // violation: 200 for a key never sent before
  auto e200 = Verdict(200, early_dup), e201 = Verdict(201, early_dup);
  l.Record(early_dup, &e200, at(0), at(5), 0);  // violation: the 200 ended before the only 201 started
  l.Record(early_dup, &e201, at(10), at(20), 0);
  auto l200 = Verdict(200, lost);
  l.Record(lost, nullptr, at(0), at(1), 0, "connection reset");  // fine: ack lost, then 200
  l.Record(lost, &l200, at(2), at(3), 1);
  auto wrong = Verdict(201, bad, std::string(64, '0'));
  l.Record(bad, &wrong, at(0), at(1), 0);  // violation: wrong digest in the body
  it::HttpResponse r500;
  r500.status = 500;
  l.Record(odd, &r500, at(0), at(1), 0);  // violation: a status other than 201/200/503

  // Strict 503s: "unavailable" recorded nothing (definite); only "outcome-unknown" may have recorded the key.
  const std::string definite_dup = it::UniqueKey("self-definite-dup"), unknown_dup = it::UniqueKey("self-unknown-dup"),
                    recorded503 = it::UniqueKey("self-recorded503"), absent503 = it::UniqueKey("self-absent503"),
                    untyped503 = it::UniqueKey("self-untyped503");
  const auto unavailable = Problem503(kProblemUnavailable), unknown = Problem503(kProblemOutcomeUnknown);
  auto dd200 = Verdict(200, definite_dup), ud200 = Verdict(200, unknown_dup);
  l.Record(definite_dup, &unavailable, at(0), at(1), 0);
  l.Record(definite_dup, &dd200, at(2), at(3), 0);  // violation: the definite 503 recorded the key after all
  l.Record(unknown_dup, &unknown, at(0), at(1), 0);
  l.Record(unknown_dup, &ud200, at(2), at(3), 0);  // fine: the outcome-unknown attempt committed
  l.Record(recorded503, &unavailable, at(0), at(1), 0);  // violation: only definite 503s, yet in PostgreSQL
  l.Record(absent503, &unavailable, at(0), at(1), 0);    // fine: not in PostgreSQL
  it::HttpResponse bare503;
  bare503.status = 503;
  bare503.body = "overloaded";
  l.Record(untyped503, &bare503, at(0), at(1), 0);  // violation: a 503 that is neither problem type

  it::Pg pg;
  for (const std::string* k : {&unknown_dup, &recorded503}) {
    pqxx::nontransaction tx(pg.conn());
    tx.exec_params("INSERT INTO scan_keys (digest) VALUES (scangate_stored_digest(decode($1, 'hex'))) ON CONFLICT DO NOTHING",
                   it::Sha256Hex(*k));
  }
  const LedgerCheck c = l.Check(pg);  // of these keys only unknown_dup and recorded503 are in PostgreSQL
  Report("ledger self-test: " + c.Summary());
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.keys_new_twice, 1u);
  EXPECT_EQ(c.duplicates_without_witness, 3u);   // lone_dup, early_dup, definite_dup
  EXPECT_EQ(c.duplicate_after_definite_503, 1u);  // definite_dup
  EXPECT_EQ(c.definitive_keys_without_new, 2u);  // lone_dup, definite_dup
  EXPECT_EQ(c.ambiguous_then_duplicate, 2u);     // lost, unknown_dup
  EXPECT_EQ(c.bad_bodies, 1u);
  EXPECT_EQ(c.other, 2u);  // odd (500), untyped503
  EXPECT_EQ(c.unavailable, 3u);  // definite_dup, recorded503, absent503
  EXPECT_EQ(c.outcome_unknown, 1u);
  EXPECT_EQ(c.definite_503_keys_in_pg, 1u);      // recorded503
  EXPECT_EQ(c.verdict_keys_missing_in_pg, 6u);   // all verdict keys but unknown_dup
  EXPECT_EQ(c.keys_without_verdict, 4u);         // odd, recorded503, absent503, untyped503
}

}  // namespace
}  // namespace scangate::hardening
