// Mutex, MutexLock, CondVar: std::mutex and std::condition_variable with clang's thread-safety annotations, so
// ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED are checked (-Wthread-safety, the SCANGATE_THREAD_SAFETY build
// in scripts/test.sh) instead of decorative: a guarded member touched without its Mutex held fails that build.
// Invariant: zero cost — each call is the std call it wraps, inlined (bench/core/mutex_bench.cc compiles to the
// same instructions as std::mutex; absl::Mutex measured ~4x the CPU per lock: bench/RESULTS.md). Use for every
// mutex in core/, storage/ and server/; spelled as absl::Mutex is (MutexLock lock(&mu); cv.Wait(&mu)).
// Waiting: `while (!ready_) cv_.Wait(&mu_);` — an explicit loop, not a predicate lambda: the loop's reads are
// checked under the held lock, where a lambda's body would be analysed as a separate function holding nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include <absl/base/thread_annotations.h>

namespace scangate {

// A non-recursive exclusive lock. Lock/Unlock/TryLock are safe from any thread; Unlock only by the holder.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // True when the lock was taken (never blocks).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the lock where it cannot see it (checks nothing at run time).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope (std::lock_guard's job). Thread: the constructing thread, which also destroys it.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Holds `mu` for its scope but may let go of it and take it again inside (std::unique_lock's job), e.g. to
// run a slow call unlocked in the middle of a loop. The analysis tracks each Unlock()/Lock(); the destructor
// unlocks only if held. Thread: the constructing thread only.
class ABSL_SCOPED_LOCKABLE UniqueMutexLock {
 public:
  explicit UniqueMutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~UniqueMutexLock() ABSL_UNLOCK_FUNCTION() {
    if (held_) mu_->Unlock();
  }
  UniqueMutexLock(const UniqueMutexLock&) = delete;
  UniqueMutexLock& operator=(const UniqueMutexLock&) = delete;

  void Unlock() ABSL_UNLOCK_FUNCTION() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// A condition variable used with a Mutex. Wait* must be called with the Mutex held; they release it while
// blocked and hold it again when they return (spurious wake-ups happen: wait in a loop on the condition).
// Signal/SignalAll are safe from any thread, with or without the Mutex held.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lk(mu->mu_, std::adopt_lock);
    cv_.wait(lk);
    lk.release();  // still held: the caller's MutexLock unlocks it
  }
  // Returns true when `deadline` passed (absl::CondVar::WaitWithDeadline's convention), false when woken.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lk(mu->mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_until(lk, deadline) == std::cv_status::timeout;
    lk.release();
    return timed_out;
  }
  // Returns true when `timeout` passed, false when woken.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace scangate
