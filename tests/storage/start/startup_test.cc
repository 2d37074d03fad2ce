// Tests storage/start/startup.h's retry policy (no PostgreSQL): pauses double from `first` up to `max`, the deadline
// stops the retries before a pause would cross it, the caller's wait can stop them, an attempt's exception
// propagates. MigrateWithRetry is covered against PostgreSQL by store_test (StartClassifiesErrors).
#include "storage/start/startup.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

namespace scangate::storage {
namespace {

using namespace std::chrono_literals;

// Pauses double from `first`, capped at `max`; the attempt is told the pause that follows it.
TEST(RetryWithBackoff, PausesDoubleUpToTheCap) {
  std::vector<std::chrono::milliseconds> told, waited;
  std::vector<int> numbers;
  const bool ok = RetryWithBackoff(
      RetryPolicy{10ms, 50ms, std::nullopt},
      [&](int n, std::chrono::milliseconds retry_in) {
        numbers.push_back(n);
        told.push_back(retry_in);
        return n == 6;
      },
      [&](std::chrono::milliseconds pause) {
        waited.push_back(pause);
        return true;
      });
  EXPECT_TRUE(ok);
  EXPECT_EQ(numbers, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(waited, (std::vector<std::chrono::milliseconds>{10ms, 20ms, 40ms, 50ms, 50ms}));
  EXPECT_EQ(told, (std::vector<std::chrono::milliseconds>{10ms, 20ms, 40ms, 50ms, 50ms, 50ms}));
}

// A first success needs no wait.
TEST(RetryWithBackoff, FirstSuccessDoesNotWait) {
  int waits = 0;
  EXPECT_TRUE(RetryWithBackoff(
      RetryPolicy{}, [](int, std::chrono::milliseconds) { return true; },
      [&](std::chrono::milliseconds) {
        ++waits;
        return true;
      }));
  EXPECT_EQ(waits, 0);
}

// A deadline already reached: one attempt, no pause (Store::Start with start_timeout 0, as the server runs it).
TEST(RetryWithBackoff, DeadlineStopsBeforeAPauseCrossesIt) {
  int attempts = 0, waits = 0;
  const bool ok = RetryWithBackoff(
      RetryPolicy{50ms, 50ms, std::chrono::steady_clock::now()},
      [&](int, std::chrono::milliseconds) {
        ++attempts;
        return false;
      },
      [&](std::chrono::milliseconds) {
        ++waits;
        return true;
      });
  EXPECT_FALSE(ok);
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(waits, 0);
}

// A deadline some pauses away: the attempts stop before it, and the pauses taken all end within it.
TEST(RetryWithBackoff, DeadlineBoundsTheRetries) {
  const auto start = std::chrono::steady_clock::now();
  int attempts = 0;
  const bool ok = RetryWithBackoff(
      RetryPolicy{10ms, 40ms, start + 200ms},
      [&](int, std::chrono::milliseconds) {
        ++attempts;
        return false;
      },
      SleepFor);
  EXPECT_FALSE(ok);
  // Pauses 10, 20, 40, 40, 40, 40 ms fit in 200 ms: at most 7 attempts (fewer when sleeps overshoot).
  EXPECT_GE(attempts, 3);
  EXPECT_LE(attempts, 7);
  EXPECT_LE(std::chrono::steady_clock::now() - start, 200ms + 1s);  // + sleep overshoot on a loaded machine
}

// The caller's wait stops the retries (a signal during start-up).
TEST(RetryWithBackoff, WaitCanStop) {
  int attempts = 0;
  EXPECT_FALSE(RetryWithBackoff(
      RetryPolicy{}, [&](int, std::chrono::milliseconds) { return ++attempts == 100; },
      [&](std::chrono::milliseconds) { return attempts < 3; }));
  EXPECT_EQ(attempts, 3);
}

// An attempt's exception (a permanent start error) is not retried.
TEST(RetryWithBackoff, ExceptionPropagates) {
  int attempts = 0;
  EXPECT_THROW(RetryWithBackoff(
                   RetryPolicy{}, [&](int, std::chrono::milliseconds) -> bool {
                     ++attempts;
                     throw std::runtime_error("permanent");
                   },
                   [](std::chrono::milliseconds) { return true; }),
               std::runtime_error);
  EXPECT_EQ(attempts, 1);
}

}  // namespace
}  // namespace scangate::storage
