// Writer: one group-commit writer thread of storage::Store — its loop takes batches from its WriterQueue and
// hands them to its BatchRunner; on an outage it marks itself down (waiting items answered kUnavailable now,
// write-behind rows kept), logs pg_state, and reconnects with exponential backoff (50 ms doubling up to
// StoreOptions::reconnect_backoff_max). At shutdown it drains its queue, giving up after shutdown_retry while
// the database stays down. Invariant: while down, no waiting item sits in its queue. Use: created and started
// by Store::Start(); Stop() and Join() by Store::Shutdown().
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "storage/write/batch_runner.h"
#include "storage/write/writer_context.h"

namespace scangate::storage {

class Writer {
 public:
  Writer(StoreShared& shared, unsigned index);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Before Start(): the first connection; marks the writer up when it succeeds. Caller's thread.
  void ConnectFirst();
  // Starts the writer thread.
  void Start();
  // Stops accepting; the thread drains and exits. Then Join(). Any thread.
  void Stop() { state_.queue.Stop(); }
  void Join();

  WriterQueue& queue() { return state_.queue; }
  const WriterQueue& queue() const { return state_.queue; }

 private:
  void Run();
  // Marks the writer down: `batch`'s write-behind rows are kept, every waiting item answered kUnavailable.
  void GoDown(std::vector<QueuedItem>& batch, const std::string& error);
  void GiveUp();

  StoreShared& shared_;
  WriterState state_;
  BatchRunner runner_;
  std::thread thread_;
};

}  // namespace scangate::storage
