#include "storage/write/writer.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/thread_name.h"
#include "storage/write/completions.h"

namespace scangate::storage {
namespace {

constexpr std::chrono::milliseconds kBackoffMin{50};  // first reconnect delay; doubles up to reconnect_backoff_max
// A writer with nothing to write looks at its idle connection this often (PgConnection::IdleAlive), so an
// outage that lands while it idles — a fast shutdown just after its last COMMIT — is reported (down,
// "pg_state down", Submit refused) within this plus one reconnect attempt, not only when the next item
// arrives (which, with repeat-only traffic, may be never). Costs one wake-up and one poll(2) per period.
constexpr std::chrono::milliseconds kIdleConnectionCheck{250};

}  // namespace

Writer::Writer(StoreShared& shared, unsigned index) : shared_(shared), runner_(shared, state_) {
  state_.index = index;
  state_.retention = shared.options.retention;
  state_.target = shared.target.Get(&state_.target_generation);
}

void Writer::ConnectFirst() {
  std::string error;
  FollowTarget(shared_, state_);
  if (ConnectWriter(state_, state_.target.writer_conninfo, &error)) state_.queue.MarkUp();
}

void Writer::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-pg-writer-" + std::to_string(state_.index));
    Run();
  });
}

void Writer::Join() {
  if (thread_.joinable()) thread_.join();
  state_.conn.reset();
}

void Writer::Run() {
  WriterState& w = state_;
  auto backoff = kBackoffMin;
  std::vector<QueuedItem> batch;
  batch.reserve(shared_.options.batch_limit);
  for (;;) {
    // Store::Retarget: a connection to the old database is dropped here (idle, down or between batches), and
    // the reconnect below goes to the new one.
    FollowTarget(shared_, w);
    if (!w.conn && w.queue.up()) {
      // Connection gone while still marked up: an in-doubt COMMIT was settled without one (a batch that
      // wrote nothing needs no txid_status). Reconnect at once; failing that, go down like a failed batch
      // (queued waiting items fail now, Submit refuses) instead of holding them through the outage.
      std::string why;
      if (ConnectWriter(w, w.target.writer_conninfo, &why)) continue;
      std::vector<QueuedItem> none;
      GoDown(none, "connection lost; reconnect failed: " + why);
      continue;
    }
    if (!w.conn) {
      // Down (a batch failed, or the connection made by Start() failed). The failing batch already
      // tried one immediate reconnect, so wait first: 50 ms, 100 ms, ... up to reconnect_backoff_max.
      switch (w.queue.WaitWhileDown(backoff, shared_.options.shutdown_retry)) {
        case WriterQueue::Idle::kDrained:
          return;
        case WriterQueue::Idle::kGiveUp:
          GiveUp();
          return;
        case WriterQueue::Idle::kRetry:
          break;
      }
      if (!ConnectWriter(w, w.target.writer_conninfo, nullptr)) {
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, shared_.options.reconnect_backoff_max);
        continue;
      }
      backoff = kBackoffMin;
      // The line is written before the state flips, so whoever sees the new state finds its line.
      LogPgState(*shared_.log, true, w.index, "");
      w.queue.MarkUp();
      continue;
    }
    switch (w.queue.TakeBatch(batch, shared_.options.batch_limit, shared_.options.flush_interval,
                              kIdleConnectionCheck, shared_.cancelled, shared_.pending)) {
      case WriterQueue::Take::kStopped:
        return;  // nothing queued
      case WriterQueue::Take::kIdle:
        // A connection the server closed is dropped: the loop's top reconnects or goes down.
        if (!w.conn->IdleAlive()) w.conn.reset();
        continue;
      case WriterQueue::Take::kBatch:
        break;
    }
    if (batch.empty()) continue;  // everything taken was cancelled
    // Retargeted while this batch was being taken: it goes to the new database (one connection attempt now;
    // failing that, the writer goes down as after a failed batch: write-behind rows kept, waiting items failed).
    if (FollowTarget(shared_, w)) {
      std::string why;
      if (!ConnectWriter(w, w.target.writer_conninfo, &why)) {
        GoDown(batch, "retargeted; connect failed: " + why);
        batch.clear();
        continue;
      }
    }
    std::vector<QueuedItem> failed;
    std::string error;
    if (!runner_.Run(batch, failed, error)) GoDown(failed, error);
    batch.clear();
  }
}

void Writer::GoDown(std::vector<QueuedItem>& batch, const std::string& error) {
  state_.conn.reset();
  std::vector<QueuedItem> failed;
  // Logged before the state flips: whoever sees up() false finds the pg_state line (and its cause).
  LogPgState(*shared_.log, false, state_.index, error);
  state_.queue.MarkDown(batch, failed);
  shared_.metrics.RecordBatchFailure(failed.size());
  DeliverAll(shared_, state_, failed, Outcome::kUnavailable);
}

void Writer::GiveUp() {
  std::vector<QueuedItem> items;
  state_.queue.DrainAll(items);
  const auto lost = static_cast<std::uint64_t>(
      std::count_if(items.begin(), items.end(), [](const QueuedItem& item) { return item.write_behind; }));
  if (lost > 0) {
    shared_.log->Write(LogSeverity::kError, "write_behind_lost", {{"writer", state_.index}, {"items", lost}});
  }
  shared_.metrics.RecordGiveUp(lost, items.size() - lost);
  DeliverAll(shared_, state_, items, Outcome::kUnavailable);
}

}  // namespace scangate::storage
