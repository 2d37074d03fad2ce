// ConnTarget: the connection string of a unit that owns one connection on its own thread (Lookup, Expiry,
// BrinSummarizer), replaceable from another thread by Retarget (a partition moved: storage/partitioned_store.h).
// Invariant: after Set() returns, the owner's next TakeChange() is true, so its next use of the connection drops
// the old one and connects with the new string (Get()). Costs the owner one relaxed load per use otherwise.
// Use: one per such unit; Set() from any thread, TakeChange() from the connection's owner only.
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate::storage {

class ConnTarget {
 public:
  explicit ConnTarget(std::string conninfo) : conninfo_(std::move(conninfo)) {}

  // Replaces the string; the owner drops its connection at its next use. Any thread.
  void Set(std::string conninfo) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      const MutexLock lock(&mu_);
      conninfo_ = std::move(conninfo);
    }
    changed_.store(true, std::memory_order_release);  // release: pairs with TakeChange's acquire
  }
  // The current string. Any thread.
  std::string Get() const ABSL_LOCKS_EXCLUDED(mu_) {
    const MutexLock lock(&mu_);
    return conninfo_;
  }
  // True once per Set(): drop the connection (the next one uses Get()). The connection's owner.
  bool TakeChange() {
    if (!changed_.load(std::memory_order_relaxed)) return false;  // relaxed: the common case, nothing read after
    return changed_.exchange(false, std::memory_order_acquire);   // acquire: pairs with Set's release
  }

 private:
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> changed_{false};
};

}  // namespace scangate::storage
