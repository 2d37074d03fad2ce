// Tests storage/clock/pg_clock.h: the bounds of a server's clock from round trips, against a simulated server
// clock — the bounds always contain it (at the reading, later, and across readings), a tighter reading narrows
// them, a reading that contradicts them (a step of the server's clock) replaces them and is reported as a step
// beyond the tolerance, bounds carry their clock epoch and are never mixed with another's, Forget() empties them, and
// the rate allowance grows with the age of the reading, and readers on other threads never see a torn or wrong
// pair of bounds while readings are recorded (also run under ThreadSanitizer: scripts/test.sh). Pure: no PostgreSQL.
#include "storage/clock/pg_clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

const Steady::time_point kT0 = Steady::time_point(100s);
constexpr std::int64_t kServerAtT0 = 1'800'000'000'000'000;  // µs since the epoch

// The server's clock at steady time `t`, running `ppm` fast (positive) or slow.
std::int64_t Server(Steady::time_point t, double ppm = 0) {
  const double us = std::chrono::duration<double, std::micro>(t - kT0).count();
  return kServerAtT0 + static_cast<std::int64_t>(us * (1 + ppm * 1e-6));
}

// A reading sent at `sent`, read by the server `server_delay` later, answered `rtt` after `sent`.
PgClockReading Read(Steady::time_point sent, std::chrono::microseconds server_delay, std::chrono::microseconds rtt,
                    double ppm = 0) {
  return {Server(sent + server_delay, ppm), sent, sent + rtt};
}

TEST(PgClock, NoBoundsBeforeTheFirstReadingAndAfterForget) {
  PgClock c;
  EXPECT_FALSE(c.LowerUs(kT0));
  EXPECT_FALSE(c.UpperUs(kT0));
  c.Record(Read(kT0, 300us, 1000us));
  EXPECT_TRUE(c.LowerUs(kT0 + 1s));
  c.Forget();
  EXPECT_FALSE(c.LowerUs(kT0 + 1s));
  EXPECT_FALSE(c.UpperUs(kT0 + 1s));
}

TEST(PgClock, BoundsContainTheServersClockAndWidenWithAge) {
  for (const double ppm : {-400.0, 0.0, 400.0}) {
    SCOPED_TRACE(ppm);
    PgClock c;
    c.Record(Read(kT0, 200us, 1000us, ppm));
    for (const auto later : {1ms, 1000ms, 60'000ms, 600'000ms}) {
      const auto t = kT0 + 1000us + later;
      ASSERT_TRUE(c.LowerUs(t) && c.UpperUs(t));
      EXPECT_LE(*c.LowerUs(t), Server(t, ppm));
      EXPECT_GE(*c.UpperUs(t), Server(t, ppm));
    }
    // Width: the round trip, plus the rate allowance both ways (1 ms per second of age).
    const auto t = kT0 + 1000us + 10s;
    EXPECT_LE(*c.UpperUs(t) - *c.LowerUs(t), 1000 + 2 * 5000 + 2);
    // Also before the reading was taken (a reader that read the steady clock first).
    EXPECT_LE(*c.LowerUs(kT0 - 1ms), Server(kT0 - 1ms, ppm));
    EXPECT_GE(*c.UpperUs(kT0 - 1ms), Server(kT0 - 1ms, ppm));
  }
}

TEST(PgClock, ATighterReadingNarrowsAndALooseOneKeepsTheTightBounds) {
  PgClock c;
  c.Record(Read(kT0, 5ms, 10ms));  // a slow round trip: 10 ms wide
  const auto t1 = kT0 + 1s;
  c.Record(Read(t1, 100us, 200us));  // a quick one
  EXPECT_LE(*c.UpperUs(t1 + 200us) - *c.LowerUs(t1 + 200us), 201);
  const auto t2 = t1 + 1s;
  c.Record(Read(t2, 20ms, 40ms));  // slow again: the quick one, aged 1 s (2 ms wider), is still tighter
  const auto t = t2 + 40ms;
  EXPECT_LE(*c.UpperUs(t) - *c.LowerUs(t), 200 + 2 * 1040 + 2);
  EXPECT_LE(*c.LowerUs(t), Server(t));
  EXPECT_GE(*c.UpperUs(t), Server(t));
}

TEST(PgClock, AReadingThatContradictsTheBoundsReplacesThem) {
  PgClock c;
  c.Record(Read(kT0, 100us, 200us));
  const auto t = kT0 + 1s;
  // The server's clock stepped back 5 s (or another server answers now): the old bounds cannot hold it.
  const PgClockReading stepped{Server(t + 100us) - 5'000'000, t, t + 200us};
  c.Record(stepped);
  c.AcceptStep(0);  // a step (PgClock::AStepIsReportedAndCounted): taken once its caller has recorded it
  EXPECT_LE(*c.LowerUs(t + 200us), stepped.server_us);
  EXPECT_GE(*c.UpperUs(t + 200us), stepped.server_us);
  EXPECT_LT(*c.UpperUs(t + 200us), Server(t) - 4'000'000);
}

// Issue 55: a reading outside the bounds of its own epoch by more than kStepTolerance is a step, reported with its
// size and sign and counted; one within the tolerance (jitter) or within the bounds is not; the bounds are then the
// new clock's alone.
TEST(PgClock, AStepIsReportedAndCounted) {
  for (const std::int64_t step_us : {-60'000'000LL, 60'000'000LL, -20'000LL}) {
    SCOPED_TRACE(step_us);
    PgClock c;
    EXPECT_FALSE(c.Record(Read(kT0, 100us, 200us)));
    const auto t = kT0 + 1s;
    EXPECT_FALSE(c.Record(Read(t, 100us, 200us))) << "a reading inside the bounds is no step";
    const auto t2 = t + 1s;
    const std::optional<PgClockStep> step = c.Record({Server(t2 + 100us) + step_us, t2, t2 + 200us});
    ASSERT_TRUE(step);
    EXPECT_NEAR(step->seconds, static_cast<double>(step_us) * 1e-6, 0.002);
    EXPECT_EQ(step->from_epoch, 0) << "a step within the reading's own epoch";
    // Where the rows divide (sql/017): forward, at the old clock's most at the reading; back, at the new clock's
    // least at the last reading of the old one (t), below every row the new clock stamps.
    if (step_us > 0) {
      EXPECT_GE(step->before_us, Server(t2 + 200us));
      EXPECT_LT(step->before_us, Server(t2 + 200us) + 5'000);
    } else {
      EXPECT_LE(step->before_us, Server(t) + step_us);
      EXPECT_GT(step->before_us, Server(t) + step_us - 5'000);
    }
    EXPECT_EQ(c.steps(), 1u);
    // Until AcceptStep the bounds are the old clock's: a statement guarded by GuardUs refuses the new clock's now()
    // after a step forward (nothing has recorded the step yet); then the new reading's.
    EXPECT_EQ(*c.GuardUs(t2 + 200us) < Server(t2 + 100us) + step_us, step_us > 0);
    EXPECT_GE(*c.GuardUs(t2 + 200us), Server(t2 + 200us) + 999'000) << "the guard's slack";
    c.AcceptStep(0);
    EXPECT_GE(*c.GuardUs(t2 + 200us), Server(t2 + 100us) + step_us + 999'000);
    EXPECT_LE(*c.LowerUs(t2 + 200us), Server(t2 + 100us) + step_us);
    EXPECT_GE(*c.UpperUs(t2 + 200us), Server(t2 + 100us) + step_us);
  }
  PgClock c;
  c.Record(Read(kT0, 100us, 200us));
  const auto t = kT0 + 1s;
  // 3 ms outside (a reading a little off the held bounds, say a clock source's jitter): replaced, not a step.
  EXPECT_FALSE(c.Record({Server(t + 100us) - 3'000 - 600, t, t + 200us}));
  EXPECT_EQ(c.steps(), 0u);
}

// Bounds carry the epoch they were established under: a reading of a later epoch (the server restarted or failed
// over, another instance saw a step) replaces them without being intersected with them, and is compared with them: a
// step across the two epochs is reported with the epoch it came from (the caller records its size, sql/017, then
// takes the reading: AcceptStep); one of the same clock is none. A reading of an earlier epoch than the bounds' is
// neither. AcceptStep() takes a step's reading under the epoch the step opened, and nothing without one pending.
TEST(PgClock, BoundsCarryTheirEpoch) {
  PgClock c;
  EXPECT_EQ(c.epoch(), -1);
  c.Record({Server(kT0 + 100us), kT0, kT0 + 200us, 3});
  EXPECT_EQ(c.epoch(), 3);
  const auto t = kT0 + 1s;
  // 60 s back under the next epoch: the new clock, a step from epoch 3 (another party already opened epoch 4).
  const std::optional<PgClockStep> step = c.Record({Server(t + 100us) - 60'000'000, t, t + 200us, 4});
  ASSERT_TRUE(step) << "a step across two epochs went unreported";
  EXPECT_NEAR(step->seconds, -60.0, 0.002);
  EXPECT_EQ(step->from_epoch, 3);
  EXPECT_EQ(c.epoch(), 3) << "a step's reading taken before AcceptStep";
  c.AcceptStep(4);
  EXPECT_EQ(c.epoch(), 4);
  EXPECT_EQ(c.steps(), 1u);
  EXPECT_LT(*c.UpperUs(t + 200us), Server(t) - 59'000'000) << "bounds of two epochs were mixed";
  // The server restarted on the same clock (epoch 5): no step, the bounds are the new reading's (not intersected).
  const auto t2 = t + 1s;
  EXPECT_FALSE(c.Record({Server(t2 + 100us) - 60'000'000, t2, t2 + 200us, 5}));
  EXPECT_EQ(c.epoch(), 5);
  // A late reading of an older epoch: neither a step nor mixed in; it replaces the bounds (as before).
  const auto t3 = t2 + 1s;
  EXPECT_FALSE(c.Record({Server(t3 + 100us), t3, t3 + 200us, 4}));
  EXPECT_EQ(c.steps(), 1u);
  c.AcceptStep(9);
  EXPECT_EQ(c.epoch(), 4) << "AcceptStep without a step pending moved the bounds";
  c.Forget();
  EXPECT_EQ(c.epoch(), -1);
}

// A step seen by another party (the watermark connection): no bounds until the next reading, but the old ones guard
// (GuardUs) and measure the step in that reading, which is reported and taken only by AcceptStep. Forget drops all.
TEST(PgClock, ASuspendedClockStillGuardsAndMeasuresTheStep) {
  PgClock c;
  c.Record({Server(kT0 + 100us), kT0, kT0 + 200us, 1});
  const auto t = kT0 + 500ms;
  c.SuspendForStep();
  EXPECT_FALSE(c.LowerUs(t));
  EXPECT_FALSE(c.UpperUs(t));
  ASSERT_TRUE(c.GuardUs(t)) << "a suspended clock's guard is the old bounds'";
  EXPECT_LT(*c.GuardUs(t), Server(t) + 1'010'000);
  const auto t2 = kT0 + 1s;
  const std::optional<PgClockStep> step = c.Record({Server(t2 + 100us) + 30'000'000, t2, t2 + 200us, 2});
  ASSERT_TRUE(step) << "the step was not measured against the bounds set aside";
  EXPECT_NEAR(step->seconds, 30.0, 0.002);
  EXPECT_EQ(step->from_epoch, 1);
  EXPECT_LT(*c.GuardUs(t2 + 200us), Server(t2) + 2'000'000) << "the guard moved before the step was accepted";
  c.AcceptStep(2);
  EXPECT_EQ(c.epoch(), 2);
  EXPECT_GT(*c.GuardUs(t2 + 200us), Server(t2) + 30'000'000);
  c.SuspendForStep();
  c.Forget();
  EXPECT_FALSE(c.GuardUs(t2 + 300us)) << "Forget kept the bounds set aside";
}

TEST(PgClock, ClocksPickTheDigestsPartition) {
  PgClocks clocks(4);
  ASSERT_EQ(clocks.size(), 4u);
  clocks.at(2).Record(Read(kT0, 100us, 200us));
  int with_bounds = 0;
  for (int i = 0; i < 64; ++i) {
    Digest d{};
    d[4] = static_cast<std::uint8_t>(i * 37);
    d[7] = static_cast<std::uint8_t>(i);
    if (clocks.Of(d).LowerUs(kT0 + 1s)) ++with_bounds;
  }
  EXPECT_GT(with_bounds, 0);
  EXPECT_LT(with_bounds, 64);
}

// Readers on two threads while a writer records a reading a (simulated) second: every pair of bounds they load
// contains the server's clock at the time they asked for. A torn read, mixing one reading's time with another's
// bounds, is off by a second and would not.
TEST(PgClock, ConcurrentReadersSeeWholeReadings) {
  PgClock c;
  c.Record(Read(kT0, 100us, 200us));
  std::atomic<int> step{0};
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        const auto t = kT0 + std::chrono::seconds(step.load()) + 1ms;
        const auto lo = c.LowerUs(t), hi = c.UpperUs(t);
        if (!lo || !hi || *lo > Server(t) || *hi < Server(t)) wrong.fetch_add(1);
      }
    });
  }
  for (int i = 1; i < 20000; ++i) {
    c.Record(Read(kT0 + std::chrono::seconds(i), 100us, 200us));
    step.store(i);
  }
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace scangate::storage
