// Unit tests of storage/peers/peer_view.h, the reader's side of the peers' argument, on hand-built samples (no
// PostgreSQL): a request is covered iff it arrived no later than sent + W - (the worst running peer's lag); this
// instance's own row, stopped and retired rows do not count; nothing is covered before the first sample, nor (for a
// journal owner) before its own id is known; a malformed sample covers nothing new; a retirement is counted; a
// running peer of another clock epoch covers nothing.
#include "storage/peers/peer_view.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::storage {
namespace {

constexpr std::int64_t kMs = 1'000'000;                  // ns
constexpr auto kWindow = std::chrono::milliseconds(2000);  // W
const std::string kSelf = "00000000-0000-4000-8000-000000000001";
const std::string kPeer = "00000000-0000-4000-8000-000000000002";
const std::string kIncarnation = "00000000-0000-4000-8000-0000000000a1";  // this process's (issue 55)

// `clock`: the row's covered_until is of the database's current clock epoch (sql/016); nullptr: the field absent.
std::string Row(const std::string& id, const std::string& state, std::int64_t lag_ms,
                const std::string& incarnation = kIncarnation, const char* clock = "true") {
  return R"({"id":")" + id + R"(","state":")" + state + R"(","lag_us":)" + std::to_string(lag_ms * 1000) +
         R"(,"age_us":10000,"uncommitted":3,"host":"h","pid":7,"incarnation":")" + incarnation + R"(")" +
         (clock == nullptr ? std::string() : std::string(R"(,"clock":)") + clock) + "}";
}

struct Silent final : LogSink {
  void Write(LogSeverity, std::string_view, boost::json::object) override {}
};

PeerView View(bool await_self) { return PeerView(await_self, kWindow, "", std::make_shared<Silent>()); }

TEST(PeerView, NothingIsCoveredBeforeTheFirstSample) {
  PeerView v = View(false);
  EXPECT_FALSE(v.sampled());
  EXPECT_FALSE(v.Covered(1));
}

// No rows: covered up to sent + W (a peer registered after the sample answered nothing before it: the argument, 4.).
TEST(PeerView, NoPeersCoverTheWindowAfterTheSample) {
  PeerView v = View(false);
  const std::int64_t sent = 1'000 * kMs;
  v.Apply("[]", sent);
  EXPECT_TRUE(v.sampled());
  EXPECT_TRUE(v.Covered(sent + 2000 * kMs));
  EXPECT_FALSE(v.Covered(sent + 2000 * kMs + 1));
}

// The worst running peer's lag shortens coverage by as much; stopped and retired rows, and this instance's own, do
// not.
TEST(PeerView, TheWorstRunningPeerBoundsCoverage) {
  PeerView v = View(true);
  const std::int64_t sent = 5'000 * kMs;
  v.SetSelf(kSelf, kIncarnation);
  v.Apply("[" + Row(kSelf, "running", 60'000) + "," + Row(kPeer, "running", 1500) + "," +
              Row("00000000-0000-4000-8000-000000000003", "stopped", 90'000) + "," +
              Row("00000000-0000-4000-8000-000000000004", "retired", 90'000) + "]",
          sent);
  EXPECT_TRUE(v.Covered(sent + 500 * kMs));
  EXPECT_FALSE(v.Covered(sent + 500 * kMs + 1)) << "coverage did not account for the peer's lag";
  const PeerViewStats s = v.Stats(sent);
  EXPECT_EQ(s.peers.size(), 3u) << "its own row is not a peer";
  EXPECT_EQ(s.lagging, 0u);
  // A peer lagging past the window covers nothing that arrives after the sample.
  v.Apply("[" + Row(kPeer, "running", 2500) + "]", sent + 100 * kMs);
  EXPECT_FALSE(v.Covered(sent + 100 * kMs));
  EXPECT_EQ(v.Stats(sent).lagging, 1u);
  EXPECT_NE(v.Lagging(sent + 100 * kMs).find(kPeer), std::string::npos) << v.Lagging(sent + 100 * kMs);
}

// A journal owner ignores samples until its own id is known: its own row (from a run before a crash, lagging) would
// otherwise pass for a lagging peer — or, unknown, be taken for nothing.
TEST(PeerView, AJournalOwnerWaitsForItsOwnId) {
  PeerView v = View(true);
  v.Apply("[" + Row(kSelf, "running", 60'000) + "]", 1'000 * kMs);
  EXPECT_FALSE(v.sampled());
  v.SetSelf(kSelf, kIncarnation);
  v.Apply("[" + Row(kSelf, "running", 60'000) + "]", 1'000 * kMs);
  EXPECT_TRUE(v.Covered(1'000 * kMs));
}

// Issue 55: a row of this instance's id held by another process (a clone, or the process that took the row over
// while this one's lease had lapsed) is a peer: its lag bounds coverage. Only id and incarnation together are self.
TEST(PeerView, ItsIdUnderAnotherIncarnationIsAPeer) {
  PeerView v = View(true);
  const std::int64_t sent = 5'000 * kMs;
  v.SetSelf(kSelf, kIncarnation);
  v.Apply("[" + Row(kSelf, "running", 2500, "00000000-0000-4000-8000-0000000000b2") + "]", sent);
  EXPECT_FALSE(v.Covered(sent)) << "another incarnation's lagging row was taken for this process's own";
  EXPECT_EQ(v.Stats(sent).peers.size(), 1u);
  v.Apply("[" + Row(kSelf, "running", 2500) + "]", sent);
  EXPECT_TRUE(v.Covered(sent)) << "its own row (id and incarnation) is not a peer";
}

// Issue 55: a running peer whose covered_until is of another clock epoch (PostgreSQL's clock stepped, or the server
// restarted, since it was written) covers nothing — even with a lag that looks small or negative (a step back makes
// a stale value look recent) — until it publishes under the current epoch; a row without the field is not trusted
// either. Stopped and retired rows of another epoch do not matter.
TEST(PeerView, APeerOfAnotherClockEpochCoversNothing) {
  PeerView v = View(true);
  const std::int64_t sent = 5'000 * kMs;
  v.SetSelf(kSelf, kIncarnation);
  v.Apply("[" + Row(kPeer, "running", -60'000, kIncarnation, "false") + "]", sent);
  EXPECT_TRUE(v.sampled());
  EXPECT_FALSE(v.Covered(1'000 * kMs)) << "a stale epoch's watermark covered a request";
  EXPECT_EQ(v.Stats(sent).lagging, 1u);
  EXPECT_NE(v.Lagging(sent).find("clock epoch"), std::string::npos) << v.Lagging(sent);
  v.Apply("[" + Row(kPeer, "running", 100, kIncarnation, nullptr) + "]", sent + 50 * kMs);
  EXPECT_FALSE(v.Covered(sent)) << "a row that does not say its epoch is current was trusted";
  v.Apply("[" + Row(kPeer, "running", 100) + "]", sent + 100 * kMs);
  EXPECT_TRUE(v.Covered(sent + 100 * kMs)) << "republished under the current epoch: covered again";
  v.Apply("[" + Row(kPeer, "stopped", -60'000, kIncarnation, "false") + "," +
              Row(kSelf, "running", 100, kIncarnation, "false") + "]",
          sent + 200 * kMs);
  EXPECT_TRUE(v.Covered(sent + 200 * kMs)) << "a stopped peer's, or its own, epoch held coverage";
}

// A malformed sample changes nothing: the last good one's coverage lapses by itself.
TEST(PeerView, AMalformedSampleCoversNothingNew) {
  PeerView v = View(false);
  v.Apply("[]", 1'000 * kMs);
  v.Apply("{not json", 9'000 * kMs);
  EXPECT_FALSE(v.Covered(9'000 * kMs));
  EXPECT_TRUE(v.Covered(3'000 * kMs));
}

// A running peer seen retired (scangate --retire-instance) is counted once: the operator's explicit loss window.
TEST(PeerView, ARetirementIsCounted) {
  PeerView v = View(false);
  v.Apply("[" + Row(kPeer, "running", 100) + "]", 1'000 * kMs);
  v.Apply("[" + Row(kPeer, "retired", 100) + "]", 1'050 * kMs);
  v.Apply("[" + Row(kPeer, "retired", 100) + "]", 1'100 * kMs);
  EXPECT_EQ(v.Stats(1'100 * kMs).retired_seen, 1u);
  EXPECT_TRUE(v.Covered(1'100 * kMs + 2000 * kMs)) << "a retired peer still bounds coverage";
}

}  // namespace
}  // namespace scangate::storage
