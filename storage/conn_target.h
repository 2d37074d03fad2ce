// ConnTarget<T>: where a unit that owns connections connects (a connection string, or the Store's pair of them),
// replaceable from another thread by Retarget (a partition moved: storage/partitions/partitioned_store.h). Every Set()
// bumps a generation; each owner remembers the generation its connection follows and drops that connection at its next
// use once Changed() says the generation moved on. Serves one owner (Lookup, Expiry, BrinSummarizer) or several (a
// Store's writers, storage/write/writer_context.h) alike.
// Invariant: after Set() returns, every owner's next Changed() is true, and its Get() then returns the new value (or
// a later one). Costs an owner one atomic load per use otherwise.
// Use: Set() from any thread; Changed() with the owner's own `seen`, from that owner's thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate::storage {

template <typename T>
class ConnTarget {
 public:
  explicit ConnTarget(T value) : value_(std::move(value)) {}

  // Replaces the value and bumps the generation. Any thread.
  void Set(T value) ABSL_LOCKS_EXCLUDED(mu_) {
    const MutexLock lock(&mu_);
    value_ = std::move(value);
    // release: an owner that acquires the new generation finds the new value (it copies it under the lock
    // anyway; the atomic only spares the per-use check that lock).
    generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // The current value, and the generation it belongs to in `generation` (when given). Any thread.
  T Get(std::uint64_t* generation = nullptr) const ABSL_LOCKS_EXCLUDED(mu_) {
    const MutexLock lock(&mu_);
    if (generation != nullptr) *generation = generation_.load(std::memory_order_relaxed);  // relaxed: under mu_
    return value_;
  }
  // True when Set() ran since the generation in `seen`, which then moves on to the current one: drop the
  // connection; the next one uses Get(). The owner of `seen` only.
  bool Changed(std::uint64_t& seen) const {
    const std::uint64_t now = generation_.load(std::memory_order_acquire);  // acquire: pairs with Set's release
    if (now == seen) return false;
    seen = now;
    return true;
  }

 private:
  mutable Mutex mu_;
  T value_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::uint64_t> generation_{0};  // written under mu_ only
};

}  // namespace scangate::storage
