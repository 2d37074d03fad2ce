// Store: the exact authority — PostgreSQL table scan_keys behind a pool of group-commit writers. This is the
// facade: it routes items to writers and owns start-up, shutdown and the counters; the design lives in the
// units it wires together (storage/README.md has the reasoning and the figures):
//   storage/write/writer_queue.h  per-writer FIFO + priority lane, tickets, the pending bound
//   storage/write/writer.h        the writer loop: take a batch, run it, go down / reconnect with backoff
//   storage/write/batch_runner.h  one batch: statement shape (COPY or ON CONFLICT), bisection, dead letters
//   storage/write/in_doubt.h      a COMMIT whose answer was lost, settled by txid_status()
//   storage/write/completions.h   every item's one delivery;  storage/write/store_metrics.h  the counters
//   storage/start/startup.h       the start-up retry policy and migrations;  storage/pg/  the PostgreSQL plumbing
// Invariant: an outcome kInserted/kDuplicate is delivered only after the transaction that decided it
// committed; of all observations of one digest (any thread, any Store, any process) exactly one ever
// gets kInserted. Outages yield kUnavailable or a refused Submit, never a guessed verdict.
// Use one Store per process (or one per partition, under storage/partitions/partitioned_store.h); the server posts
// completions back to its own executors.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/digest.h"
#include "storage/exact_store.h"
#include "storage/outcome.h"
#include "storage/start/start_error.h"
#include "storage/write/store_metrics.h"
#include "storage/store_options.h"
#include "storage/write_behind_target.h"

namespace scangate::storage {

class Writer;
struct StoreShared;
class PgClock;

class Store final : public ExactStore, public WriteBehindTarget {
 public:
  explicit Store(StoreOptions options);
  ~Store();  // calls Shutdown()
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Connects (retrying connection failures until start_timeout), applies migrations, starts the writers.
  // Throws StartError (permanent() when retrying cannot help). Call once, from one thread, first.
  void Start();

  // Exact insert-if-absent of `d`; `done` runs once on a writer thread with the committed outcome (or
  // kUnavailable / kUnknown). Returns false — nothing queued, `done` never runs — when the route's writer is
  // down, the queue is full, or the store is shutting down. Safe to call concurrently; never blocks on I/O.
  // A Submit item skips the write-behind backlog (a batch of its own) unless a write-behind row of its digest
  // is pending: then it queues behind that row. With a `ticket`, `ticket->Cancel()` withdraws the item while it
  // is still queued (then `done` never runs); a cancelled item still counts against queue_limit until a writer
  // skips it. `expect`: see Expect (outcome.h); PostgreSQL decides the outcome either way. `attrs`: see
  // PackAttrs (outcome.h); a row expires by its keep_until when it has one, else by --retention (the batch
  // INSERT takes an expired row over with the new attrs); the Result carries the row's lot and expiry.
  bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
              std::shared_ptr<Ticket> ticket = nullptr, Expect expect = Expect::kUnknown,
              PackAttrs attrs = {}) override;

  // ack=filter write-behind: recorded with lag <= flush_interval while the database is up, retried
  // across outages, never dropped once accepted (except at Shutdown() after shutdown_retry of outage).
  // Returns false when the queue is full or the store is shutting down. Safe to call concurrently.
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source) {
    return SubmitWriteBehind(route, d, std::move(source), Completion{}, 0);
  }
  // The same with the row's first_seen given (ExactStore: the server's recent set answers with it) and the
  // observing request's idempotency record written with the row (issue 34; none = no header).
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, std::int64_t first_seen_us,
                         const std::optional<RequestId>& request) override {
    return SubmitWriteBehind(route, d, std::move(source), Completion{}, first_seen_us, request);
  }
  // `done` (optional) runs once on a writer thread: kInserted/kDuplicate after the transaction holding the
  // row committed, or kUnavailable if it is dead-lettered or given up at Shutdown().
  // `first_seen_us` (µs since the epoch, 0 = now() at insert): the journal's time of the first observation,
  // so a replayed row keeps it and PostgreSQL's first_seen equals what the journal already answered.
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, Completion done,
                         std::int64_t first_seen_us, const std::optional<RequestId>& request = std::nullopt);
  // The same for a group of rows whose outcomes go to `sink` (which must outlive Shutdown()): routed as
  // SubmitWriteBehind routes each row, but each writer's lock is taken once per group and each writer woken
  // at most once. Returns how many rows were accepted — always a prefix of `rows`, in order; the rest were
  // refused (queue full, or shutting down) and never reach the sink. Safe to call concurrently.
  std::size_t SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) override;

  // SubmitWriteBehindGroup in two phases, for a caller that must keep the prefix contract over several Stores
  // (storage/partitions/partitioned_store.h): ReserveWriteBehind takes room for up to `n` rows in the queue bound and
  // returns how many it got (0 when full or not accepting); ReleaseReserved gives back room not used;
  // SubmitWriteBehindGroupReserved queues `rows` (exactly as many as reserved and not released) as
  // SubmitWriteBehindGroup does — all of them, or none (false: shutting down; their reservation released).
  // Safe to call concurrently.
  std::size_t ReserveWriteBehind(std::size_t n);
  void ReleaseReserved(std::size_t n);
  bool SubmitWriteBehindGroupReserved(std::span<const WriteBehindRow> rows, WriteBehindSink& sink);

  // Points the store at another database (a partition moved: storage/partitions/partitioned_store.h): every writer
  // drops its connection before its next batch (an idle one within ~250 ms) and connects to `url`; WarmLoad uses
  // `url` from its next call. An in-doubt COMMIT is still settled on the database that received it. The new
  // database must already hold the schema (a moved partition is a copy; no migrations are applied here: a
  // writer that cannot prepare its statements there goes down and logs why). Throws
  // std::invalid_argument (nothing changed) when libpq cannot parse `url`. Safe to call concurrently.
  void Retarget(std::string url);
  // The instance's bounds of this database's clock (must outlive the store; nullptr: none). Every later batch
  // carries its PgClock::GuardUs: PostgreSQL refuses (55000, an outage to the writer: retried) to take a row over
  // while its now() is past it — its clock stepped forward and no instance has recorded the step yet (sql/017).
  // Any thread.
  void AttachClock(const PgClock* clock);

  // True when every writer is connected and its last transaction succeeded. Safe to call concurrently.
  bool up() const override;

  // True while pending items reach queue_limit (see ExactStore::full). A hint. Safe to call concurrently.
  bool full() const override;

  // Streams digests with first_seen > now() - window to `sink` in chunks of <= 65536 over its own
  // connection(s), from every epoch (the open one and the closed ones: sql/018); returns the count. Every digest
  // visible in one snapshot (taken at the start) is delivered exactly once; rows committed later are not — unless the
  // epochs' catalog changed during the load (an epoch closed): then the load is made again (up to 3 times, then it
  // throws), and digests of the first loads are delivered again (the count is the last load's). With warm_streams > 1 the sink IS CALLED
  // CONCURRENTLY from up to warm_streams threads (not the caller's): it must be thread-safe (the
  // server passes ShardedFilter::InsertBatchConcurrently). An exception thrown by the sink stops all
  // streams and is rethrown here unchanged. Throws pqxx / std::runtime_error on database errors.
  // Safe to call concurrently. (storage/read/warm_load.cc)
  std::uint64_t WarmLoad(std::chrono::seconds window,
                         const std::function<void(std::span<const Digest>)>& sink);

  // Stops accepting, flushes everything queued (write-behind included), joins the writers. Idempotent.
  void Shutdown();

  // Snapshot of counters and histograms. Safe to call concurrently.
  StoreStats Stats() const override;

 private:
  bool Enqueue(std::uint32_t route, const Digest& d, std::string source, Completion done, bool write_behind,
               std::shared_ptr<Ticket> ticket, std::int64_t first_seen_us, Expect expect, PackAttrs attrs);
  // One load of WarmLoad's, in one snapshot; `catalog_moved`: the epochs' catalog generation read after it is not
  // the one in that snapshot (an epoch closed during the load).
  std::uint64_t WarmLoadOnce(std::chrono::seconds window, const std::function<void(std::span<const Digest>)>& sink,
                             bool& catalog_moved);

  StoreOptions options_;
  std::unique_ptr<StoreShared> shared_;
  std::vector<std::unique_ptr<Writer>> writers_;
  std::atomic<bool> accepting_{false};
  std::once_flag shutdown_once_;
  std::atomic<bool> started_{false};
  std::atomic<std::uint32_t> last_warm_streams_{0};
};

}  // namespace scangate::storage
