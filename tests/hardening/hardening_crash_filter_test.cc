// Crash under load with --ack=filter and the journal (issue 12): 12 keep-alive clients stream fresh keys and
// repeats; scangate is killed with SIGKILL mid-run and restarted on the same --journal-dir (three cycles),
// the stream continues and every key whose request got no answer is retransmitted. After the load it is
// killed once more and restarted, so every 201 must have survived a kill -9 through the journal's replay.
// Promises checked: every key answered 201 or 200 is in PostgreSQL, no key is answered 201 twice, and no
// first observation is answered 200.
// Negative control: SCANGATE_CRASH_JOURNAL=off runs the same test with --journal=off (in-memory
// write-behind), which is expected to FAIL with acknowledged keys missing / answered new twice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "util.h"

namespace scangate::hardening {
namespace {

constexpr int kThreads = 12;
constexpr int kCrashes = 3;                             // kill + restart cycles under load
constexpr std::uint64_t kVerdictsPerPhase = 1500;       // enough traffic that each kill lands mid-stream
constexpr auto kPhaseBound = std::chrono::seconds(15);  // bounds each phase on a slow machine
constexpr auto kDrainBound = std::chrono::seconds(30);

void WaitVerdicts(const LoadGenerator& load, std::uint64_t target) {
  const auto deadline = Clock::now() + kPhaseBound;
  while (load.verdicts() < target && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

std::uint64_t Recovered(const it::ScangateProcess& p) {
  std::uint64_t n = 0;
  for (const auto& e : p.LogEvents("journal")) {
    if (const auto* k = e.if_contains("recovered"); k != nullptr && k->is_number()) n = k->to_number<std::uint64_t>();
  }
  return n;
}

TEST(HardeningCrashFilter, SigkillUnderLoadLosesNothingAcknowledged) {
  const char* mode = std::getenv("SCANGATE_CRASH_JOURNAL");
  const bool journal = mode == nullptr || std::string(mode) != "off";
  char tmpl[] = "/tmp/scangate-crash-journal.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = std::string(tmpl) + "/journal";
  const std::vector<std::string> flags{"--ack=filter", "--capacity=1000000", "--journal-dir=" + dir,
                                       std::string("--journal=") + (journal ? "on" : "off")};
  Report(std::string("crash-filter: journal ") + (journal ? "on" : "off (negative control)"));

  Ledger ledger;
  std::vector<std::unique_ptr<it::ScangateProcess>> instances;
  instances.push_back(std::make_unique<it::ScangateProcess>(flags));
  ASSERT_TRUE(instances.back()->Start());

  LoadOptions options;
  options.threads = kThreads;
  options.repeat_fraction = 0.3;
  options.key_tag = "crashf";
  LoadGenerator load(ledger, options, {instances.back()->port()});
  const auto run_start = Clock::now();
  load.Start();
  auto crash = [&](const std::string& label) -> ::testing::AssertionResult {
    const std::uint64_t verdicts_at_kill = load.verdicts();
    instances.back()->Kill();  // SIGKILL: no flush, no goodbye
    const auto killed_at = Clock::now();
    instances.push_back(std::make_unique<it::ScangateProcess>(flags));
    auto started = instances.back()->Start();
    if (!started) return started;
    const auto restart_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
    load.SetPorts({instances.back()->port()});
    Report("crash-filter " + label + ": SIGKILL at " + std::to_string(verdicts_at_kill) + " verdicts, restart until ready " +
           std::to_string(restart_ms) + " ms, journal records replayed " + std::to_string(Recovered(*instances.back())));
    return ::testing::AssertionSuccess();
  };
  for (int i = 0; i < kCrashes; ++i) {
    WaitVerdicts(load, load.verdicts() + kVerdictsPerPhase);
    ASSERT_TRUE(crash("#" + std::to_string(i + 1)));
  }
  WaitVerdicts(load, load.verdicts() + kVerdictsPerPhase);
  const std::size_t still_pending = load.Drain(kDrainBound);
  load.Stop();
  // The last 201s were given just now: one more kill -9 + restart, so they too must come from the journal.
  ASSERT_TRUE(crash("final (no load)"));
  const auto run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - run_start).count();

  it::Pg pg;
  const LedgerCheck check = ledger.Check(pg);
  Report("crash-filter: " + std::to_string(kThreads) + " threads, " + std::to_string(kCrashes) + "+1 crashes, run " +
         std::to_string(run_ms) + " ms, requests " + std::to_string(load.requests()) + ", retransmissions " +
         std::to_string(load.retransmissions()) + ", pending after drain " + std::to_string(still_pending));
  Report("crash-filter: " + check.Summary());
  for (const auto& e : check.examples) Report("crash-filter: violation example: " + e);
  EXPECT_EQ(instances.back()->Stop(), 0);

  EXPECT_TRUE(check.ok()) << check.Summary();
  EXPECT_EQ(check.keys_new_twice, 0u) << "a key was answered 201 twice";
  EXPECT_EQ(check.duplicates_without_witness, 0u) << "a 200 was given for a key never sent before";
  EXPECT_EQ(check.definitive_keys_without_new, 0u) << "a first observation was answered 200";
  EXPECT_EQ(check.verdict_keys_missing_in_pg, 0u) << "an acknowledged key is not in PostgreSQL";
  EXPECT_EQ(still_pending, 0u) << "retransmissions did not all get a verdict";
  EXPECT_EQ(check.keys_without_verdict, 0u);
  // The test only means something if the kills hit requests in flight and repeats were answered.
  EXPECT_GT(check.connection_errors, 0u) << "the crashes hit no request";
  EXPECT_GT(load.retransmissions(), 0u);
  EXPECT_GT(check.answered_duplicate, 0u) << "no repeat was answered 200";
  if (!::testing::Test::HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(tmpl, ec);
  }
}

}  // namespace
}  // namespace scangate::hardening
