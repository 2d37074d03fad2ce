// Unit tests of server/http/rate_limit.h: token-bucket arithmetic under an injected clock, Retry-After, keys
// independent of each other, bounded memory with eviction, bounded rejection labels, and concurrent use.
#include "server/http/rate_limit.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>
#include <vector>

namespace scangate::server {
namespace {

using Clock = RateLimiter::Clock;
using Kind = RateLimiter::KeyKind;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

std::uint64_t LimitedOf(const RateLimitStats& s, std::string_view label) {
  for (const auto& [l, n] : s.limited) {
    if (l == label) return n;
  }
  return 0;
}

// A new bucket is full: `burst` requests pass at once, the next is refused until a token has refilled.
TEST(RateLimiter, BurstThenRefill) {
  RateLimiter rl(5, 5);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(rl.Acquire("t1", Kind::kTerminal, kT0).allowed) << i;
  const auto refused = rl.Acquire("t1", Kind::kTerminal, kT0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, seconds(1));  // 0.2 s until a token, rounded up to whole seconds
  EXPECT_FALSE(rl.Acquire("t1", Kind::kTerminal, kT0 + milliseconds(150)).allowed);
  EXPECT_TRUE(rl.Acquire("t1", Kind::kTerminal, kT0 + milliseconds(210)).allowed);   // one token back
  EXPECT_FALSE(rl.Acquire("t1", Kind::kTerminal, kT0 + milliseconds(220)).allowed);
  // Long idle refills to the burst, never beyond it.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(rl.Acquire("t1", Kind::kTerminal, kT0 + seconds(100)).allowed) << i;
  EXPECT_FALSE(rl.Acquire("t1", Kind::kTerminal, kT0 + seconds(100)).allowed);
  EXPECT_EQ(LimitedOf(rl.Stats(), "t1"), 4u);
}

// Charge takes more tokens for work already admitted (a batch's other keys), into debt: the key's next
// requests wait until it has paid, Retry-After says how long; refilling from debt is the same rate. A key not
// held is not charged (nothing created), and another key is unaffected.
TEST(RateLimiter, ChargeGoesIntoDebt) {
  RateLimiter rl(2, 4);
  EXPECT_TRUE(rl.Acquire("t1", Kind::kTerminal, kT0).allowed);  // 3 left
  rl.Charge("t1", 9, kT0);                                        // a batch of 10 keys: -6
  const auto refused = rl.Acquire("t1", Kind::kTerminal, kT0);
  EXPECT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after, seconds(4));  // 7 tokens to one whole token at 2/s: 3.5 s, rounded up
  EXPECT_FALSE(rl.Peek("t1", kT0 + milliseconds(3400)).allowed);
  EXPECT_TRUE(rl.Acquire("t1", Kind::kTerminal, kT0 + milliseconds(3500)).allowed);
  EXPECT_FALSE(rl.Acquire("t1", Kind::kTerminal, kT0 + milliseconds(3500)).allowed);
  EXPECT_TRUE(rl.Acquire("t2", Kind::kTerminal, kT0).allowed) << "another key paid for t1's batch";
  rl.Charge("never-seen", 100, kT0);
  EXPECT_EQ(rl.Stats().buckets, 2u);
  EXPECT_TRUE(rl.Acquire("never-seen", Kind::kTerminal, kT0).allowed);
}

// Retry-After is the time until one token is back, rounded up: slow rates give longer waits.
// Peek says what Acquire would, and takes nothing: an unknown key is allowed; an empty bucket is refused with
// its Retry-After until it refills.
TEST(RateLimiter, PeekTakesNothing) {
  RateLimiter rl(1, 2);
  EXPECT_TRUE(rl.Peek("a", kT0).allowed);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(rl.Peek("a", kT0).allowed);
  EXPECT_TRUE(rl.Acquire("a", Kind::kAddress, kT0).allowed);
  EXPECT_TRUE(rl.Peek("a", kT0).allowed);
  EXPECT_TRUE(rl.Acquire("a", Kind::kAddress, kT0).allowed);
  const auto peeked = rl.Peek("a", kT0);
  EXPECT_FALSE(peeked.allowed);
  EXPECT_EQ(peeked.retry_after, seconds(1));
  EXPECT_FALSE(rl.Peek("a", kT0 + milliseconds(900)).allowed);
  EXPECT_TRUE(rl.Peek("a", kT0 + milliseconds(1000)).allowed);
  EXPECT_TRUE(rl.Acquire("a", Kind::kAddress, kT0 + milliseconds(1000)).allowed);  // Peek left the token there
  EXPECT_TRUE(rl.Stats().limited.empty()) << "a Peek is not a rejection";
}

TEST(RateLimiter, RetryAfterFollowsTheRate) {
  RateLimiter slow(0.1, 1);  // one request per 10 s
  EXPECT_TRUE(slow.Acquire("k", Kind::kTerminal, kT0).allowed);
  EXPECT_EQ(slow.Acquire("k", Kind::kTerminal, kT0).retry_after, seconds(10));
  EXPECT_EQ(slow.Acquire("k", Kind::kTerminal, kT0 + milliseconds(2500)).retry_after, seconds(8));  // 7.5 s left
  // A clock that goes backwards adds nothing (and takes nothing).
  EXPECT_FALSE(slow.Acquire("k", Kind::kTerminal, kT0 - seconds(5)).allowed);
}

// One key flooding never uses another key's tokens.
TEST(RateLimiter, KeysAreIndependent) {
  RateLimiter rl(2, 3);
  for (int i = 0; i < 50; ++i) rl.Acquire("flood", Kind::kTerminal, kT0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rl.Acquire("calm", Kind::kTerminal, kT0).allowed) << i;
  const RateLimitStats s = rl.Stats();
  EXPECT_EQ(LimitedOf(s, "flood"), 47u);
  EXPECT_EQ(LimitedOf(s, "calm"), 0u);
  EXPECT_EQ(s.buckets, 2u);
}

// Client addresses are counted in one aggregate, never as labels.
TEST(RateLimiter, AddressesAreNotLabels) {
  RateLimiter rl(1, 1);
  for (int a = 0; a < 20; ++a) {
    const std::string key = "4" + std::to_string(a);
    EXPECT_TRUE(rl.Acquire(key, Kind::kAddress, kT0).allowed);
    EXPECT_FALSE(rl.Acquire(key, Kind::kAddress, kT0).allowed);
  }
  const RateLimitStats s = rl.Stats();
  ASSERT_EQ(s.limited.size(), 1u);
  EXPECT_EQ(s.limited[0].first, kRateLimitAddressLabel);
  EXPECT_EQ(s.limited[0].second, 20u);
}

// Memory is bounded: past max_buckets, refilled buckets go first (losing nothing), then the least recently
// used; the count never exceeds the bound.
TEST(RateLimiter, BucketsAreBoundedAndIdleOnesEvicted) {
  constexpr std::size_t kMax = kRateLimitShards * 2;
  RateLimiter rl(1, 2, kMax);
  for (int i = 0; i < 5000; ++i) {
    const std::string key = "a" + std::to_string(i);
    rl.Acquire(key, Kind::kAddress, kT0);
    rl.Acquire(key, Kind::kAddress, kT0);  // empty: cannot be dropped for free
    ASSERT_LE(rl.Stats().buckets, kMax) << i;
  }
  EXPECT_GT(rl.Stats().evictions, 0u);  // every bucket was empty: the full shards had to drop busy ones
  // Much later every bucket has refilled: new keys replace them without a lossy eviction.
  const std::uint64_t before = rl.Stats().evictions;
  for (int i = 0; i < 5000; ++i) rl.Acquire("b" + std::to_string(i), Kind::kAddress, kT0 + seconds(60 + i));
  EXPECT_LE(rl.Stats().buckets, kMax);
  EXPECT_EQ(rl.Stats().evictions, before);
}

// Threads hammering their own keys concurrently each get exactly their burst at a fixed time (no lost or
// shared tokens); TSan checks the locking.
TEST(RateLimiter, ConcurrentKeysGetExactlyTheirBurst) {
  RateLimiter rl(1, 100);
  constexpr int kThreads = 4;
  std::vector<int> allowed(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&rl, &allowed, t] {
      for (int i = 0; i < 1000; ++i) {
        allowed[t] += rl.Acquire("t" + std::to_string(t % 2), Kind::kTerminal, kT0).allowed ? 1 : 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(allowed[0] + allowed[2], 100);  // threads 0 and 2 share key t0
  EXPECT_EQ(allowed[1] + allowed[3], 100);
  EXPECT_EQ(LimitedOf(rl.Stats(), "t0") + LimitedOf(rl.Stats(), "t1"), 2u * 2000 - 200);
}

TEST(RateLimiter, RejectsBadSettings) {
  EXPECT_THROW(RateLimiter(0, 1), std::invalid_argument);
  EXPECT_THROW(RateLimiter(1, 0.5), std::invalid_argument);
}

}  // namespace
}  // namespace scangate::server
