// ClosedEpochs: what an instance knows of the exact store's closed epochs — each one's id and membership summary
// (core/epoch_summary.h), or no summary yet (an epoch being closed: every digest is checked there) — and, for a batch
// of digests about to be written, the closed epochs each must be checked against (PlanProbes). Invariant: a digest
// is left out of an epoch's probes only when that epoch's summary says it was never added, so a key present in a
// closed epoch is always checked there; a batch every summary calls absent needs no probe at all.
// Replaced whole when the catalog changes (an epoch closes, its summary commits, epochs merge or drop); a reader
// keeps the snapshot it took for its whole batch. Sibling: storage/epochs/summary_build.h builds the summaries.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/digest.h"
#include "core/epoch_summary.h"
#include "core/mutex.h"

namespace scangate {

struct ClosedEpoch {
  std::int64_t id = 0;                          // the epoch's id in the catalog
  std::shared_ptr<const EpochSummary> summary;  // null: none committed yet — every digest is probed
};

// One closed epoch's share of a batch: the indices (into the batch) of the digests to look up there.
struct EpochProbe {
  std::int64_t epoch = 0;
  std::vector<std::uint32_t> items;
};

class ClosedEpochs {
 public:
  using Snapshot = std::shared_ptr<const std::vector<ClosedEpoch>>;

  // Replaces the set (the catalog as just read). Threading: safe concurrently with Get and other Publishes (the last
  // one wins: the caller serialises its catalog reads).
  void Publish(std::vector<ClosedEpoch> epochs);
  // The set as last published (empty before any); never null. Threading: safe from any thread; O(1) under a lock.
  Snapshot Get() const;

  // For each epoch of `epochs` (in order) whose summary may hold at least one digest of `batch`: its probe, the
  // digests in batch order. An epoch with no summary gets every digest. Threading: pure (the summaries are const).
  static std::vector<EpochProbe> PlanProbes(const std::vector<ClosedEpoch>& epochs, std::span<const Digest> batch);

 private:
  mutable Mutex mu_;
  Snapshot epochs_ ABSL_GUARDED_BY(mu_) = std::make_shared<const std::vector<ClosedEpoch>>();
};

}  // namespace scangate
