// WriterQueue: one writer's queue — a FIFO (write-behind rows, and Submit items of digests that have a row
// pending there) and a priority lane (every other Submit item), with the writer's up/stop state. PendingBound:
// the store-wide bound on accepted, unfinished items (StoreOptions::queue_limit).
// Invariants: items of one digest leave in the order they came (a Submit never overtakes a pending
// write-behind row of its digest: never "new" twice); a cancelled Ticket's item is never handed out; while the
// writer is down (up() false) the queue refuses waiting (Submit) items and holds no waiting item.
// Use: the Store facade pushes (any thread), the writer thread (storage/write/writer.h) takes and settles.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>

#include "core/digest.h"
#include "core/digest_hash.h"
#include "core/mutex.h"
#include "storage/outcome.h"

namespace scangate::storage {

using StoreClock = std::chrono::steady_clock;

// One accepted observation on its way to PostgreSQL.
struct QueuedItem {
  Digest digest;
  std::string source;
  Completion done;            // may be empty for write-behind (no commit hook)
  bool write_behind = false;
  StoreClock::time_point enqueued;
  std::int64_t first_seen_us = 0;  // 0 = now() at insert; else the journal's time of first observation
  std::shared_ptr<Ticket> ticket;  // Submit items only, optional
  Expect expect = Expect::kUnknown;  // Submit items: kNew = a trusted Bloom negative (COPY-eligible)
  int rejected = 0;           // data-error rejections in a transaction of its own (dead letter at kMaxRowAttempts)
  // SubmitWriteBehindGroup rows: where the outcome goes (instead of `done`), with the submitter's tag and flag.
  WriteBehindSink* sink = nullptr;
  std::uint64_t tag = 0;
  bool flag = false;
  PackAttrs attrs{};  // Submit items under --keys=gs1 (write-behind rows carry none)
};

// Accepted, unfinished items of one Store, bounded by `limit`. Safe to call concurrently.
class PendingBound {
 public:
  explicit PendingBound(std::size_t limit) : limit_(limit) {}
  // Room for one item: true (counted) or false (full, nothing counted).
  bool TryAdd() {
    if (pending_.fetch_add(1) >= limit_) {
      pending_.fetch_sub(1);
      return false;
    }
    return true;
  }
  // Room for a prefix of `n` items, taken exactly (a compare-exchange, not fetch_add then give back: a
  // transient overshoot would refuse a concurrent Submit, i.e. answer a request 503). Returns its length.
  std::size_t TryAddUpTo(std::size_t n);
  void Release(std::size_t n) { pending_.fetch_sub(n); }
  std::size_t count() const { return pending_.load(); }
  // Relaxed: a hint, nothing is published through it.
  bool full() const { return pending_.load(std::memory_order_relaxed) >= limit_; }

 private:
  const std::size_t limit_;
  std::atomic<std::size_t> pending_{0};
};

class WriterQueue {
 public:
  // Queues one item; false (nothing queued) when stopped, or for a waiting item while down. Notifies the
  // writer when it must act (see Enqueue in writer_queue.cc). Safe to call concurrently.
  bool Push(QueuedItem item, std::size_t batch_limit);

  // Group submission (Store::SubmitWriteBehindGroup) holds several queues' locks at once, in writer order:
  // Lock / then PushLocked... / then Unlock. PushLocked takes a write-behind row; WakeAfterGroup says
  // whether the writer must be notified (its queue was empty before the group, or now fills a batch).
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION(mu_) { mu_.Lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION(mu_) { mu_.Unlock(); }
  bool stopped_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }
  bool empty_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && urgent_.empty(); }
  std::size_t fifo_size_locked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.size(); }
  void PushLocked(QueuedItem item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify() { cv_.Signal(); }

  // Writer thread: waits for the next batch and moves it into `batch` (up to batch_limit items; the priority
  // lane's items as a batch of their own, lanes alternating while both hold items; write-behind rows wait up
  // to flush_interval from the oldest for company). Skips cancelled items, counting them in `cancelled` and
  // releasing them from `pending`. kIdle: nothing arrived for `idle` (the writer may look at its connection);
  // kStopped: stopped with nothing queued.
  enum class Take : std::uint8_t { kBatch, kIdle, kStopped };
  Take TakeBatch(std::vector<QueuedItem>& batch, std::size_t batch_limit, std::chrono::microseconds flush_interval,
                 std::chrono::milliseconds idle, std::atomic<std::uint64_t>& cancelled, PendingBound& pending);

  // Writer thread, while down: waits `pause`, or less when Stop() begins. What the writer should do next.
  enum class Idle : std::uint8_t { kRetry, kDrained, kGiveUp };
  Idle WaitWhileDown(std::chrono::milliseconds pause, std::chrono::milliseconds shutdown_retry);

  // Marks the writer up: Submit is accepted again.
  void MarkUp();
  // Marks the writer down: `batch`'s write-behind rows go back to the front (in order), and every waiting
  // item — of `batch` and still queued — moves into `failed` (to be answered kUnavailable now).
  void MarkDown(std::vector<QueuedItem>& batch, std::vector<QueuedItem>& failed);
  // Write-behind rows whose outcome is unknown go back to the front, in order (re-inserting is idempotent).
  void Requeue(std::vector<QueuedItem>& rows);
  // Everything still queued (Shutdown gave up): moved into `left`.
  void DrainAll(std::vector<QueuedItem>& left);
  // Finished write-behind rows of `items` no longer hold their digest's Submits in the FIFO.
  void ReleaseBehind(const std::vector<QueuedItem>& items);

  // Stops the queue: no more pushes; the writer drains what is queued, then exits.
  void Stop();

  // Lock-free mirror of the up state (Store::up()). Safe to call concurrently.
  bool up() const { return up_flag_.load(); }

 private:
  Mutex mu_;
  CondVar cv_;
  std::deque<QueuedItem> queue_ ABSL_GUARDED_BY(mu_);   // FIFO: write-behind rows, and Submit items behind them
  std::deque<QueuedItem> urgent_ ABSL_GUARDED_BY(mu_);  // the priority lane: Submit items with no row pending
  std::size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;        // Submit (non-write-behind) items in queue_ + urgent_
  // Write-behind items per digest that are queued or in a transaction (not finished): a Submit of such a
  // digest joins queue_ behind its row, so items of one digest stay in order (never "new" twice).
  absl::flat_hash_map<Digest, std::uint32_t, DigestHash, DigestEq> behind_ ABSL_GUARDED_BY(mu_);
  bool up_ ABSL_GUARDED_BY(mu_) = false;  // Push refuses waiting items while false
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> up_flag_{false};      // mirror of up_ for lock-free reads
  bool last_urgent_ = false;              // writer thread only: the previous batch came from the priority lane
  std::optional<StoreClock::time_point> give_up_at_;  // writer thread only: set once stop is seen while down
};

}  // namespace scangate::storage
