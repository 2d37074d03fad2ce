// Tests server/http/connection_limit.h: per-address slots up to the limit, refusals counted, a released slot
// reusable, addresses independent, entries dropped at their last release, 0 = unlimited, and concurrent
// accepts of one address never exceeding the limit.
#include "server/http/connection_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace scangate::server {
namespace {

TEST(ConnectionLimiter, SlotsPerAddress) {
  ConnectionLimiter l(3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(l.Acquire("a")) << i;
  EXPECT_FALSE(l.Acquire("a"));
  EXPECT_FALSE(l.Acquire("a"));
  EXPECT_EQ(l.refused(), 2u);
  EXPECT_TRUE(l.Acquire("b")) << "another address is independent";
  EXPECT_EQ(l.addresses(), 2u);
  l.Release("a");
  EXPECT_TRUE(l.Acquire("a")) << "a released slot is reusable";
  EXPECT_FALSE(l.Acquire("a"));
  for (int i = 0; i < 3; ++i) l.Release("a");
  l.Release("b");
  EXPECT_EQ(l.addresses(), 0u) << "an address without connections keeps no entry";
  l.Release("never-acquired");  // harmless
  EXPECT_EQ(l.addresses(), 0u);
}

TEST(ConnectionLimiter, ZeroIsUnlimited) {
  ConnectionLimiter l(0);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(l.Acquire("a"));
  EXPECT_EQ(l.addresses(), 0u);
  EXPECT_EQ(l.refused(), 0u);
}

// Eight threads race for one address's 16 slots: exactly 16 are granted however they interleave.
TEST(ConnectionLimiter, ConcurrentAcquiresNeverExceedTheLimit) {
  ConnectionLimiter l(16);
  std::atomic<int> granted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        if (l.Acquire("same")) ++granted;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(granted.load(), 16);
  EXPECT_EQ(l.refused(), 800u - 16u);
}

}  // namespace
}  // namespace scangate::server
