#include "storage/write/store_metrics.h"

#include "storage/histogram.h"

namespace scangate::storage {

void StoreMetrics::RecordBatch(std::size_t items, std::uint64_t inserted, std::uint64_t conflicts,
                               std::size_t distinct, double seconds, bool by_copy, bool looked_up) {
  const MutexLock lk(&mu_);
  ++batches_;
  copy_batches_ += by_copy ? 1 : 0;
  closed_lookup_batches_ += looked_up ? 1 : 0;
  keys_written_ += distinct;
  inserted_ += inserted;
  duplicates_ += items - inserted;
  write_behind_conflicts_ += conflicts;
  ObserveInBucket(kBatchBounds, batch_counts_, static_cast<double>(items));
  batch_sum_ += static_cast<double>(items);
  ObserveInBucket(kCommitBounds, commit_counts_, seconds);
  commit_sum_ += seconds;
}

void StoreMetrics::RecordBatchFailure(std::uint64_t unavailable) {
  const MutexLock lk(&mu_);
  ++batch_failures_;
  unavailable_ += unavailable;
}

void StoreMetrics::RecordUnavailable(std::uint64_t n) {
  const MutexLock lk(&mu_);
  unavailable_ += n;
}

void StoreMetrics::RecordDeadLetter() {
  const MutexLock lk(&mu_);
  ++dead_lettered_;
}

void StoreMetrics::RecordGiveUp(std::uint64_t write_behind_lost, std::uint64_t unavailable) {
  const MutexLock lk(&mu_);
  write_behind_lost_ += write_behind_lost;
  unavailable_ += unavailable;
}

void StoreMetrics::RecordInDoubt(InDoubt how) {
  const MutexLock lk(&mu_);
  std::uint64_t& counter = how == InDoubt::kCommitted ? in_doubt_committed_
                           : how == InDoubt::kAborted ? in_doubt_aborted_
                                                      : in_doubt_unknown_;
  ++counter;
}

void StoreMetrics::RecordCopyFallback() {
  const MutexLock lk(&mu_);
  ++copy_fallbacks_;
}

void StoreMetrics::Snapshot(StoreStats& s) const {
  const MutexLock lk(&mu_);
  s.batches = batches_;
  s.keys_written = keys_written_;
  s.inserted = inserted_;
  s.duplicates = duplicates_;
  s.unavailable = unavailable_;
  s.write_behind_conflicts = write_behind_conflicts_;
  s.batch_failures = batch_failures_;
  s.write_behind_lost = write_behind_lost_;
  s.dead_lettered = dead_lettered_;
  s.in_doubt_committed = in_doubt_committed_;
  s.in_doubt_aborted = in_doubt_aborted_;
  s.in_doubt_unknown = in_doubt_unknown_;
  s.copy_batches = copy_batches_;
  s.closed_lookup_batches = closed_lookup_batches_;
  s.copy_fallbacks = copy_fallbacks_;
  s.batch_size_buckets = CumulativeBuckets(kBatchBounds, batch_counts_);
  s.batch_size_sum = batch_sum_;
  s.batch_size_count = s.batch_size_buckets.back().second;
  s.commit_seconds_buckets = CumulativeBuckets(kCommitBounds, commit_counts_);
  s.commit_seconds_sum = commit_sum_;
  s.commit_seconds_count = s.commit_seconds_buckets.back().second;
}

}  // namespace scangate::storage
