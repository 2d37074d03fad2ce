// Tests storage/background_loop.h: the first pass runs at once or after one interval as asked, passes repeat
// every interval, a pass returning false ends the loop, Stop() wakes a loop waiting a long interval (and a
// Wait() inside a pass) instead of letting it sleep on, and Stop() before Start() is harmless. Every wait is
// bounded; no test asserts speed (the 60 s bound only tells a woken loop from one sleeping out an hour).
#include "storage/background_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

bool Eventually(const std::function<bool()>& cond, std::chrono::seconds bound = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(BackgroundLoop, FirstPassAtOnceThenEveryInterval) {
  std::atomic<int> passes{0};
  BackgroundLoop loop;
  loop.Start("sg-test", 20ms, /*first_at_once=*/true, [&] {
    ++passes;
    return true;
  });
  EXPECT_TRUE(Eventually([&] { return passes.load() >= 3; })) << passes.load();
  loop.Stop();
  const int after = passes.load();
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(passes.load(), after) << "a pass ran after Stop()";
}

TEST(BackgroundLoop, FirstPassWaitsOneIntervalAndStopCutsTheWaitShort) {
  std::atomic<int> passes{0};
  BackgroundLoop loop;
  loop.Start("sg-test", 3600s, /*first_at_once=*/false, [&] {
    ++passes;
    return true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(passes.load(), 0) << "the first pass did not wait for the interval";
  const auto t0 = std::chrono::steady_clock::now();
  loop.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 60s) << "Stop() slept out the interval";
  EXPECT_EQ(passes.load(), 0);
}

TEST(BackgroundLoop, PassReturningFalseEndsTheLoop) {
  std::atomic<int> passes{0};
  BackgroundLoop loop;
  loop.Start("sg-test", 1ms, /*first_at_once=*/true, [&] { return ++passes < 2; });
  EXPECT_TRUE(Eventually([&] { return passes.load() == 2; }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(passes.load(), 2) << "the loop went on after a pass returned false";
  loop.Stop();
}

TEST(BackgroundLoop, WaitInsideAPassReturnsTrueOnStop) {
  std::atomic<bool> in_pass{false}, saw_stop{false};
  BackgroundLoop loop;
  loop.Start("sg-test", 3600s, /*first_at_once=*/true, [&] {
    in_pass = true;
    saw_stop = loop.Wait(3600s);
    return true;
  });
  ASSERT_TRUE(Eventually([&] { return in_pass.load(); }));
  loop.Stop();
  EXPECT_TRUE(saw_stop.load());
}

TEST(BackgroundLoop, StopBeforeStartAndTwice) {
  BackgroundLoop loop;
  loop.Stop();
  loop.Stop();
  EXPECT_TRUE(loop.Wait(3600s)) << "Wait() after Stop() must not sleep";
}

}  // namespace
}  // namespace scangate::storage
