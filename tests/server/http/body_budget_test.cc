// Unit tests of server/http/body_budget.h: bytes taken within the limit and given back, large bodies within
// half of it, no limit at 0, the Hold's release on destruction and move, and concurrent takers never
// exceeding the limit.
#include "server/http/body_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

namespace scangate::server {
namespace {

constexpr std::size_t kSmall = 16 * 1024;  // kMaxObserveBodyBytes: above it a body is "large"

TEST(BodyBudget, TakesWithinTheLimitAndGivesBack) {
  BodyBudget b(100 * 1024);
  EXPECT_TRUE(b.Take(10 * 1024, kSmall));
  EXPECT_TRUE(b.Take(16 * 1024, kSmall));
  EXPECT_EQ(b.in_flight(), 26u * 1024);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(b.Take(16 * 1024, kSmall)) << i;  // 90 KiB
  EXPECT_FALSE(b.Take(16 * 1024, kSmall)) << "past the limit";
  EXPECT_TRUE(b.Take(10 * 1024, kSmall)) << "exactly the limit fits";
  EXPECT_FALSE(b.Take(1, kSmall));
  EXPECT_EQ(b.refused(), 2u);
  b.Give(16 * 1024);
  EXPECT_TRUE(b.Take(16 * 1024, kSmall)) << "given back, taken again";
  EXPECT_EQ(b.in_flight(), 100u * 1024);
}

// A body above the small size (a batch) may only use half the budget: batches never starve observations.
TEST(BodyBudget, LargeBodiesHoldAtMostHalf) {
  BodyBudget b(1024 * 1024);
  EXPECT_TRUE(b.Take(300 * 1024, kSmall));
  EXPECT_FALSE(b.Take(300 * 1024, kSmall)) << "600 KiB of batches is past half of 1 MiB";
  EXPECT_TRUE(b.Take(200 * 1024, kSmall));  // 500 KiB: within half
  EXPECT_FALSE(b.Take(kSmall + 1, kSmall));
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(b.Take(kSmall, kSmall)) << "small bodies use the other half: " << i;
  EXPECT_FALSE(b.Take(kSmall, kSmall));
  EXPECT_FALSE(BodyBudget(1024 * 1024).Take(600 * 1024, kSmall)) << "one batch over half never fits";
}

TEST(BodyBudget, ZeroIsNoLimit) {
  BodyBudget b(0);
  EXPECT_TRUE(b.Take(std::size_t{1} << 40, kSmall));
  EXPECT_TRUE(b.Take(std::size_t{1} << 40, kSmall));
  EXPECT_EQ(b.refused(), 0u);
  b.Give(std::size_t{1} << 40);
  b.Give(std::size_t{1} << 40);
  EXPECT_EQ(b.in_flight(), 0u);
}

TEST(BodyBudget, HoldGivesBackOnceOnDestructionMoveOrRelease) {
  BodyBudget b(1000);
  {
    ASSERT_TRUE(b.Take(600, kSmall));
    BodyBudget::Hold h(&b, 600);
    BodyBudget::Hold moved(std::move(h));
    EXPECT_EQ(b.in_flight(), 600u);
    BodyBudget::Hold assigned;
    assigned = std::move(moved);
    EXPECT_EQ(b.in_flight(), 600u) << "a move gives nothing back";
  }
  EXPECT_EQ(b.in_flight(), 0u) << "destroying the last holder gives the bytes back";
  ASSERT_TRUE(b.Take(400, kSmall));
  BodyBudget::Hold h(&b, 400);
  h.Release();
  h.Release();
  EXPECT_EQ(b.in_flight(), 0u) << "released exactly once";
  ASSERT_TRUE(b.Take(300, kSmall));
  h = BodyBudget::Hold(&b, 300);
  ASSERT_TRUE(b.Take(200, kSmall));
  h = BodyBudget::Hold(&b, 200);  // assigning over a hold releases the old one
  EXPECT_EQ(b.in_flight(), 200u);
}

// Threads taking and giving concurrently: the bytes held never exceed the limit, and all come back.
TEST(BodyBudget, ConcurrentTakersNeverExceedTheLimit) {
  constexpr std::size_t kLimit = 64 * 1024;
  BodyBudget b(kLimit);
  std::atomic<bool> over{false};
  std::atomic<std::uint64_t> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20'000; ++i) {
        const std::size_t n = 1024 + static_cast<std::size_t>((i * 7 + t * 13) % 15) * 1024;
        if (!b.Take(n, kSmall)) continue;
        taken.fetch_add(1);
        if (b.in_flight() > kLimit) over = true;
        b.Give(n);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over.load());
  EXPECT_GT(taken.load(), 0u);
  EXPECT_EQ(b.in_flight(), 0u);
}

}  // namespace
}  // namespace scangate::server
