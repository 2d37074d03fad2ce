// Tests server/http/connection_limit.h: per-address slots up to the limit, refusals counted, a released slot
// reusable, addresses independent, entries dropped at their last release, a Slot gives back exactly its own key
// once (moved, reassigned, released early), 0 = unlimited, and concurrent accepts of one address never exceeding
// the limit.
#include "server/http/connection_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace scangate::server {
namespace {

TEST(ConnectionLimiter, SlotsPerAddress) {
  ConnectionLimiter l(3);
  std::vector<ConnectionLimiter::Slot> a;
  for (int i = 0; i < 3; ++i) {
    auto s = l.Acquire("a");
    ASSERT_TRUE(s) << i;
    EXPECT_TRUE(s->held());
    a.push_back(std::move(*s));
  }
  EXPECT_FALSE(l.Acquire("a"));
  EXPECT_FALSE(l.Acquire("a"));
  EXPECT_EQ(l.refused(), 2u);
  auto b = l.Acquire("b");
  EXPECT_TRUE(b) << "another address is independent";
  EXPECT_EQ(l.addresses(), 2u);
  a.pop_back();  // destroyed: its slot comes back
  auto again = l.Acquire("a");
  EXPECT_TRUE(again) << "a released slot is reusable";
  EXPECT_FALSE(l.Acquire("a"));
  a.clear();
  again.reset();
  b.reset();
  EXPECT_EQ(l.addresses(), 0u) << "an address without connections keeps no entry";
}

// What a Slot gives back is its own key, exactly once: a moved-from Slot gives back nothing, Release() before the
// destructor does not give back twice, assigning over a held Slot gives back the old one.
TEST(ConnectionLimiter, ASlotReleasesExactlyWhatItTook) {
  ConnectionLimiter l(1);
  auto s = l.Acquire("a");
  ASSERT_TRUE(s);
  ConnectionLimiter::Slot moved = std::move(*s);
  EXPECT_FALSE(s->held());
  s.reset();
  EXPECT_FALSE(l.Acquire("a")) << "a moved-from Slot gave the slot back";
  moved.Release();
  moved.Release();
  auto a = l.Acquire("a");
  ASSERT_TRUE(a);
  auto b = l.Acquire("b");
  ASSERT_TRUE(b);
  *a = std::move(*b);  // a's slot comes back; a now holds b's
  EXPECT_TRUE(l.Acquire("a").has_value());
  EXPECT_FALSE(l.Acquire("b")) << "b's slot is still held, by a";
  a.reset();
  EXPECT_EQ(l.addresses(), 0u);
}

TEST(ConnectionLimiter, ZeroIsUnlimited) {
  ConnectionLimiter l(0);
  std::vector<ConnectionLimiter::Slot> held;
  for (int i = 0; i < 10000; ++i) {
    auto s = l.Acquire("a");
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->held()) << "nothing to give back";
    held.push_back(std::move(*s));
  }
  EXPECT_EQ(l.addresses(), 0u);
  EXPECT_EQ(l.refused(), 0u);
}

// Eight threads race for one address's 16 slots: exactly 16 are granted however they interleave.
TEST(ConnectionLimiter, ConcurrentAcquiresNeverExceedTheLimit) {
  ConnectionLimiter l(16);
  std::atomic<int> granted{0};
  std::vector<std::vector<ConnectionLimiter::Slot>> held(8);
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (auto s = l.Acquire("same")) {
          ++granted;
          held[t].push_back(std::move(*s));
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(granted.load(), 16);
  EXPECT_EQ(l.refused(), 800u - 16u);
}

}  // namespace
}  // namespace scangate::server
