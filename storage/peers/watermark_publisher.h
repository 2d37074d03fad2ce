// WatermarkPublisher (issue 42, design A): a journal owner's commit watermark in one database (one logical partition
// with --partitions), published on a connection of its own every `interval` — its row of scangate_instances
// (sql/011): covered_until, a lower bound of PostgreSQL's clock before which every key this instance answered `new`
// from its journal is committed, with a heartbeat and what operators need (host, pid, keys uncommitted). The
// argument that makes that bound safe, and what readers do with it, is storage/peers/peer_view.h's.
// Invariants: covered_until only ever grows (GREATEST in the statements); the row is registered (committed) before
// published() turns true, and the server answers nothing `new` from its journal for this partition before that;
// Stop(clean) marks the row stopped only when the journal holds nothing uncommitted for the partition (else it stays
// running: the other instances wait for this instance's restart, which replays its journal, or its retirement).
// Use: one per partition; Start() after the journal was opened; Stop(true) after the store was shut down.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/journal/journal.h"
#include "storage/log_sink.h"

namespace scangate::storage {

struct WatermarkPublisherOptions {
  std::string conninfo;     // the database's (partition's) connection string, with the caller's timeouts
  std::string instance_id;  // Journal::instance_id()
  unsigned partition = 0;   // the logical partition (0 with one database)
  std::string label;        // "p0", or "" for one database: in log lines and metrics
  // One UPDATE per interval (a HOT update of one row; ~0.1 ms of PostgreSQL each). The readers' view of this
  // instance is up to interval + their own poll interval old: 50 ms keeps that a small part of the 2 s window.
  std::chrono::milliseconds interval{50};
  std::chrono::milliseconds reconnect_delay{500};
  // The journal's figures for this partition (JournalDrain::UncommittedOf); called on the publisher's thread.
  std::function<Journal::Uncommitted()> uncommitted;
  std::shared_ptr<LogSink> log;  // empty: StderrLogSink()
};

struct WatermarkPublisherStats {
  bool published = false;      // the row is registered: journal `new`s of this partition may be given
  bool connected = false;
  double age_seconds = -1;     // since the last successful update (boot clock); -1 = never
  double lag_seconds = -1;     // now() - covered_until at the last update (PostgreSQL's clock): how far behind
  std::uint64_t updates = 0;   // successful statements (registrations included)
  std::uint64_t failures = 0;  // connections or statements that failed
  std::uint64_t uncommitted = 0;  // the last figure published
  std::string error;           // the last failure ("" while updating)
};

class WatermarkPublisher {
 public:
  explicit WatermarkPublisher(WatermarkPublisherOptions options);
  ~WatermarkPublisher();  // Stop(false)
  WatermarkPublisher(const WatermarkPublisher&) = delete;
  WatermarkPublisher& operator=(const WatermarkPublisher&) = delete;

  void Start();  // starts the thread (connects, registers, then updates every interval). Call once.
  // Ends the thread; with `clean`, one last update marks the row stopped when nothing of the partition is
  // uncommitted (else it is left running). Idempotent; any thread but the publisher's.
  void Stop(bool clean);
  // The database moved (--partitions' map): reconnect there and register. Any thread.
  void Retarget(std::string conninfo);

  // The row is registered (ever since the first registration committed). acquire: pairs with the thread's release
  // after that commit. Lock-free; any thread (the I/O threads ask it per journal `new`).
  bool published() const { return published_.load(std::memory_order_acquire); }
  WatermarkPublisherStats Stats() const;
  const std::string& label() const { return options_.label; }

 private:
  struct Session;  // one connection and its clock sample (watermark_publisher.cc)
  void Run();
  void Serve(Session& s);
  // Registers the row (running) and logs how it was found (none, running = a restart after a crash, stopped,
  // retired). Throws PeerError.
  void Register(Session& s);
  // One update; false when the row is no longer running (retired by an operator): the caller registers again.
  bool Beat(Session& s);
  void Final(Session& s);  // Stop(clean)'s last update
  void Fail(const std::string& what);

  WatermarkPublisherOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> clean_{false};
  std::atomic<bool> retarget_{false};
  std::atomic<bool> published_{false};
  std::atomic<bool> connected_{false};
  std::atomic<std::int64_t> last_update_ns_{0};  // BootClock ns of the last successful update; 0 = never
  std::atomic<std::int64_t> lag_us_{-1};
  std::atomic<std::uint64_t> updates_{0}, failures_{0}, uncommitted_{0};
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
