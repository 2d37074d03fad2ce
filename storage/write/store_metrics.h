// StoreMetrics: the counters and histograms of storage::Store's writers (batches, outcomes, failures, in-doubt
// settlements, COPY use), and StoreStats, the snapshot Store::Stats() returns for /stats and /metrics.
// Invariant: every counter only grows; a snapshot is taken under the one lock the writers update under, so
// its counters and histograms are mutually consistent. Safe to use from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate::storage {

struct StoreStats {
  bool up;
  std::uint64_t queue_depth;   // accepted items not yet finished (queued or in a transaction)
  std::uint64_t batches;       // committed batch transactions
  std::uint64_t keys_written;  // distinct digests sent in committed batches
  std::uint64_t inserted, duplicates, unavailable;  // outcomes delivered (write-behind included in inserted/duplicates;
                                                    // kUnknown counted in unavailable)
  std::uint64_t write_behind_conflicts;             // write-behind rows that were already present
  std::vector<std::pair<double, std::uint64_t>> batch_size_buckets;  // cumulative (le, count), le = 1,2,4..1024,+Inf
  double batch_size_sum;
  std::uint64_t batch_size_count;
  std::vector<std::pair<double, std::uint64_t>> commit_seconds_buckets;  // cumulative, le = 0.0005 .. 1, +Inf
  double commit_seconds_sum;
  std::uint64_t commit_seconds_count;
  std::uint64_t batch_failures;       // batch transactions that failed (each marks its writer down)
  std::uint64_t write_behind_lost;    // write-behind items given up at Shutdown() (database down too long)
  std::uint32_t last_warm_streams;    // COPY streams the last finished WarmLoad used (0 = none yet)
  std::uint64_t dead_lettered;        // write-behind rows PostgreSQL rejected kMaxRowAttempts times: dropped
  // COMMITs whose answer was lost, by how txid_status() settled them (committed also counts a batch that
  // wrote nothing, whose outcomes hold either way).
  std::uint64_t in_doubt_committed, in_doubt_aborted, in_doubt_unknown;
  std::uint64_t cancelled;            // Submit items withdrawn by Ticket::Cancel (never written)
  // Batches of Bloom negatives (write-behind rows, Submit items expected new) go by binary COPY: committed
  // COPY batches, and COPYs that met an existing row (aborted; the batch re-ran through ON CONFLICT).
  std::uint64_t copy_batches, copy_fallbacks;
  // Committed batches that looked digests up in closed epochs (a summary said maybe, or an epoch has none yet).
  std::uint64_t closed_lookup_batches;
};

// How an in-doubt COMMIT was settled (storage/write/in_doubt.h).
enum class InDoubt : std::uint8_t { kCommitted, kAborted, kUnknown };

class StoreMetrics {
 public:
  // One committed batch transaction: `items` items (`inserted` of them kInserted, `conflicts` write-behind
  // rows already present), `distinct` digests, `seconds` from the first statement to the commit.
  void RecordBatch(std::size_t items, std::uint64_t inserted, std::uint64_t conflicts, std::size_t distinct,
                   double seconds, bool by_copy, bool looked_up = false);
  void RecordBatchFailure(std::uint64_t unavailable);   // a failed batch and the waiting items it failed
  void RecordUnavailable(std::uint64_t n);              // waiting items answered kUnavailable / kUnknown
  void RecordDeadLetter();
  void RecordGiveUp(std::uint64_t write_behind_lost, std::uint64_t unavailable);
  void RecordInDoubt(InDoubt how);
  void RecordCopyFallback();

  // The counters and histograms into `s` (the fields above `up`/`queue_depth`/`cancelled`/`last_warm_streams`,
  // which the Store fills itself).
  void Snapshot(StoreStats& s) const;

 private:
  static constexpr std::array<double, 11> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  static constexpr std::array<double, 11> kCommitBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                           0.05,   0.1,   0.25,   0.5,   1};
  mutable Mutex mu_;  // taken once per batch by a writer; Snapshot() copies under it
  std::uint64_t batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t keys_written_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t inserted_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t duplicates_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t unavailable_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t write_behind_conflicts_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t batch_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t write_behind_lost_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t dead_lettered_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t in_doubt_committed_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t in_doubt_aborted_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t in_doubt_unknown_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t copy_batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t copy_fallbacks_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t closed_lookup_batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<std::uint64_t, kBatchBounds.size() + 1> batch_counts_ ABSL_GUARDED_BY(mu_){};
  double batch_sum_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<std::uint64_t, kCommitBounds.size() + 1> commit_counts_ ABSL_GUARDED_BY(mu_){};
  double commit_sum_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace scangate::storage
