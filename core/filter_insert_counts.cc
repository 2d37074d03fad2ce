// The registry of live threads' pending insert counts (core/filter_insert_counts.h).
#include "core/filter_insert_counts.h"

#include <algorithm>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate::filter_detail {
namespace {

// Every live thread's ThreadCounts, so Stats() can fold pending counts in. Registration and removal
// happen once per thread (first insert, thread exit), never on the per-insert path. Leaked on purpose:
// threads may still exit (and unregister) while static destructors run.
struct CountRegistry {
  Mutex mu;
  std::vector<ThreadCounts*> live ABSL_GUARDED_BY(mu);
};
CountRegistry& Registry() {
  static auto* r = new CountRegistry;
  return *r;
}
// Owns the calling thread's ThreadCounts; its destructor (thread exit) unregisters and frees them.
struct ThreadRegistration {
  ThreadCounts* counts = new ThreadCounts;
  ThreadRegistration() {
    CountRegistry& r = Registry();
    const MutexLock lock(&r.mu);
    r.live.push_back(counts);
  }
  ~ThreadRegistration() {
    CountRegistry& r = Registry();
    const MutexLock lock(&r.mu);
    std::erase(r.live, counts);
    delete counts;
  }
};

}  // namespace

ThreadCounts* RegisterThreadCounts() {
  thread_local ThreadRegistration registration;  // constructed on the first call of this thread only
  return registration.counts;
}

void AddPendingInsertCounts(std::uint64_t filter_id, std::span<std::uint64_t> pending) {
  CountRegistry& r = Registry();
  const MutexLock lock(&r.mu);
  for (const ThreadCounts* tc : r.live) {
    // relaxed (here and below): telemetry; any recent value of another thread's counts will do.
    if (tc->filter_id.load(std::memory_order_relaxed) != filter_id) continue;
    for (std::size_t i = 0; i < pending.size(); ++i) pending[i] += tc->pending[i].load(std::memory_order_relaxed);
  }
}

}  // namespace scangate::filter_detail
