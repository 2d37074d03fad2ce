// What a writer thread works with: StoreShared — what every writer shares with the Store facade (options,
// connection string, metrics, log, the pending bound) — and WriterState — one writer's own queue, connection
// and COPY back-off. Split out so the writer loop (storage/write/writer.h), the batch runner
// (storage/write/batch_runner.h), in-doubt settlement (storage/write/in_doubt.h) and completions
// (storage/write/completions.h) see the same state without seeing each other. Invariant: WriterState's non-queue
// members are touched by its writer thread only (and by Store::Start() before that thread exists).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/closed_epochs.h"
#include "storage/conn_target.h"
#include "storage/log_sink.h"
#include "storage/outcome.h"
#include "storage/pg/pg_connection.h"
#include "storage/clock/pg_clock.h"
#include "storage/pg/table_layout.h"
#include "storage/write/store_metrics.h"
#include "storage/store_options.h"
#include "storage/write/writer_queue.h"

namespace scangate::storage {

// Where the writers connect: the connection strings of one target database (replaced by Store::Retarget, each
// replacement a new generation of StoreShared::target: storage/conn_target.h).
struct StoreTarget {
  std::string writer_conninfo;  // url + conninfo defaults (writers)
  std::string warm_conninfo;    // url + conninfo defaults with warm_statement_timeout (warm load, migrations)
};

struct StoreShared {
  StoreShared(const StoreOptions& o, StoreTarget first, std::shared_ptr<LogSink> sink)
      : options(o), log(std::move(sink)), pending(o.queue_limit), target(std::move(first)) {}
  const StoreOptions& options;
  const std::shared_ptr<LogSink> log;  // options.log or StderrLogSink() (labelled with options.label)
  StoreMetrics metrics;
  PendingBound pending;                      // accepted, unfinished items (bounded by queue_limit)
  std::atomic<std::uint64_t> cancelled{0};   // Submit items withdrawn by Ticket::Cancel
  // The target database; a writer compares generations before each batch (one atomic load on its hot path).
  ConnTarget<StoreTarget> target;
  // This instance's bounds of the target's clock (Store::AttachClock; none: no guard): each batch carries its
  // PgClock::GuardUs, and PostgreSQL refuses to take a row over by a clock that stepped forward unrecorded.
  std::atomic<const PgClock*> clock{nullptr};
};

struct WriterState {
  unsigned index = 0;
  // Writer thread only (and Store::Start() before it exists): the target the writer's connection is (or will
  // be) on. An in-doubt COMMIT is settled on this one — the xid belongs to its database — even after a Retarget.
  StoreTarget target;
  std::uint64_t target_generation = 0;  // the generation of StoreShared::target `target` is; as `target`
  std::chrono::seconds retention{0};     // StoreOptions::retention: the batch statements' horizon
  TableLayout layout = TableLayout::kUuid16;  // writer thread only: scan_keys' layout when `conn` was prepared
  std::int64_t epoch_generation = 0;  // writer thread only: the epochs' catalog generation read when `conn` connected
  std::vector<ClosedEpoch> closed_epochs;  // writer thread only: that catalog's closed epochs (its probe is prepared)
  WriterQueue queue;
  std::unique_ptr<PgConnection> conn;      // writer thread only
  std::vector<WriteBehindDone> sink_rows;  // writer thread only: Deliver's batch for a WriteBehindSink
  unsigned copy_pause = 0;  // writer thread only: the COPY back-off (kMaxCopyPause, storage/write/batch_runner.cc)
  unsigned copy_skip = 0;   // writer thread only: COPY-eligible batches still to write through ON CONFLICT
};

// Takes the store's current target into w.target when its generation moved on, dropping w.conn (connected to
// the old one). True when it did. Writer thread, before a batch and before a (re)connect.
bool FollowTarget(const StoreShared& shared, WriterState& w);

// Opens a writer connection on `conninfo` (utf-8 client encoding, the batch statements prepared for the table's
// layout, which goes to w.layout; the epochs' catalog read into w.epoch_generation, refused when this version does
// not check its epochs: storage/epochs/catalog.h) into w.conn. False (w.conn untouched) with `error` (libpq's first line) set when that fails. Writer thread.
bool ConnectWriter(WriterState& w, const std::string& conninfo, std::string* error);

// Never carries a key or digest: only state and libpq's error summary.
void LogPgState(LogSink& log, bool up, unsigned writer, const std::string& error);

}  // namespace scangate::storage
