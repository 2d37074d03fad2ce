// Expiry: keeps scan_keys bounded by the de-duplication horizon (--retention). From a thread and connection
// of its own it deletes the rows whose first_seen is older than the horizon, oldest first, in bounded slices
// (one short transaction each), and after every pass reads the table's vital signs: the age of the oldest
// row, table and index bytes, dead tuples.
// Invariant: it never changes a verdict. A row older than the horizon already counts as absent to every
// writer (the batch INSERT takes it over: storage/pg/batch_statement.h) and to /lookup, so deleting it (or
// failing to) changes only the table's size. A slice locks the rows it deletes with SKIP LOCKED: a writer
// taking over one of them, or another instance's expiry, is skipped, never waited for, and a row a writer
// has locked is re-read by that writer after this slice commits (ON CONFLICT retries the insert).
// Packs (--keys=gs1, issue 24; ExpiryOptions::pack_horizons): a second slice kind deletes the rows whose own
// keep_until has passed (earliest first, through its partial index, sql/006); the first_seen slice then covers
// only the rows without a keep_until (which alone follow the retention). Same invariant: a row past its
// keep_until already counts as absent to the writers and /lookup.
// Falling behind (the oldest unpinned row older than 1.5x the horizon, or the earliest keep_until more than 1.5
// passes overdue) is logged once per episode and counted.
// With retention off and no pack horizons it only reads the vital signs (nothing is deleted).
// Use: one per process, Start() after Store::Start() has applied the migrations, Shutdown() before exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/background_loop.h"
#include "storage/clock/pg_clock.h"
#include "storage/conn_target.h"
#include "storage/log_sink.h"

namespace scangate::storage {

// Rows one slice deletes (one transaction). 5 000: a slice of ~5 000 index-ordered rows takes a few ms of
// PostgreSQL time and holds its row locks that long (8 ms per 5 000-row slice at R = 24 s, 12 k rows/s;
// bench/RESULTS.md "Issue 22: expiry designs").
inline constexpr std::int64_t kExpirySliceRows = 5000;

struct ExpiryOptions {
  std::string conninfo;             // libpq connection string, connection defaults already applied (conninfo.h)
  std::chrono::seconds retention{0};  // the horizon; 0 = off (no first_seen slices)
  bool pack_horizons = false;         // StoreOptions::pack_horizons: keep_until slices (with retention on or off)
  // Time between passes; 0 = derived: a tenth of the horizon, at least 1 s, at most 60 s (so a row is gone
  // within 1.1x the horizon at most, normally). Off: 60 s.
  std::chrono::milliseconds interval{0};
  std::int64_t slice_rows = kExpirySliceRows;
  std::shared_ptr<LogSink> log;  // empty = StderrLogSink()
  // This instance's bounds of the database's clock (storage/clock/pg_clock.h; must outlive the Expiry), or none: a
  // slice deletes nothing while PostgreSQL's now() is past PgClock::GuardUs — its clock stepped forward and the step
  // is not recorded yet (sql/017), so rows would look older than they are.
  const PgClock* clock = nullptr;
};

struct ExpiryStats {
  std::uint64_t passes = 0;         // passes that completed (slices and vital signs)
  std::uint64_t failures = 0;       // passes that failed (connection, timeout, any error)
  std::uint64_t rows_expired = 0;   // rows deleted (both slice kinds)
  std::uint64_t rows_expired_keep_until = 0;  // of which by their own keep_until (pack horizons)
  std::uint64_t behind_events = 0;  // episodes of the oldest row older than 1.5x the horizon
  bool behind = false;              // in such an episode now
  // Vital signs of the last successful pass (empty before the first one).
  // now() - min(first_seen) of the rows without a keep_until (all rows, for raw keys); empty when there is none.
  std::optional<double> oldest_age_seconds;
  // min(keep_until) - now() (negative: overdue); empty when no row has a keep_until.
  std::optional<double> earliest_keep_until_in_seconds;
  std::int64_t table_bytes = -1;             // pg_table_size('scan_keys') (heap, FSM, VM, TOAST)
  std::int64_t index_bytes = -1;             // pg_indexes_size('scan_keys')
  std::int64_t dead_tuples = -1;             // pg_stat_user_tables.n_dead_tup (an estimate)
  std::int64_t live_tuples = -1;             // pg_stat_user_tables.n_live_tup (an estimate)
  // Expiry lag: how far the oldest unpinned row is past the horizon, or (pack horizons) the earliest keep_until
  // is overdue, whichever is more (0 when within both). Off: 0.
  double lag_seconds = 0;
};

class Expiry {
 public:
  explicit Expiry(ExpiryOptions options);
  ~Expiry();  // calls Shutdown()
  Expiry(const Expiry&) = delete;
  Expiry& operator=(const Expiry&) = delete;

  // Starts the thread; its first pass runs at once (a table that grew while no instance ran shrinks first).
  // Call once.
  void Start();
  // One pass now, on the calling thread (tests; the thread calls it): connects if needed, deletes the expired
  // rows slice by slice, reads the vital signs; returns the rows deleted. Throws pqxx errors (the connection is
  // dropped and reopened on the next call). Not concurrently with itself (call it only when not Start()ed).
  std::uint64_t RunOnce();
  // Stops and joins the thread (a slice in progress finishes first). Idempotent.
  void Shutdown();
  // Connects to `conninfo` (defaults already applied, as options.conninfo) from the next pass on; the current connection is
  // dropped then (a partition moved: storage/partitions/partitioned_store.h). Thread-safe.
  void Retarget(std::string conninfo) { target_.Set(std::move(conninfo)); }

  // The interval actually used (options.interval, or derived from the horizon).
  std::chrono::milliseconds interval() const { return interval_; }
  // Counters and vital signs so far. Safe to call concurrently.
  ExpiryStats Stats() const;

 private:
  // One pass with its error handling and logging.
  void Pass();
  // ExpiryOptions::clock's PgClock::GuardUs (nullopt: none), for each slice as it is sent.
  std::optional<std::int64_t> Guard() const;
  // Deletes slices by `slice` (one statement each, returning the rows deleted) until one comes back short; the
  // rows deleted.
  template <typename Slice>
  std::uint64_t DeleteSlices(Slice slice, bool keep_until);
  // Updates the behind state from the oldest unpinned row's age and the earliest keep_until; logs a change.
  void NoteAge(std::optional<double> oldest_age_seconds, std::optional<double> earliest_keep_until_in_seconds)
      ABSL_LOCKS_EXCLUDED(mu_);

  const ExpiryOptions options_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<LogSink> log_;
  ConnTarget<std::string> target_;  // options.conninfo, or the last Retarget's
  std::uint64_t target_seen_ = 0;   // the generation of target_ conn_ follows; as conn_
  struct Conn;                  // the pqxx connection (storage/ keeps pqxx out of its headers)
  std::unique_ptr<Conn> conn_;  // touched by one thread at a time (the thread, or RunOnce's caller)
  bool failing_ = false;        // the last pass failed (a recovery is logged once); as conn_

  mutable Mutex mu_;
  ExpiryStats stats_ ABSL_GUARDED_BY(mu_);
  BackgroundLoop loop_;  // last: stopped (joined) before the members its passes use go away
};

}  // namespace scangate::storage
