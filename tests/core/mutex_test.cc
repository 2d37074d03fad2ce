// core/mutex.h: Mutex excludes, TryLock fails while another thread holds the lock, UniqueMutexLock lets go and
// takes it again, CondVar wakes a waiter on Signal and reports a timeout only when nobody signalled. (That the
// annotations are checked is the clang thread-safety step of scripts/test.sh, not a test here.)
#include "core/mutex.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace scangate {
namespace {

using namespace std::chrono_literals;

struct Counter {
  Mutex mu;
  CondVar cv;
  std::uint64_t n ABSL_GUARDED_BY(mu) = 0;
  bool ready ABSL_GUARDED_BY(mu) = false;
};

// True when `mu` could be taken (it is released again at once).
bool TryAndRelease(Mutex& mu) {
  if (!mu.TryLock()) return false;
  mu.Unlock();
  return true;
}

// Non-atomic read-modify-writes under the lock from 4 threads: none lost.
TEST(Mutex, MutexLockExcludes) {
  Counter c;
  constexpr int kThreads = 4, kEach = 20000;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&c] {
        for (int i = 0; i < kEach; ++i) {
          const MutexLock lock(&c.mu);
          const std::uint64_t v = c.n;
          c.n = v + 1;
        }
      });
    }
  }
  const MutexLock lock(&c.mu);
  EXPECT_EQ(c.n, std::uint64_t{kThreads} * kEach);
}

TEST(Mutex, TryLockFailsWhileHeldElsewhere) {
  Mutex mu;
  mu.Lock();
  bool taken = true;
  std::thread([&] { taken = TryAndRelease(mu); }).join();
  mu.Unlock();
  EXPECT_FALSE(taken);
  EXPECT_TRUE(TryAndRelease(mu));
}

// While a UniqueMutexLock has let go, another thread takes the lock; after Lock() it is held again.
TEST(Mutex, UniqueMutexLockUnlocksAndRelocks) {
  Mutex mu;
  UniqueMutexLock lock(&mu);
  lock.Unlock();
  bool taken = false;
  std::thread([&] { taken = TryAndRelease(mu); }).join();
  EXPECT_TRUE(taken);
  lock.Lock();
  std::thread([&] { taken = TryAndRelease(mu); }).join();
  EXPECT_FALSE(taken);
}

TEST(CondVar, SignalWakesAWaiter) {
  Counter c;
  std::atomic<bool> woke{false};
  std::jthread waiter([&] {
    const MutexLock lock(&c.mu);
    while (!c.ready) c.cv.Wait(&c.mu);
    woke = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(woke.load());
  {
    const MutexLock lock(&c.mu);
    c.ready = true;
  }
  c.cv.Signal();
  waiter.join();
  EXPECT_TRUE(woke.load());
}

// WaitFor returns true (timed out) after at least the timeout when nobody signals; WaitUntil returns false
// when signalled long before its deadline.
TEST(CondVar, TimeoutOnlyWithoutSignal) {
  Counter c;
  {
    const MutexLock lock(&c.mu);
    const auto start = std::chrono::steady_clock::now();
    bool timed_out = false;
    while (!c.ready && !timed_out) timed_out = c.cv.WaitFor(&c.mu, 30ms);
    EXPECT_TRUE(timed_out);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  }
  std::jthread signaller([&] {
    std::this_thread::sleep_for(20ms);
    {
      const MutexLock lock(&c.mu);
      c.ready = true;
    }
    c.cv.SignalAll();
  });
  const MutexLock lock(&c.mu);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool timed_out = false;
  while (!c.ready && !timed_out) timed_out = c.cv.WaitUntil(&c.mu, deadline);
  EXPECT_FALSE(timed_out);
  EXPECT_TRUE(c.ready);
}

}  // namespace
}  // namespace scangate
