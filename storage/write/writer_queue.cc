#include "storage/write/writer_queue.h"

#include <algorithm>
#include <utility>

namespace scangate::storage {

std::size_t PendingBound::TryAddUpTo(std::size_t n) {
  std::size_t taken = 0;
  std::size_t p = pending_.load();
  do {
    if (p >= limit_) return 0;
    taken = std::min(n, limit_ - p);
  } while (!pending_.compare_exchange_weak(p, p + taken));
  return taken;
}

bool WriterQueue::Push(QueuedItem item, std::size_t batch_limit) {
  const bool write_behind = item.write_behind;
  bool notify;
  {
    const MutexLock lk(&mu_);
    if (stop_ || (!write_behind && !up_)) return false;
    const bool was_empty = queue_.empty() && urgent_.empty();
    // A Submit skips the write-behind backlog (priority lane) unless a row of its digest is pending there.
    std::deque<QueuedItem>& lane = !write_behind && !behind_.contains(item.digest) ? urgent_ : queue_;
    if (write_behind) {
      ++behind_[item.digest];
    } else {
      ++waiting_;
    }
    lane.push_back(std::move(item));
    // A write-behind item only needs to wake the writer to start its flush timer (queue was empty) or
    // when it completes a batch; otherwise the writer is already committing or timing the flush.
    notify = !write_behind || was_empty || queue_.size() >= batch_limit;
  }
  if (notify) cv_.Signal();
  return true;
}

void WriterQueue::PushLocked(QueuedItem item) {
  ++behind_[item.digest];
  queue_.push_back(std::move(item));
}

WriterQueue::Take WriterQueue::TakeBatch(std::vector<QueuedItem>& batch, std::size_t batch_limit,
                                         std::chrono::microseconds flush_interval, std::chrono::milliseconds idle,
                                         std::atomic<std::uint64_t>& cancelled, PendingBound& pending) {
  const MutexLock lk(&mu_);
  for (;;) {
    if (queue_.empty() && urgent_.empty()) {
      if (stop_) return Take::kStopped;
      // Nothing arrives for `idle`: kIdle (the writer looks at its connection).
      const auto idle_until = std::chrono::steady_clock::now() + idle;
      while (!stop_ && queue_.empty() && urgent_.empty()) {
        if (cv_.WaitUntil(&mu_, idle_until)) break;
      }
      if (!stop_ && queue_.empty() && urgent_.empty()) return Take::kIdle;
      continue;
    }
    if (waiting_ > 0 || stop_ || queue_.size() >= batch_limit) break;
    const auto deadline = queue_.front().enqueued + flush_interval;
    if (StoreClock::now() >= deadline) break;
    cv_.WaitUntil(&mu_, deadline);
  }
  // The priority lane's items make a batch of their own (small, never behind write-behind rows; not
  // mixed in, so a write-behind batch stays eligible for COPY). Lanes alternate while both hold items,
  // so neither starves: a waiting item waits for at most the one batch in progress.
  const bool take_urgent = !urgent_.empty() && (!last_urgent_ || queue_.empty());
  last_urgent_ = take_urgent;
  std::deque<QueuedItem>& from = take_urgent ? urgent_ : queue_;
  std::size_t skipped = 0;
  while (!from.empty() && batch.size() < batch_limit) {
    QueuedItem& front = from.front();
    if (!front.write_behind) --waiting_;
    if (front.ticket && !front.ticket->Take()) {
      ++skipped;  // cancelled by its submitter (deadline passed while queued): never written
    } else {
      batch.push_back(std::move(front));
    }
    from.pop_front();
  }
  if (skipped > 0) {
    cancelled.fetch_add(skipped);
    pending.Release(skipped);
  }
  return Take::kBatch;
}

WriterQueue::Idle WriterQueue::WaitWhileDown(std::chrono::milliseconds pause,
                                             std::chrono::milliseconds shutdown_retry) {
  const MutexLock lk(&mu_);
  if (stop_) {
    if (queue_.empty() && urgent_.empty()) return Idle::kDrained;
    if (!give_up_at_) give_up_at_ = StoreClock::now() + shutdown_retry;
    if (StoreClock::now() >= *give_up_at_) return Idle::kGiveUp;
  }
  const bool stop_seen = stop_;
  // Wake early only when Stop() begins: new write-behind items must not cause a reconnect storm.
  const auto until = std::chrono::steady_clock::now() + pause;
  while (!(stop_ && !stop_seen) && !cv_.WaitUntil(&mu_, until)) {
  }
  return Idle::kRetry;
}

void WriterQueue::MarkUp() {
  const MutexLock lk(&mu_);
  up_ = true;
  up_flag_.store(true);
}

void WriterQueue::MarkDown(std::vector<QueuedItem>& batch, std::vector<QueuedItem>& failed) {
  const MutexLock lk(&mu_);
  up_ = false;
  up_flag_.store(false);
  // Write-behind items go back to the front, in their original order.
  for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
    if (it->write_behind) queue_.push_front(std::move(*it));
  }
  for (auto& item : batch) {
    if (!item.write_behind) failed.push_back(std::move(item));
  }
  // Waiting items still queued would otherwise wait out the outage: they fail now too.
  std::deque<QueuedItem> keep;
  for (auto& item : queue_) {
    if (item.write_behind) {
      keep.push_back(std::move(item));
    } else {
      failed.push_back(std::move(item));
    }
  }
  queue_.swap(keep);
  for (auto& item : urgent_) failed.push_back(std::move(item));
  urgent_.clear();
  waiting_ = 0;
}

void WriterQueue::Requeue(std::vector<QueuedItem>& rows) {
  if (rows.empty()) return;
  const MutexLock lk(&mu_);
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) queue_.push_front(std::move(*it));
}

void WriterQueue::DrainAll(std::vector<QueuedItem>& left) {
  const MutexLock lk(&mu_);
  for (auto& item : queue_) left.push_back(std::move(item));
  for (auto& item : urgent_) left.push_back(std::move(item));
  queue_.clear();
  urgent_.clear();
  waiting_ = 0;
}

void WriterQueue::ReleaseBehind(const std::vector<QueuedItem>& items) {
  if (std::none_of(items.begin(), items.end(), [](const QueuedItem& item) { return item.write_behind; })) return;
  const MutexLock lk(&mu_);
  for (const QueuedItem& item : items) {
    if (!item.write_behind) continue;
    const auto it = behind_.find(item.digest);
    if (it != behind_.end() && --it->second == 0) behind_.erase(it);
  }
}

void WriterQueue::Stop() {
  {
    const MutexLock lk(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
}

}  // namespace scangate::storage
