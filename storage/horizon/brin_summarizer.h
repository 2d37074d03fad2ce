// BrinSummarizer: keeps the first_seen BRIN index (sql/002, sql/003) summarized, from a thread and connection
// of its own. PostgreSQL's autosummarize cannot keep up with scangate's insert rates (sql/003 says why and
// turns it off): this calls brin_summarize_new_values() every `interval` instead, which summarizes every
// filled block range not summarized yet — the table's newest pages, normally still in shared buffers.
// Invariant: it never changes what a query returns. An unsummarized range is always read by a BRIN scan, so
// summarizing (or failing to) changes only the warm start's speed; every failure is logged and retried at
// the next turn, never surfaced to requests. It takes the table's SHARE UPDATE EXCLUSIVE lock (as VACUUM
// does; inserts do not wait for it) under a short lock_timeout, so a running (auto)VACUUM makes it skip a
// turn instead of queueing other lockers behind it. Insufficient privilege (the migrations were run by
// another role, which owns the index) or a missing index stops it for good with one log line.
// Use: one per process, Start() after Store::Start() has applied the migrations, Shutdown() before exit.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/background_loop.h"
#include "storage/conn_target.h"
#include "storage/log_sink.h"

namespace scangate::storage {

struct BrinSummarizerOptions {
  std::string conninfo;  // libpq connection string, connection defaults already applied (conninfo.h)
  // Time between passes. 10 s: at 55 k rows/s a pass summarizes ~190 ranges (~6 000 pages, mostly in shared
  // buffers) in ~65 ms of PostgreSQL time, ~0.7 % of a core (0.34 ms per range, measured: storage/README.md).
  // Longer only lets more unsummarized history accumulate for a warm start to read; the cost per range is
  // the same.
  std::chrono::milliseconds interval{10000};
  std::shared_ptr<LogSink> log;  // empty = StderrLogSink()
};

struct BrinSummarizerStats {
  std::uint64_t passes = 0;    // brin_summarize_new_values() calls that succeeded
  std::uint64_t ranges = 0;    // block ranges they summarized
  std::uint64_t failures = 0;  // passes that failed (connection, lock timeout, any error)
  bool stopped = false;        // given up for good (insufficient privilege, no such index)
};

class BrinSummarizer {
 public:
  explicit BrinSummarizer(BrinSummarizerOptions options);
  ~BrinSummarizer();  // calls Shutdown()
  BrinSummarizer(const BrinSummarizer&) = delete;
  BrinSummarizer& operator=(const BrinSummarizer&) = delete;

  // Starts the thread; its first pass runs one `interval` from now. Call once.
  void Start();
  // One pass now, on the calling thread (tests; the thread calls it): connects if needed and returns the
  // ranges summarized. Throws pqxx errors (the connection is dropped and reopened on the next call). Not
  // concurrently with itself (the thread's passes included: call it only when not Start()ed).
  int RunOnce();
  // Stops and joins the thread (a pass in progress finishes first). Idempotent.
  void Shutdown();
  // Connects to `conninfo` (defaults already applied, as options.conninfo) from the next pass on; the current connection is
  // dropped then (a partition moved: storage/partitions/partitioned_store.h). Thread-safe.
  void Retarget(std::string conninfo) { target_.Set(std::move(conninfo)); }

  // Counters so far. Safe to call concurrently.
  BrinSummarizerStats Stats() const;

 private:
  // One pass with its error handling and logging: false = stop for good.
  bool Pass();

  const BrinSummarizerOptions options_;
  const std::shared_ptr<LogSink> log_;
  ConnTarget<std::string> target_;  // options.conninfo, or the last Retarget's
  std::uint64_t target_seen_ = 0;   // the generation of target_ conn_ follows; as conn_
  struct Conn;                  // the pqxx connection (storage/ keeps pqxx out of its headers)
  std::unique_ptr<Conn> conn_;  // touched by one thread at a time (the thread, or RunOnce's caller)
  bool failing_ = false;                    // the last pass failed (a recovery is logged once); as conn_

  mutable Mutex mu_;
  BrinSummarizerStats stats_ ABSL_GUARDED_BY(mu_);
  BackgroundLoop loop_;  // last: stopped (joined) before the members its passes use go away
};

}  // namespace scangate::storage
