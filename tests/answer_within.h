// Bounded waits for answers that come back through a callback (Store::Submit's completion, Lookup::Find's
// done). A bare promise/future.get() waits forever when the answer never comes, and the test then hangs until
// the ctest timeout; Answer<T> turns a missing answer into a test failure within seconds. Its promise is
// shared with the callback (captured by value), so an answer arriving after the test gave up writes into
// live memory. Use one Answer per expected callback; header-only, for tests under tests/.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>

namespace scangate {

// Long enough for a PostgreSQL round trip and a writer's retry on a loaded 2-core machine; short enough that
// a lost answer fails the test in seconds. Not a performance bound.
inline constexpr std::chrono::seconds kAnswerBound{10};

template <class T>
class Answer {
 public:
  Answer() : promise_(std::make_shared<std::promise<T>>()), future_(promise_->get_future()) {}

  // The callback to hand to the code under test. Call it at most once, from any thread.
  auto Setter() const {
    return [p = promise_](const T& v) { p->set_value(v); };
  }

  // The answer when it came within `bound`, else nullopt (the caller fails: ASSERT_TRUE(a.has_value())).
  // Call once (Within or Get), from the test's thread.
  std::optional<T> Within(std::chrono::milliseconds bound = kAnswerBound) {
    if (future_.wait_for(bound) != std::future_status::ready) return std::nullopt;
    return future_.get();
  }

  // The answer within kAnswerBound; a missing answer is a test failure (reported here) and a value-initialised
  // T, so a helper that returns a value can use it. Call once, from the test's thread.
  T Get() {
    std::optional<T> v = Within();
    if (v.has_value()) return *std::move(v);
    ADD_FAILURE() << "no answer within " << kAnswerBound.count() << " s";
    return T{};
  }

 private:
  std::shared_ptr<std::promise<T>> promise_;
  std::future<T> future_;
};

}  // namespace scangate
