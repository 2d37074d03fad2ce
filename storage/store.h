// Store: the exact authority — PostgreSQL table scan_keys behind a pool of group-commit writers.
// Invariant: an outcome kInserted/kDuplicate is delivered only after the transaction that decided it
// committed; of all observations of one digest (any thread, any Store, any process) exactly one ever
// gets kInserted. Outages yield kUnavailable or a refused Submit, never a guessed verdict.
// Use one Store per process; the server posts completions back to its own executors.
//
// Design (group commit): W writer threads, each owning one connection, one FIFO queue and one priority
// lane. A digest always goes to writer (route % W). Submit items go on the priority lane — a batch of their
// own, taken before the write-behind backlog (lanes alternate while both hold items) — unless a write-behind
// row of the same digest is still pending: then they join the FIFO behind it, so items of one digest are
// always written in order. A writer takes what is queued (up to batch_limit) into one transaction holding
// one INSERT ... ON CONFLICT statement for the whole batch (storage/batch_statement.h), commits, then runs
// the completions. A batch made only of write-behind rows and of Submit items the filter called new
// (Expect::kNew) goes by binary COPY instead, re-run through ON CONFLICT if a row exists (with a back-off
// when that keeps happening). Waiting (Submit) items are taken at once, so
// batches form naturally from whatever arrives during the previous commit; when only write-behind
// items are queued the writer waits up to flush_interval (from the oldest item) to gather more.
// A failed transaction completes its waiting items with kUnavailable, keeps its write-behind items
// at the front of the queue, marks the writer down (Submit on its routes fails fast) and reconnects
// with exponential backoff. Shutdown() flushes everything (bounded retry while the database is down).
// A COMMIT whose answer was lost is settled by txid_status() of the transaction's id (noted by the batch
// statement): committed -> the computed outcomes, aborted -> the batch runs again, otherwise kUnknown.
// A row PostgreSQL rejects (data error) is isolated by bisecting its batch; the good rows commit, the
// row's waiting item gets kUnavailable, a write-behind row is dead-lettered after kMaxRowAttempts.
// Details and the reasoning: storage/README.md.
// Write-behind rows may also come as a group (SubmitWriteBehindGroup: the journal drain's path), each with a
// tag instead of a closure; a writer reports a batch's finished rows to the group's WriteBehindSink at once.
// A waiting item carries a Ticket: its submitter may give up (request deadline) while the item is still
// queued — then it is never written and its completion never runs — but not once a writer has taken it.
// Every connection gets storage/conninfo.h's defaults (timeouts, keepalives, application_name=scangate).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/functional/function_ref.h>

#include "core/digest.h"
#include "storage/log_sink.h"
#include "storage/exact_store.h"

namespace scangate::storage {

// kUnavailable: nothing was recorded by this attempt (definite). kUnknown: the attempt MAY have recorded
// the digest — its COMMIT was sent, the answer lost, and PostgreSQL could not say (txid_status NULL or
// error, or no reconnect within kInDoubtResolveFor); a retry may then get kDuplicate.
enum class Outcome : std::uint8_t { kInserted, kDuplicate, kUnavailable, kUnknown };

struct Result {
  Outcome outcome;
  std::string first_seen;  // RFC 3339 UTC with microseconds, "2026-11-29T21:43:09.123456Z"; empty unless
                           // kInserted/kDuplicate
  std::int64_t first_seen_us = 0;  // the same instant in µs since the epoch; valid when first_seen is set
};

// A write-behind row that PostgreSQL rejects with a data error (SQLSTATE class 22/23) in a transaction
// of its own this many times is dead-lettered (logged by digest, counted, dropped). Such errors are
// deterministic in practice, so 1 would do; 3 (each retry after kRowRetryPause in store.cc) absorbs a
// misclassified momentary error at the cost of two extra single-row transactions per bad row.
inline constexpr int kMaxRowAttempts = 3;
// How long a writer tries to settle an in-doubt COMMIT (reconnect, then poll txid_status while "in
// progress") before answering kUnknown. Below common HTTP client timeouts (5-10 s) so the client still
// gets an answer; long enough for a connection blip or a fast PostgreSQL restart.
inline constexpr std::chrono::milliseconds kInDoubtResolveFor{3000};

// Test-only faults injected by StoreOptions::fault_hook just before a batch's COMMIT.
enum class StoreFault : std::uint8_t {
  kNone,
  kCommitAnswerLost,    // COMMIT succeeds, then the writer behaves as if the connection broke during it
  kLostBeforeCommit,    // the transaction is rolled back instead, then the same "connection broke in COMMIT"
  kXidUnknowable,       // as kCommitAnswerLost, with the noted xid moved 2^32 into the future (PostgreSQL
                        // then answers "transaction ID ... is in the future", as a replaced server would)
  kSocketShutBeforeCommit,  // shutdown(2) the connection's socket, then COMMIT for real: libpq/pqxx's own
                            // failure path (pqxx::in_doubt_error); the server aborts the transaction
};

// Runs on a writer thread after the commit (or failure): must not block; post to your own executor.
using Completion = std::function<void(const Result&)>;

// A write-behind row handed over in a group (Store::SubmitWriteBehindGroup): no closure, a tag instead.
struct WriteBehindRow {
  std::uint32_t route = 0;
  Digest digest{};
  std::string_view source;         // copied by the Store
  std::int64_t first_seen_us = 0;  // as SubmitWriteBehind's
  std::uint64_t tag = 0;           // the submitter's (the journal drain: the record's LSN); handed back
  bool flag = false;               // the submitter's (the journal drain: recovered at start); handed back
};

// What became of one row of a group: kInserted/kDuplicate once the transaction holding it committed,
// kUnavailable when it was dead-lettered or given up at Shutdown().
struct WriteBehindDone {
  Digest digest;
  std::uint64_t tag;
  bool flag;
  Outcome outcome;
};

// Receives the finished rows of SubmitWriteBehindGroup, once per row, in batches (a writer reports the
// rows of one transaction — or of one dead letter, one give-up — in one call). Called on writer threads,
// concurrently from several: must be thread-safe, must not block, must not throw.
class WriteBehindSink {
 public:
  virtual void Done(std::span<const WriteBehindDone> rows) = 0;

 protected:
  ~WriteBehindSink() = default;
};

// Store::Start() failed. `permanent`: a misconfiguration retrying cannot heal (authentication failed,
// permission denied, a migration PostgreSQL rejects as invalid) — exit instead of retrying. `cause` is
// "<SQLSTATE or kind>: <first line of the message>" (never the password).
class StartError : public std::runtime_error {
 public:
  StartError(const std::string& cause, std::string sqlstate, bool permanent)
      : std::runtime_error(cause), sqlstate_(std::move(sqlstate)), permanent_(permanent) {}
  const std::string& sqlstate() const { return sqlstate_; }  // "" when libpq gave none (connection phase)
  bool permanent() const { return permanent_; }

 private:
  std::string sqlstate_;
  bool permanent_;
};

struct StoreOptions {
  std::string url;                                  // libpq URL
  unsigned writers = 2;                             // writer threads, one connection each
  std::size_t batch_limit = 1024;                   // max items per transaction
  std::chrono::microseconds flush_interval{2000};   // max write-behind lag (ack=filter)
  std::size_t queue_limit = 65536;                  // per-store bound on accepted, unfinished items
  std::chrono::milliseconds reconnect_backoff_max{2000};
  // Added: how long Shutdown() keeps retrying queued write-behind items while the database is down.
  std::chrono::milliseconds shutdown_retry{30000};
  // Added: how long Start() retries the first connection before throwing.
  std::chrono::milliseconds start_timeout{30000};
  // Connection safety (storage/conninfo.h), applied unless the URL sets them. statement_timeout bounds a
  // writer's statements: the server sets it a little above --request-timeout, so a statement outliving
  // every waiting request is cancelled (nothing of its batch commits). 0 = none.
  std::chrono::milliseconds statement_timeout{0};
  // Warm load and migrations: the COPY legitimately runs for seconds (10 M keys: 5-26 s measured) and a
  // migration may build an index over the whole table: their own, long bound.
  std::chrono::milliseconds warm_statement_timeout{600000};
  std::chrono::milliseconds tcp_user_timeout{10000};  // unacknowledged data this long: connection dropped
  // Added: WarmLoad parallelism. 1 = one COPY over one connection. N > 1 = when the window is estimated
  // to hold at least warm_parallel_min_fraction of the table's rows, the heap is split into N block
  // ranges by ctid, one connection + thread + COPY per range, all reading one exported snapshot.
  // Otherwise (small recent window) one COPY with the BRIN bitmap scan. Measured on the shared 2-core
  // box (load average 5.5-9), 10 M keys: 1 stream 6.0-9.8 s, 2: 5.7-9.5 s, 3: 4.8-6.2 s, 4: 4.6-5.6 s,
  // 8: 4.5 s (storage/README.md "Figures"); 4 is the default, more mostly takes CPU from neighbours.
  unsigned warm_streams = 4;
  double warm_parallel_min_fraction = 0.5;  // estimated rows-in-window / reltuples; 0 = always split
  // Where storage reports events (pg_state, commit_in_doubt, dead_letter, write_behind_lost). Empty =
  // StderrLogSink(). The server passes an adapter to server::Log (one writer, one format).
  std::shared_ptr<LogSink> log;
  // TESTS ONLY. Called on the writer thread once per batch transaction, just before COMMIT; its answer
  // injects a fault (see StoreFault). Empty (the default) costs one branch per batch.
  std::function<StoreFault()> fault_hook;
};

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
  // Added
  std::uint64_t batch_failures;       // batch transactions that failed (each marks its writer down)
  std::uint64_t write_behind_lost;    // write-behind items given up at Shutdown() (database down too long)
  std::uint32_t last_warm_streams;    // COPY streams the last finished WarmLoad used (0 = none yet)
  std::uint64_t dead_lettered;        // write-behind rows PostgreSQL rejected kMaxRowAttempts times: dropped
  // COMMITs whose answer was lost, by how txid_status() settled them (committed also counts a batch that
  // wrote nothing, whose outcomes hold either way).
  std::uint64_t in_doubt_committed, in_doubt_aborted, in_doubt_unknown;
  std::uint64_t cancelled;            // Submit items withdrawn by Ticket::Cancel (never written)
  // Batches of write-behind items only (Bloom negatives) go by binary COPY: committed COPY batches, and
  // COPYs that met an existing row (aborted; the batch re-ran through ON CONFLICT).
  std::uint64_t copy_batches, copy_fallbacks;
};

class Store final : public ExactStore {
 public:
  explicit Store(StoreOptions options);
  ~Store();  // calls Shutdown()
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Connects (retrying connection failures until start_timeout), applies migrations, starts the writers.
  // Throws StartError (permanent() when retrying cannot help). Call once, from one thread, first.
  void Start();

  // Exact insert-if-absent of `d`; `done` runs once on a writer thread with the committed outcome (or
  // kUnavailable). Returns false — nothing queued, `done` never runs — when the route's writer is down,
  // the queue is full, or the store is shutting down. Safe to call concurrently; never blocks on I/O.
  // With a `ticket`, `ticket->Cancel()` withdraws the item while it is still queued (then `done` never
  // runs); a cancelled item still counts against queue_limit until a writer skips it.
  // `expect` = Expect::kNew (a trusted Bloom negative): a batch made only of such items and write-behind
  // rows goes by binary COPY (see WriteBatch in store.cc); the outcome is PostgreSQL's either way.
  bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
              std::shared_ptr<Ticket> ticket = nullptr, Expect expect = Expect::kUnknown) override;

  // ack=filter write-behind: recorded with lag <= flush_interval while the database is up, retried
  // across outages, never dropped once accepted (except at Shutdown() after shutdown_retry of outage).
  // Returns false when the queue is full or the store is shutting down. Safe to call concurrently.
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source) {
    return SubmitWriteBehind(route, d, std::move(source), Completion{}, 0);
  }
  // The same with the row's first_seen given (ExactStore: the server's recent set answers with it).
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source,
                         std::int64_t first_seen_us) override {
    return SubmitWriteBehind(route, d, std::move(source), Completion{}, first_seen_us);
  }
  // `committed` (optional; the journal drain's hook) runs once on a writer thread after the transaction
  // holding the row committed (kInserted/kDuplicate), or with kUnavailable if it is dead-lettered or given up
  // at Shutdown().
  // `first_seen_us` (µs since the epoch, 0 = now() at insert): the journal's time of the first observation,
  // so a replayed row keeps it and PostgreSQL's first_seen equals what the journal already answered.
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, Completion committed,
                         std::int64_t first_seen_us);
  // The same for a group of rows whose outcomes go to `sink` (which must outlive Shutdown()): routed as
  // SubmitWriteBehind routes each row, but each writer's lock is taken once per group and each writer woken
  // at most once. Returns how many rows were accepted — always a prefix of `rows`, in order; the rest were
  // refused (queue full, or shutting down) and never reach the sink. Safe to call concurrently.
  std::size_t SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink);

  // True when every writer is connected and its last transaction succeeded. Safe to call concurrently.
  bool up() const override;

  // True while pending items reach queue_limit (see ExactStore::full). Relaxed: a hint, nothing is
  // published through it. Safe to call concurrently.
  bool full() const override { return pending_.load(std::memory_order_relaxed) >= options_.queue_limit; }

  // Streams digests with first_seen > now() - window to `sink` in chunks of <= 65536 over its own
  // connection(s); returns the count. Every digest visible in one snapshot (taken at the start) is
  // delivered exactly once; rows committed later are not. With warm_streams > 1 the sink IS CALLED
  // CONCURRENTLY from up to warm_streams threads (not the caller's): it must be thread-safe (the
  // server passes ShardedFilter::InsertBatchConcurrently). An exception thrown by the sink stops all
  // streams and is rethrown here unchanged. Throws pqxx / std::runtime_error on database errors.
  // Safe to call concurrently.
  std::uint64_t WarmLoad(std::chrono::seconds window,
                         const std::function<void(std::span<const Digest>)>& sink);

  // Stops accepting, flushes everything queued (write-behind included), joins the writers. Idempotent.
  void Shutdown();

  // Snapshot of counters and histograms. Safe to call concurrently.
  StoreStats Stats() const override;

 private:
  struct Item;
  struct Writer;
  struct Metrics;
  struct Attempt;
  enum class PartEnd : std::uint8_t;
  enum class InDoubt : std::uint8_t;

  bool Enqueue(std::uint32_t route, const Digest& d, std::string source, Completion done, bool write_behind,
               std::shared_ptr<Ticket> ticket, std::int64_t first_seen_us = 0, Expect expect = Expect::kUnknown);
  void RunWriter(Writer& w);
  bool Connect(Writer& w, std::string* error);
  void ProcessBatch(Writer& w, std::vector<Item>& batch);
  PartEnd RunPart(Writer& w, std::vector<Item>& part, std::string& error);
  void WriteBatch(Writer& w, std::vector<Item>& batch, Attempt& att);
  void Commit(Writer& w, Attempt& att, absl::FunctionRef<void()> commit, absl::FunctionRef<void()> abandon);
  void RecordBatch(const std::vector<Item>& batch, const Attempt& att);
  InDoubt ResolveInDoubt(Writer& w, const Attempt& att, std::string& why);
  bool RejectRow(Writer& w, Item& item, const std::string& error);
  void FailBatch(Writer& w, std::vector<Item>& batch, const std::string& error);
  void GiveUp(Writer& w);
  void Finish(Writer& w, std::vector<Item>& items, const std::vector<Result>& results);
  void ReportToSinks(Writer& w, const std::vector<Item>& items, const std::vector<Result>& results);

  StoreOptions options_;
  std::string writer_conninfo_;  // options_.url + conninfo defaults (writers)
  std::string warm_conninfo_;    // the same with warm_statement_timeout (warm load, migrations)
  std::vector<std::unique_ptr<Writer>> writers_;
  std::unique_ptr<Metrics> metrics_;
  std::atomic<std::size_t> pending_{0};     // accepted, unfinished items (bounded by queue_limit)
  std::atomic<bool> accepting_{false};
  std::once_flag shutdown_once_;
  std::atomic<bool> started_{false};
  std::atomic<std::uint32_t> last_warm_streams_{0};
  std::atomic<std::uint64_t> cancelled_{0};
  std::shared_ptr<LogSink> log_;  // options_.log or StderrLogSink()
};

}  // namespace scangate::storage
