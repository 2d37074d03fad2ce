// Tests of core/recent_set.h: the bound holds, eviction only forgets (a digest is found with the first_seen
// it was inserted with, or not at all), a digest never inserted is never found, and concurrent inserts and
// lookups keep all of that (RecentSetConcurrency also runs under ThreadSanitizer, scripts/test.sh).
#include "core/recent_set.h"
#include "tests/core/counter_digest.h"

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace scangate {
namespace {

Digest DigestOf(std::uint64_t n, std::uint64_t salt = 0) { return test_support::CounterDigest(n, salt); }

// The first_seen a test inserts for digest n: a pure function, so any hit can be checked.
std::int64_t TimeOf(std::uint64_t n) { return 1'764'000'000'000'000 + static_cast<std::int64_t>(n) * 7; }

// Disabled: nothing is held, nothing is found.
TEST(RecentSet, ZeroCapacityDisables) {
  RecentSet s(0);
  EXPECT_FALSE(s.enabled());
  s.InsertConcurrently(DigestOf(1), TimeOf(1));
  EXPECT_FALSE(s.FindConcurrently(DigestOf(1)).has_value());
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.bound(), 0u);
}

// Inserted digests are found with their first_seen; others are not; a second insert keeps the first time.
TEST(RecentSet, FindsWhatWasInsertedOnly) {
  RecentSet s(1000);
  for (std::uint64_t n = 0; n < 100; ++n) s.InsertConcurrently(DigestOf(n), TimeOf(n));
  for (std::uint64_t n = 0; n < 100; ++n) {
    const auto t = s.FindConcurrently(DigestOf(n));
    ASSERT_TRUE(t.has_value()) << n;
    EXPECT_EQ(*t, TimeOf(n));
  }
  for (std::uint64_t n = 100; n < 10'000; ++n) EXPECT_FALSE(s.FindConcurrently(DigestOf(n)).has_value()) << n;
  s.InsertConcurrently(DigestOf(5), TimeOf(5) + 1'000'000);
  EXPECT_EQ(s.FindConcurrently(DigestOf(5)), TimeOf(5)) << "a later insert replaced the first record";
  EXPECT_EQ(s.size(), 100u);
}

// A digest is known by its stored form (issue 45): the full digest finds what its stored form (as the follower reads it
// back from PostgreSQL) recorded and vice versa, with that record's first_seen; other digests are not found.
TEST(RecentSet, StoredFormIsTheSameKey) {
  RecentSet s(100'000);
  for (std::uint64_t n = 0; n < 2000; ++n) {
    const Digest full = DigestOf(n, 45);
    s.InsertConcurrently(n % 2 == 0 ? StoredDigest(full) : full, TimeOf(n));
  }
  for (std::uint64_t n = 0; n < 2000; ++n) {
    const Digest full = DigestOf(n, 45);
    EXPECT_EQ(s.FindConcurrently(n % 2 == 0 ? full : StoredDigest(full)), TimeOf(n)) << n;
  }
  for (std::uint64_t n = 2000; n < 4000; ++n) EXPECT_FALSE(s.FindConcurrently(DigestOf(n, 45)).has_value()) << n;
  EXPECT_EQ(s.size(), 2000u);
}

// The geometry never exceeds the capacity, over small and large capacities, and loses little of it.
TEST(RecentSet, GeometryWithinCapacity) {
  for (std::uint64_t cap : {1ull, 2ull, 3ull, 10ull, 1000ull, 1791ull, 1792ull, 5000ull, 100'000ull, 1'048'576ull,
                            10'000'000ull, 123'456'789ull}) {
    RecentSet s(cap);
    SCOPED_TRACE(cap);
    EXPECT_LE(s.bound(), std::max<std::uint64_t>(cap, 2));
    if (cap >= 1792) {
      EXPECT_GE(s.shards(), 64u);
      EXPECT_LT(s.shards(), 128u);
      EXPECT_GE(s.bound(), cap - cap / 64) << "more than 1/64 of the capacity lost to rounding";
      const std::uint64_t g = s.generation_capacity();
      EXPECT_EQ(g % 7, 0u);
      EXPECT_EQ((g / 7) & (g / 7 - 1), 0u) << "generation is not 7/8 of a power of two: " << g;
    }
  }
}

// Far more inserts than the capacity: the size never exceeds the bound, every hit carries its own
// first_seen (eviction only forgets), and the most recent keys are still held.
TEST(RecentSet, BoundHoldsAndEvictionOnlyForgets) {
  for (std::uint64_t cap : {10ull, 5000ull, 50'000ull}) {
    SCOPED_TRACE(cap);
    RecentSet s(cap);
    const std::uint64_t total = cap * 20;
    for (std::uint64_t n = 0; n < total; ++n) {
      s.InsertConcurrently(DigestOf(n), TimeOf(n));
      if (n % (cap / 4 + 1) == 0) {
        ASSERT_LE(s.size(), s.bound()) << "after " << n << " inserts";
      }
    }
    EXPECT_LE(s.size(), s.bound());
    EXPECT_GT(s.rotations(), 0u);
    // Checked first (a lookup promotes a hit, so the full scan below reorders the set). Generation rotation
    // keeps at least the last generation's worth per shard: the last inserted key is
    // always held, and so is (nearly) the most recent half of the capacity.
    EXPECT_TRUE(s.FindConcurrently(DigestOf(total - 1)).has_value());
    std::uint64_t recent_held = 0;
    const std::uint64_t recent = s.bound() / 4;
    for (std::uint64_t n = total - recent; n < total; ++n) recent_held += s.FindConcurrently(DigestOf(n)).has_value();
    EXPECT_GE(recent_held * 10, recent * 9) << "too few of the most recent keys held";
    std::uint64_t held = 0;
    for (std::uint64_t n = 0; n < total; ++n) {
      const auto t = s.FindConcurrently(DigestOf(n));
      if (!t) continue;
      ++held;
      ASSERT_EQ(*t, TimeOf(n)) << "digest " << n << " found with another digest's first_seen";
    }
    EXPECT_LE(held, s.bound());
    // Never inserted: never found, however full.
    for (std::uint64_t n = 0; n < 10'000; ++n) EXPECT_FALSE(s.FindConcurrently(DigestOf(n, 99)).has_value());
  }
}

// A digest that keeps being looked up survives rotations (a hit in the previous generation promotes it).
TEST(RecentSet, RepeatedKeySurvivesRotations) {
  RecentSet s(5000);
  const Digest hot = DigestOf(1, 7);
  s.InsertConcurrently(hot, 42);
  for (std::uint64_t n = 0; n < 100'000; ++n) {
    s.InsertConcurrently(DigestOf(n), TimeOf(n));
    if (n % 500 == 0) {
      ASSERT_EQ(s.FindConcurrently(hot), 42) << "after " << n << " inserts";
    }
  }
  EXPECT_GT(s.rotations(), 10u);
}

// Fills the single shard of a RecentSet(10) (one shard, generations of 5) so that the entries inserted before
// are rotated into the previous generation: returns the rotations seen (1 when it worked).
std::uint64_t RotateOnce(RecentSet& s, std::uint64_t salt) {
  EXPECT_EQ(s.shards(), 1u);
  EXPECT_EQ(s.generation_capacity(), 5u);
  const std::uint64_t before = s.rotations();
  // With 1 or 2 entries in the current generation, 5 inserts fill it and rotate it exactly once.
  for (std::uint64_t n = 0; n < 5; ++n) s.InsertConcurrently(DigestOf(n, salt), TimeOf(n));
  return s.rotations() - before;
}

// expired_before_us (the horizon's edge): an entry held in the current generation with a first_seen older than
// it is replaced by the new record; one at or after it keeps its own first_seen (the first record wins).
TEST(RecentSet, ExpiredEntryInCurrentGenerationIsReplaced) {
  RecentSet s(1000);
  const std::int64_t edge = TimeOf(1000);
  const Digest old_key = DigestOf(1, 5), young_key = DigestOf(2, 5), at_edge = DigestOf(3, 5);
  s.InsertConcurrently(old_key, edge - 1);
  s.InsertConcurrently(young_key, edge + 1);
  s.InsertConcurrently(at_edge, edge);
  const std::int64_t now = edge + 3'600'000'000;
  for (const Digest& d : {old_key, young_key, at_edge}) s.InsertConcurrently(d, now, edge);
  EXPECT_EQ(s.FindConcurrently(old_key), now) << "an expired entry kept its first_seen";
  EXPECT_EQ(s.FindConcurrently(young_key), edge + 1) << "an entry within the horizon was replaced";
  EXPECT_EQ(s.FindConcurrently(at_edge), edge) << "an entry exactly at the edge is not older than it";
  EXPECT_EQ(s.size(), 3u);  // replaced in place, not added
  // The replacement is the first record now: a later one within the horizon does not replace it.
  s.InsertConcurrently(old_key, now + 5, edge);
  EXPECT_EQ(s.FindConcurrently(old_key), now);
}

// The same for an entry in the previous generation (refreshed into the current one either way): expired ->
// the new record's first_seen; within the horizon -> its own.
TEST(RecentSet, ExpiredEntryInPreviousGenerationIsReplaced) {
  const std::int64_t edge = TimeOf(1000);
  const std::int64_t now = edge + 3'600'000'000;
  for (const bool expired : {true, false}) {
    SCOPED_TRACE(expired ? "expired" : "within the horizon");
    RecentSet s(10);
    const Digest d = DigestOf(42, 6);
    const std::int64_t first = expired ? edge - 1'000'000 : edge + 1'000'000;
    s.InsertConcurrently(d, first);
    ASSERT_EQ(RotateOnce(s, 7), 1u);  // d is in the previous generation now (not looked up: no promotion)
    s.InsertConcurrently(d, now, edge);
    EXPECT_EQ(s.FindConcurrently(d), expired ? now : first);
    EXPECT_EQ(s.size(), 6u) << "moved to the current generation, not copied";  // 4 previous + f5 + d
    // Held in the current generation now: another rotation keeps it (in the previous one), with that time.
    ASSERT_EQ(RotateOnce(s, 8), 1u);
    EXPECT_EQ(s.FindConcurrently(d), expired ? now : first);
  }
}

// Without expired_before_us (retention off) the first record wins however old it is, in either generation.
TEST(RecentSet, DefaultHorizonKeepsTheFirstRecord) {
  const std::int64_t ancient = -1'000'000'000'000'000;  // 1938: older than any horizon's edge would be
  RecentSet current(1000);
  current.InsertConcurrently(DigestOf(1, 9), ancient);
  current.InsertConcurrently(DigestOf(1, 9), TimeOf(1));
  EXPECT_EQ(current.FindConcurrently(DigestOf(1, 9)), ancient);
  RecentSet previous(10);
  previous.InsertConcurrently(DigestOf(1, 9), ancient);
  ASSERT_EQ(RotateOnce(previous, 10), 1u);
  previous.InsertConcurrently(DigestOf(1, 9), TimeOf(1));
  EXPECT_EQ(previous.FindConcurrently(DigestOf(1, 9)), ancient);
}

// Threads insert disjoint ranges and look up everything (their own, others', never-inserted) at once: every
// hit carries the first_seen of its digest, never-inserted digests are never found, the bound holds.
TEST(RecentSetConcurrency, ConcurrentInsertAndFind) {
  constexpr int kThreads = 4;
  constexpr std::uint64_t kPerThread = 40'000;
  RecentSet s(20'000);  // smaller than what is inserted: rotations run concurrently with lookups
  std::atomic<std::uint64_t> wrong{0}, phantom{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        const std::uint64_t n = static_cast<std::uint64_t>(t) * kPerThread + i;
        s.InsertConcurrently(DigestOf(n), TimeOf(n));
        const std::uint64_t probe = rng() % (kThreads * kPerThread);
        if (const auto f = s.FindConcurrently(DigestOf(probe))) {
          hits.fetch_add(1, std::memory_order_relaxed);  // relaxed: counted only, read after join
          if (*f != TimeOf(probe)) wrong.fetch_add(1, std::memory_order_relaxed);
        }
        if (s.FindConcurrently(DigestOf(probe, 99))) phantom.fetch_add(1, std::memory_order_relaxed);
        if (i % 4096 == 0 && s.size() > s.bound()) wrong.fetch_add(1000000, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(phantom.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  EXPECT_LE(s.size(), s.bound());
}

}  // namespace
}  // namespace scangate
