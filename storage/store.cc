#include "storage/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <libpq-fe.h>
#include <sys/socket.h>

#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string_view>
#include <thread>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>
#include <absl/functional/function_ref.h>

#include "core/digest_hash.h"
#include "core/thread_name.h"
#include "core/utf8.h"
#include "storage/batch_errors.h"
#include "storage/batch_statement.h"
#include "storage/conninfo.h"
#include "storage/error_summary.h"
#include "storage/histogram.h"
#include "storage/migrations.h"
#include "storage/pg_connection.h"
#include "storage/start_error.h"

namespace scangate::storage {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kBackoffMin{50};  // first reconnect delay; doubles up to reconnect_backoff_max
// deadlock_detected / serialization_failure are retried on the same connection this many times before the
// batch counts as failed. Inserts are sorted by digest, so concurrent batches should never deadlock.
constexpr int kMaxRollbackRetries = 3;
// An in-doubt COMMIT that txid_status() says was rolled back is run again at most this often per batch
// part (each such round already cost a lost connection); beyond it the writer goes down as in an outage.
constexpr int kMaxAbortedRetries = 2;
// txid_status() polling while the lost COMMIT is still "in progress" (and reconnect pauses while
// settling): 10, 20, 40 .. 200 ms, within kInDoubtResolveFor.
constexpr std::chrono::milliseconds kInDoubtPollMin{10};
constexpr std::chrono::milliseconds kInDoubtPollMax{200};
// Pause before a rejected write-behind row's next single-row attempt (see kMaxRowAttempts).
constexpr std::chrono::milliseconds kRowRetryPause{20};
// COPY back-off: after a COPY that a present row aborted, the writer's next COPY-eligible batches go through
// ON CONFLICT, as many as the pause (doubled per abort, halved per COPY that succeeds). The cap bounds what a
// workload whose "new" keys mostly exist (a second instance without key affinity, rows older than the
// window) wastes: one aborted COPY per ~65 batches, against one per batch without the back-off.
constexpr unsigned kMaxCopyPause = 64;
// Never carries a key or digest: only state and libpq's error summary.
void LogPgState(LogSink& log, bool up, unsigned writer, const std::string& error) {
  boost::json::object fields{{"state", up ? "up" : "down"}, {"writer", writer}};
  if (!up) fields["error"] = error;
  log.Write(up ? LogSeverity::kInfo : LogSeverity::kWarn, "pg_state", std::move(fields));
}

std::string DigestHex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * d.size());
  for (const auto b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

// Sources go into a binary text[] parameter; invalid UTF-8 or NUL would fail the whole batch (and a
// write-behind item would then be retried forever), so such a source is stored as NULL instead.
bool ValidUtf8NoNul(std::string_view s) { return IsValidUtf8(s, /*allow_nul=*/false); }

constexpr std::array<double, 11> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
constexpr std::array<double, 11> kCommitBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1};

}  // namespace

struct Store::Item {
  Digest digest;
  std::string source;
  Completion done;            // may be empty for write-behind (no commit hook)
  bool write_behind;
  Clock::time_point enqueued;
  std::int64_t first_seen_us = 0;  // 0 = now() at insert; else the journal's time of first observation
  std::shared_ptr<Ticket> ticket;  // Submit items only, optional
  Expect expect = Expect::kUnknown;  // Submit items: kNew = a trusted Bloom negative (COPY-eligible)
  int rejected = 0;           // data-error rejections in a transaction of its own (dead letter at kMaxRowAttempts)
  // SubmitWriteBehindGroup rows: where the outcome goes (instead of `done`), with the submitter's tag and flag.
  WriteBehindSink* sink = nullptr;
  std::uint64_t tag = 0;
  bool flag = false;
};

// What one batch transaction established before its COMMIT: the outcomes it would deliver and the
// transaction id to settle an in-doubt COMMIT with.
struct Store::Attempt {
  std::vector<Result> results;
  std::optional<std::int64_t> xid;  // txid_current_if_assigned(): empty = the transaction wrote nothing
  bool xid_trusted = false;         // false: no xid although rows were inserted (cannot settle: kUnknown)
  std::size_t distinct = 0;
  double seconds = 0;
  bool by_copy = false;             // written by binary COPY (BatchStatement::BeginCopy / CommitCopy)

  // Notes what the batch's statements established, before its COMMIT: outcomes are final once it succeeds,
  // so an in-doubt COMMIT settled as committed can deliver them.
  void Note(BatchAnswer&& answer) {
    results = std::move(answer.results);
    xid = answer.xid;
    xid_trusted = xid.has_value() || !answer.any_inserted;
  }
};

enum class Store::PartEnd : std::uint8_t {
  kDone,       // every item finished (or, outcome unknown, write-behind items re-queued)
  kDataError,  // PostgreSQL rejected a row of the part; nothing of it committed, the connection is fine
  kFailed,     // outage: hand the part (and what is left of the batch) to FailBatch
};

enum class Store::InDoubt : std::uint8_t { kCommitted, kAborted, kUnknown };

struct Store::Writer {
  unsigned index = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue ABSL_GUARDED_BY(mu);   // FIFO: write-behind rows, and Submit items queued behind them
  std::deque<Item> urgent ABSL_GUARDED_BY(mu);  // the priority lane: Submit items of digests with no row pending
  std::size_t waiting ABSL_GUARDED_BY(mu) = 0;  // Submit (non-write-behind) items in queue + urgent
  // Write-behind items per digest that are queued or in a transaction (not finished): a Submit of such a
  // digest joins `queue` behind its row, so items of one digest stay in order (never "new" twice).
  absl::flat_hash_map<Digest, std::uint32_t, DigestHash, DigestEq> behind ABSL_GUARDED_BY(mu);
  bool up ABSL_GUARDED_BY(mu) = false;          // Submit refuses while false
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> up_flag{false};  // mirror of `up` for lock-free reads by up()
  std::vector<WriteBehindDone> sink_rows;  // writer thread only: Finish's batch for a WriteBehindSink
  unsigned copy_pause = 0;  // writer thread only: the COPY back-off (kMaxCopyPause)
  unsigned copy_skip = 0;   // writer thread only: COPY-eligible batches still to write through ON CONFLICT
  std::unique_ptr<PgConnection> conn;  // writer thread only (Start() before the thread exists)
  std::thread thread;
};

struct Store::Metrics {
  mutable std::mutex mu;  // taken once per batch by a writer; Stats() copies under it
  std::uint64_t batches ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t keys_written ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t inserted ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t duplicates ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t unavailable ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t write_behind_conflicts ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t batch_failures ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t write_behind_lost ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t dead_lettered ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t in_doubt_committed ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t in_doubt_aborted ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t in_doubt_unknown ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t copy_batches ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t copy_fallbacks ABSL_GUARDED_BY(mu) = 0;
  std::array<std::uint64_t, kBatchBounds.size() + 1> batch_counts ABSL_GUARDED_BY(mu){};
  double batch_sum ABSL_GUARDED_BY(mu) = 0;
  std::array<std::uint64_t, kCommitBounds.size() + 1> commit_counts ABSL_GUARDED_BY(mu){};
  double commit_sum ABSL_GUARDED_BY(mu) = 0;
};

Store::Store(StoreOptions options)
    : options_(std::move(options)),
      metrics_(std::make_unique<Metrics>()),
      log_(options_.log ? options_.log : StderrLogSink()) {
  if (options_.writers == 0) throw std::invalid_argument("StoreOptions.writers must be at least 1");
  if (options_.batch_limit == 0) throw std::invalid_argument("StoreOptions.batch_limit must be at least 1");
  if (options_.queue_limit == 0) throw std::invalid_argument("StoreOptions.queue_limit must be at least 1");
  if (options_.reconnect_backoff_max < kBackoffMin) options_.reconnect_backoff_max = kBackoffMin;
  ConnectionDefaults defaults;
  defaults.statement_timeout = options_.statement_timeout;
  defaults.tcp_user_timeout = options_.tcp_user_timeout;
  writer_conninfo_ = WithConnectionDefaults(options_.url, defaults);  // throws std::invalid_argument
  defaults.statement_timeout = options_.warm_statement_timeout;
  warm_conninfo_ = WithConnectionDefaults(options_.url, defaults);
}

Store::~Store() { Shutdown(); }

void Store::Start() {
  if (started_.exchange(true)) throw std::logic_error("Store::Start called twice");
  const auto deadline = Clock::now() + options_.start_timeout;
  auto backoff = kBackoffMin;
  for (;;) {
    try {
      // The long statement bound: a future migration may build an index over millions of rows.
      pqxx::connection conn(warm_conninfo_);
      ApplyMigrations(conn);
      break;
    } catch (const std::exception& e) {
      StartError error = ClassifyStartError(e);
      // Only a connection failure that may heal is retried here (until start_timeout).
      if (error.permanent() || dynamic_cast<const pqxx::broken_connection*>(&e) == nullptr ||
          Clock::now() + backoff > deadline) {
        throw error;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, options_.reconnect_backoff_max);
    }
  }
  for (unsigned i = 0; i < options_.writers; ++i) {
    auto w = std::make_unique<Writer>();
    w->index = i;
    std::string error;
    if (Connect(*w, &error)) {
      w->up = true;
      w->up_flag.store(true);
    }
    writers_.push_back(std::move(w));
  }
  accepting_.store(true);
  for (auto& w : writers_) {
    Writer* raw = w.get();
    w->thread = std::thread([this, raw] {
      SetThreadName("sg-pg-writer-" + std::to_string(raw->index));
      RunWriter(*raw);
    });
  }
}

bool Store::Enqueue(std::uint32_t route, const Digest& d, std::string source, Completion done,
                    bool write_behind, std::shared_ptr<Ticket> ticket, std::int64_t first_seen_us,
                    Expect expect) {
  if (!accepting_.load() || writers_.empty()) return false;
  Writer& w = *writers_[route % writers_.size()];
  if (!write_behind && !w.up_flag.load()) return false;  // fail fast, without touching the lock
  if (pending_.fetch_add(1) >= options_.queue_limit) {
    pending_.fetch_sub(1);
    return false;
  }
  if (!ValidUtf8NoNul(source)) source.clear();
  bool notify;
  {
    std::lock_guard lk(w.mu);
    if (w.stop || (!write_behind && !w.up)) {
      pending_.fetch_sub(1);
      return false;
    }
    const bool was_empty = w.queue.empty() && w.urgent.empty();
    // A Submit skips the write-behind backlog (priority lane) unless a row of its digest is pending there.
    std::deque<Item>& lane = !write_behind && !w.behind.contains(d) ? w.urgent : w.queue;
    lane.push_back(Item{d, std::move(source), std::move(done), write_behind, Clock::now(), first_seen_us,
                        std::move(ticket), expect});
    if (write_behind) {
      ++w.behind[d];
    } else {
      ++w.waiting;
    }
    // A write-behind item only needs to wake the writer to start its flush timer (queue was empty) or
    // when it completes a batch; otherwise the writer is already committing or timing the flush.
    notify = !write_behind || was_empty || w.queue.size() >= options_.batch_limit;
  }
  if (notify) w.cv.notify_one();
  return true;
}

bool Store::Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                   std::shared_ptr<Ticket> ticket, Expect expect) {
  if (!done) done = [](const Result&) {};
  return Enqueue(route, d, std::move(source), std::move(done), false, std::move(ticket), 0, expect);
}

bool Store::SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, Completion committed,
                              std::int64_t first_seen_us) {
  return Enqueue(route, d, std::move(source), std::move(committed), true, nullptr, first_seen_us);
}

std::size_t Store::SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) {
  if (rows.empty() || !accepting_.load() || writers_.empty()) return 0;
  // Room for a prefix, taken exactly (a compare-exchange, not fetch_add then give back: a transient
  // overshoot of queue_limit would refuse a concurrent Submit, i.e. answer a request 503).
  std::size_t n = 0;
  std::size_t p = pending_.load();
  do {
    if (p >= options_.queue_limit) return 0;
    n = std::min(rows.size(), options_.queue_limit - p);
  } while (!pending_.compare_exchange_weak(p, p + n));
  const std::size_t nw = writers_.size();
  // The writers the prefix routes to are locked together, in index order (nothing else holds two writer
  // locks), so a Shutdown() racing this call refuses the whole group rather than a row in its middle.
  absl::InlinedVector<std::unique_lock<std::mutex>, 8> locks(nw);
  absl::InlinedVector<std::uint8_t, 8> involved(nw, 0);  // 1 = locked; 2 = to be notified afterwards
  for (std::size_t i = 0; i < n; ++i) involved[rows[i].route % nw] = 1;
  bool stopped = false;
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 0) continue;
    Writer& w = *writers_[k];
    locks[k] = std::unique_lock(w.mu);
    stopped = stopped || w.stop;
    // As in Enqueue: a write-behind row wakes its writer only to start the flush timer (queue empty)...
    if (w.queue.empty() && w.urgent.empty()) involved[k] = 2;
  }
  if (stopped) {
    for (auto& lk : locks) {
      if (lk.owns_lock()) lk.unlock();
    }
    pending_.fetch_sub(n);
    return 0;
  }
  const auto now = Clock::now();
  for (std::size_t i = 0; i < n; ++i) {
    const WriteBehindRow& row = rows[i];
    Writer& w = *writers_[row.route % nw];
    std::string source = ValidUtf8NoNul(row.source) ? std::string(row.source) : std::string();
    w.queue.push_back(Item{row.digest, std::move(source), Completion{}, true, now, row.first_seen_us, nullptr,
                           Expect::kUnknown, 0, &sink, row.tag, row.flag});
    ++w.behind[row.digest];
  }
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 0) continue;
    // ...or when it completes a batch.
    if (writers_[k]->queue.size() >= options_.batch_limit) involved[k] = 2;
    locks[k].unlock();
  }
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 2) writers_[k]->cv.notify_one();
  }
  return n;
}

bool Store::up() const {
  if (writers_.empty()) return false;
  for (const auto& w : writers_) {
    if (!w->up_flag.load()) return false;
  }
  return true;
}

void Store::RunWriter(Writer& w) {
  auto backoff = kBackoffMin;
  std::optional<Clock::time_point> give_up_at;  // set once shutdown is seen while the database is down
  std::vector<Item> batch;
  batch.reserve(options_.batch_limit);
  bool last_urgent = false;  // the previous batch came from the priority lane
  for (;;) {
    if (!w.conn && w.up_flag.load()) {
      // Connection gone while still marked up: an in-doubt COMMIT was settled without one (a batch that
      // wrote nothing needs no txid_status). Reconnect at once; failing that, go down like a failed batch
      // (queued waiting items fail now, Submit refuses) instead of holding them through the outage.
      std::string why;
      if (Connect(w, &why)) continue;
      std::vector<Item> none;
      FailBatch(w, none, "connection lost; reconnect failed: " + why);
      continue;
    }
    if (!w.conn) {
      // Down (a batch failed, or the connection made by Start() failed). The failing batch already
      // tried one immediate reconnect, so wait first: 50 ms, 100 ms, ... up to reconnect_backoff_max.
      {
        std::unique_lock lk(w.mu);
        if (w.stop) {
          if (w.queue.empty() && w.urgent.empty()) return;
          if (!give_up_at) give_up_at = Clock::now() + options_.shutdown_retry;
          if (Clock::now() >= *give_up_at) {
            lk.unlock();
            GiveUp(w);
            return;
          }
        }
        const bool stop_seen = w.stop;
        // Wake early only when Shutdown() begins: new write-behind items must not cause a reconnect storm.
        w.cv.wait_for(lk, backoff, [&] { return w.stop && !stop_seen; });
      }
      if (!Connect(w, nullptr)) {
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, options_.reconnect_backoff_max);
        continue;
      }
      backoff = kBackoffMin;
      {
        std::lock_guard lk(w.mu);
        w.up = true;
        w.up_flag.store(true);
      }
      LogPgState(*log_, true, w.index, "");
      continue;
    }

    {
      std::unique_lock lk(w.mu);
      for (;;) {
        if (w.queue.empty() && w.urgent.empty()) {
          if (w.stop) return;
          w.cv.wait(lk);
          continue;
        }
        if (w.waiting > 0 || w.stop || w.queue.size() >= options_.batch_limit) break;
        const auto deadline = w.queue.front().enqueued + options_.flush_interval;
        if (Clock::now() >= deadline) break;
        w.cv.wait_until(lk, deadline);
      }
      // The priority lane's items make a batch of their own (small, never behind write-behind rows; not
      // mixed in, so a write-behind batch stays eligible for COPY). Lanes alternate while both hold items,
      // so neither starves: a waiting item waits for at most the one batch in progress.
      const bool take_urgent = !w.urgent.empty() && (!last_urgent || w.queue.empty());
      last_urgent = take_urgent;
      std::deque<Item>& from = take_urgent ? w.urgent : w.queue;
      std::size_t skipped = 0;
      while (!from.empty() && batch.size() < options_.batch_limit) {
        Item& front = from.front();
        if (!front.write_behind) --w.waiting;
        if (front.ticket && !front.ticket->Take()) {
          ++skipped;  // cancelled by its submitter (deadline passed while queued): never written
        } else {
          batch.push_back(std::move(front));
        }
        from.pop_front();
      }
      if (skipped > 0) {
        cancelled_.fetch_add(skipped);
        pending_.fetch_sub(skipped);
      }
    }
    if (batch.empty()) continue;  // everything taken was cancelled

    ProcessBatch(w, batch);
    batch.clear();
  }
}

// Every writer connection prepares the batch statements once.
bool Store::Connect(Writer& w, std::string* error) {
  try {
    auto conn = std::make_unique<PgConnection>(writer_conninfo_);  // reactivation inhibited: see there
    // Sources are validated UTF-8: say so, or a non-UTF-8 database would store them as mojibake (and one
    // it cannot convert is rejected per row: see ProcessBatch).
    conn->set_client_encoding("UTF8");
    BatchStatement::Prepare(*conn);
    w.conn = std::move(conn);
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = ErrorSummary(e.what());
    return false;
  }
}

// Runs `batch` as one transaction and commits it. Fills `att` before the COMMIT (outcomes, xid), so an
// in-doubt COMMIT can still deliver them. Throws on any failure; records metrics on success.
void Store::WriteBatch(Writer& w, std::vector<Item>& batch, Attempt& att) {
  BatchStatement statement(batch.size());
  for (const auto& item : batch) statement.Add(item.digest, item.source, item.first_seen_us);
  att.distinct = statement.distinct();
  // A batch of Bloom negatives ("definitely new": write-behind rows, and Submit items the filter called new)
  // goes by binary COPY, which skips ON CONFLICT's probe of the primary key before each insert: 1.3–2.1x
  // per row from 256 rows up (bench/RESULTS.md "Batch statement shapes"), and −22 % of PostgreSQL's CPU per
  // row in ack=commit's ~44-row batches ("COPY for ack=commit's Bloom negatives"). A row that exists after
  // all (another instance, a row older than the window, a journal replay) aborts the COPY: the batch is then
  // re-run through ON CONFLICT in a fresh transaction, counted in copy_fallbacks, and the back-off pauses
  // COPY on this writer (kMaxCopyPause).
  bool use_copy = statement.copy_eligible() && std::all_of(batch.begin(), batch.end(), [](const Item& item) {
                    return item.write_behind || item.expect == Expect::kNew;
                  });
  if (use_copy && w.copy_skip > 0) {
    --w.copy_skip;
    use_copy = false;
  }
  const auto started = Clock::now();
  for (int attempt = 0;; ++attempt) {
    att.xid.reset();
    att.by_copy = use_copy;
    try {
      if (use_copy) {
        PGconn* c = w.conn->raw();
        try {
          att.Note(statement.BeginCopy(c));
          Commit(w, att, [&] { statement.CommitCopy(c); }, [&] { BatchStatement::AbandonCopy(c); });
        } catch (...) {
          BatchStatement::AbandonCopy(c);  // an open COPY is rolled back; an idle or broken connection left as is
          throw;
        }
      } else {
        pqxx::work tx(*w.conn);
        att.Note(statement.Run(tx));
        Commit(w, att, [&] { tx.commit(); }, [&] { tx.abort(); });  // ~tx rolls back when it throws
      }
      break;
    } catch (const CopyConflict&) {
      use_copy = false;  // the COPY was rolled back; nothing of it holds
      --attempt;         // not a rollback retry: runs once more, through ON CONFLICT
      w.copy_pause = std::min(std::max(2 * w.copy_pause, 1u), kMaxCopyPause);
      w.copy_skip = w.copy_pause;
      std::lock_guard lk(metrics_->mu);
      ++metrics_->copy_fallbacks;
    } catch (const pqxx::deadlock_detected&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    } catch (const pqxx::serialization_failure&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    }
  }
  if (att.by_copy) w.copy_pause /= 2;  // a COPY that held: the back-off decays
  att.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  RecordBatch(batch, att);
}

// Commits by `commit` — or, under StoreOptions::fault_hook (tests), fails around it the way the hook says.
// `abandon` rolls the open transaction back without committing.
void Store::Commit(Writer& w, Attempt& att, absl::FunctionRef<void()> commit, absl::FunctionRef<void()> abandon) {
  switch (options_.fault_hook ? options_.fault_hook() : StoreFault::kNone) {
    case StoreFault::kNone:
      break;
    case StoreFault::kXidUnknowable:
      if (att.xid) *att.xid += std::int64_t{1} << 32;  // one xid epoch ahead: "in the future"
      [[fallthrough]];
    case StoreFault::kCommitAnswerLost:
      commit();
      throw pqxx::in_doubt_error("fault hook: COMMIT answer lost");
    case StoreFault::kLostBeforeCommit:
      abandon();
      throw pqxx::in_doubt_error("fault hook: connection lost before COMMIT");
    case StoreFault::kSocketShutBeforeCommit:
      ::shutdown(w.conn->sock(), SHUT_RDWR);
      break;
  }
  commit();
}

void Store::RecordBatch(const std::vector<Item>& batch, const Attempt& att) {
  std::uint64_t n_inserted = 0, n_duplicates = 0, n_conflicts = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const bool won = att.results[i].outcome == Outcome::kInserted;
    (won ? n_inserted : n_duplicates) += 1;
    if (!won && batch[i].write_behind) ++n_conflicts;
  }
  std::lock_guard lk(metrics_->mu);
  auto& m = *metrics_;
  ++m.batches;
  m.copy_batches += att.by_copy ? 1 : 0;
  m.keys_written += att.distinct;
  m.inserted += n_inserted;
  m.duplicates += n_duplicates;
  m.write_behind_conflicts += n_conflicts;
  ObserveInBucket(kBatchBounds, m.batch_counts, static_cast<double>(batch.size()));
  m.batch_sum += static_cast<double>(batch.size());
  ObserveInBucket(kCommitBounds, m.commit_counts, att.seconds);
  m.commit_sum += att.seconds;
}

// A batch runs as one transaction while it can. A data error (a row PostgreSQL rejects) splits the
// failing part in halves until the row is alone; every other part commits normally, in queue order.
// ~2·log2(n) extra transactions per bad row (a batch of 1024: ~20), instead of n one-row transactions.
void Store::ProcessBatch(Writer& w, std::vector<Item>& batch) {
  std::deque<std::vector<Item>> todo;
  todo.push_back(std::move(batch));
  while (!todo.empty()) {
    std::vector<Item> part = std::move(todo.front());
    todo.pop_front();
    std::string error;
    switch (RunPart(w, part, error)) {
      case PartEnd::kDone:
        break;
      case PartEnd::kDataError:
        if (part.size() > 1) {
          const std::size_t mid = part.size() / 2;
          std::vector<Item> second(std::make_move_iterator(part.begin() + static_cast<std::ptrdiff_t>(mid)),
                                   std::make_move_iterator(part.end()));
          part.erase(part.begin() + static_cast<std::ptrdiff_t>(mid), part.end());
          todo.push_front(std::move(second));
          todo.push_front(std::move(part));
        } else if (RejectRow(w, part.front(), error)) {
          todo.push_front(std::move(part));  // a write-behind row gets another attempt, in place
        }
        break;
      case PartEnd::kFailed:
        for (auto& rest : todo) {
          for (auto& item : rest) part.push_back(std::move(item));
        }
        FailBatch(w, part, error);
        return;
    }
  }
}

// One transaction for `part`. A connection lost before COMMIT: reconnect once at once and run it again
// (nothing of it committed). A COMMIT whose answer was lost: ResolveInDoubt.
Store::PartEnd Store::RunPart(Writer& w, std::vector<Item>& part, std::string& error) {
  bool reconnected = false;
  int aborted_retries = 0;
  // After a connection lost before COMMIT: one immediate reconnect per part; false = give up (kFailed).
  auto reconnect_once = [&] {
    if (reconnected) return false;
    reconnected = true;
    w.conn.reset();
    std::string why;
    if (!Connect(w, &why)) {
      error = "connection lost; reconnect failed: " + why;
      return false;
    }
    return true;
  };
  for (;;) {
    Attempt att;
    try {
      if (!w.conn) throw pqxx::broken_connection("not connected");
      WriteBatch(w, part, att);
      Finish(w, part, att.results);
      return PartEnd::kDone;
    } catch (const pqxx::in_doubt_error& e) {
      error = ErrorSummary(e.what());
    } catch (const pqxx::statement_completion_unknown& e) {
      error = ErrorSummary(e.what());
    } catch (const pqxx::sql_error& e) {
      error = ErrorSummary(e.what());
      if (w.conn && w.conn->is_open()) return IsDataError(e) ? PartEnd::kDataError : PartEnd::kFailed;
      if (!reconnect_once()) return PartEnd::kFailed;
      continue;
    } catch (const std::exception& e) {
      // Failed before COMMIT, or a definite COMMIT failure: nothing of this part committed, so running
      // it again cannot turn an insert into a "duplicate". If the connection is gone (typically: the
      // server restarted while it sat idle), reconnect at once and retry once; only if that fails does
      // the writer go down.
      error = ErrorSummary(e.what());
      if (w.conn && w.conn->is_open()) return PartEnd::kFailed;
      if (!reconnect_once()) return PartEnd::kFailed;
      continue;
    }

    // The COMMIT was sent and its answer lost. Never retried blindly: ask PostgreSQL what became of it.
    std::string why;
    const InDoubt r = ResolveInDoubt(w, att, why);
    {
      std::lock_guard lk(metrics_->mu);
      (r == InDoubt::kCommitted ? metrics_->in_doubt_committed
       : r == InDoubt::kAborted ? metrics_->in_doubt_aborted
                                : metrics_->in_doubt_unknown) += 1;
    }
    boost::json::object fields{
        {"writer", w.index},
        {"resolution", r == InDoubt::kCommitted ? "committed" : r == InDoubt::kAborted ? "aborted" : "unknown"},
        {"items", part.size()},
        {"error", error}};
    if (!why.empty()) fields["detail"] = why;
    log_->Write(r == InDoubt::kUnknown ? LogSeverity::kError : LogSeverity::kWarn, "commit_in_doubt",
                std::move(fields));
    if (r == InDoubt::kCommitted) {
      RecordBatch(part, att);
      Finish(w, part, att.results);
      return PartEnd::kDone;
    }
    if (r == InDoubt::kAborted) {
      // Nothing of it happened: run it again, like a batch whose connection broke before COMMIT.
      if (w.conn && ++aborted_retries <= kMaxAbortedRetries) continue;
      error = "COMMIT lost and rolled back; " + error;
      return PartEnd::kFailed;
    }
    // Unknown: waiting items are told so; write-behind items stay queued (re-inserting is idempotent).
    std::vector<Item> waiting, behind;
    for (auto& item : part) (item.write_behind ? behind : waiting).push_back(std::move(item));
    part = std::move(behind);
    {
      std::lock_guard lk(metrics_->mu);
      metrics_->unavailable += waiting.size();
    }
    Finish(w, waiting, std::vector<Result>(waiting.size(), Result{Outcome::kUnknown, {}}));
    if (!w.conn) {
      error = "COMMIT outcome unknown; " + (why.empty() ? error : why);
      return PartEnd::kFailed;  // FailBatch re-queues the write-behind items and marks the writer down
    }
    if (!part.empty()) {
      std::lock_guard lk(w.mu);
      for (auto it = part.rbegin(); it != part.rend(); ++it) w.queue.push_front(std::move(*it));
    }
    return PartEnd::kDone;
  }
}

// Settles an in-doubt COMMIT on a fresh writer connection (left in w.conn when one was made).
Store::InDoubt Store::ResolveInDoubt(Writer& w, const Attempt& att, std::string& why) {
  w.conn.reset();  // broken (or, under the fault hook, to be treated as broken)
  if (!att.xid_trusted) {
    why = "no transaction id was noted";
    return InDoubt::kUnknown;
  }
  if (!att.xid) return InDoubt::kCommitted;  // wrote nothing: its outcomes are rows others committed
  const auto deadline = Clock::now() + kInDoubtResolveFor;
  auto pause = kInDoubtPollMin;
  for (;;) {
    if (w.conn || Connect(w, &why)) {
      try {
        switch (QueryTxidStatus(*w.conn, *att.xid, &why)) {
          case TxStatus::kCommitted: return InDoubt::kCommitted;
          case TxStatus::kAborted: return InDoubt::kAborted;
          case TxStatus::kUnknown: return InDoubt::kUnknown;
          case TxStatus::kInProgress: why = "transaction still in progress"; break;  // COMMIT still running
        }
      } catch (const std::exception& e) {
        why = ErrorSummary(e.what());
        w.conn.reset();
      }
    }
    if (Clock::now() + pause > deadline) {
      why = "not settled within " + std::to_string(kInDoubtResolveFor.count()) + " ms: " + why;
      return InDoubt::kUnknown;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kInDoubtPollMax);
  }
}

// A row PostgreSQL rejected in a transaction of its own. Returns true when it should be tried again.
bool Store::RejectRow(Writer& w, Item& item, const std::string& error) {
  ++item.rejected;
  if (item.write_behind && item.rejected < kMaxRowAttempts) {
    std::this_thread::sleep_for(kRowRetryPause);
    return true;
  }
  std::vector<Item> one;
  one.push_back(std::move(item));
  const bool behind = one.front().write_behind;
  // Digest hex only (never the key); the reason is libpq's first line, which names no row value.
  log_->Write(behind ? LogSeverity::kError : LogSeverity::kWarn, behind ? "dead_letter" : "row_rejected",
              {{"writer", w.index}, {"digest", DigestHex(one.front().digest)}, {"attempts", one.front().rejected},
               {"error", error}});
  {
    std::lock_guard lk(metrics_->mu);
    (behind ? metrics_->dead_lettered : metrics_->unavailable) += 1;
  }
  Finish(w, one, {Result{Outcome::kUnavailable, {}}});
  return false;
}

void Store::Finish(Writer& w, std::vector<Item>& items, const std::vector<Result>& results) {
  // Finished write-behind rows (committed, or given up) no longer hold their digest's Submits in the FIFO.
  if (std::any_of(items.begin(), items.end(), [](const Item& item) { return item.write_behind; })) {
    std::lock_guard lk(w.mu);
    for (const Item& item : items) {
      if (!item.write_behind) continue;
      const auto it = w.behind.find(item.digest);
      if (it != w.behind.end() && --it->second == 0) w.behind.erase(it);
    }
  }
  ReportToSinks(w, items, results);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].done) continue;  // write-behind items run theirs only when one was given
    // Queued items failed by an outage were never taken: the one that wins here completes, a cancelled
    // one stays silent (its submitter already answered).
    if (items[i].ticket && !items[i].ticket->Take()) {
      cancelled_.fetch_add(1);
      continue;
    }
    try {
      items[i].done(results[i]);
    } catch (...) {
      // A completion must not throw; the writer must survive one that does.
    }
  }
  pending_.fetch_sub(items.size());
}

// The group rows among `items` go to their sinks: one call per run of rows with the same sink (in practice
// one sink, so one call per Finish), instead of one closure per row.
void Store::ReportToSinks(Writer& w, const std::vector<Item>& items, const std::vector<Result>& results) {
  WriteBehindSink* sink = nullptr;
  auto flush = [&] {
    if (sink != nullptr && !w.sink_rows.empty()) {
      try {
        sink->Done(w.sink_rows);
      } catch (...) {
        // A sink must not throw; the writer must survive one that does.
      }
    }
    w.sink_rows.clear();
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    if (item.sink == nullptr) continue;
    if (item.sink != sink) {
      flush();
      sink = item.sink;
    }
    w.sink_rows.push_back(WriteBehindDone{item.digest, item.tag, item.flag, results[i].outcome});
  }
  flush();
}

void Store::FailBatch(Writer& w, std::vector<Item>& batch, const std::string& error) {
  w.conn.reset();
  std::vector<Item> failed;
  {
    std::lock_guard lk(w.mu);
    w.up = false;
    w.up_flag.store(false);
    // Write-behind items go back to the front, in their original order.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (it->write_behind) w.queue.push_front(std::move(*it));
    }
    for (auto& item : batch) {
      if (!item.write_behind) failed.push_back(std::move(item));
    }
    // Waiting items still queued would otherwise wait out the outage: they fail now too.
    std::deque<Item> keep;
    for (auto& item : w.queue) {
      if (item.write_behind) {
        keep.push_back(std::move(item));
      } else {
        failed.push_back(std::move(item));
      }
    }
    w.queue.swap(keep);
    for (auto& item : w.urgent) failed.push_back(std::move(item));
    w.urgent.clear();
    w.waiting = 0;
  }
  LogPgState(*log_, false, w.index, error);
  const Result unavailable{Outcome::kUnavailable, {}};
  std::vector<Result> results(failed.size(), unavailable);
  {
    std::lock_guard lk(metrics_->mu);
    ++metrics_->batch_failures;
    metrics_->unavailable += failed.size();
  }
  Finish(w, failed, results);
}

void Store::GiveUp(Writer& w) {
  std::deque<Item> left;
  {
    std::lock_guard lk(w.mu);
    left.swap(w.queue);
    for (auto& item : w.urgent) left.push_back(std::move(item));
    w.urgent.clear();
    w.waiting = 0;
  }
  std::vector<Item> items(std::make_move_iterator(left.begin()), std::make_move_iterator(left.end()));
  std::uint64_t lost = 0;
  for (const auto& item : items) lost += item.write_behind ? 1 : 0;
  if (lost > 0) {
    log_->Write(LogSeverity::kError, "write_behind_lost", {{"writer", w.index}, {"items", lost}});
  }
  const Result unavailable{Outcome::kUnavailable, {}};
  std::vector<Result> results(items.size(), unavailable);
  {
    std::lock_guard lk(metrics_->mu);
    metrics_->write_behind_lost += lost;
    metrics_->unavailable += items.size() - lost;
  }
  Finish(w, items, results);
}

void Store::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    accepting_.store(false);
    for (auto& w : writers_) {
      {
        std::lock_guard lk(w->mu);
        w->stop = true;
      }
      w->cv.notify_all();
    }
    for (auto& w : writers_) {
      if (w->thread.joinable()) w->thread.join();
      w->conn.reset();
    }
  });
}

StoreStats Store::Stats() const {
  StoreStats s{};
  s.up = up();
  s.queue_depth = pending_.load();
  std::lock_guard lk(metrics_->mu);
  const auto& m = *metrics_;
  s.batches = m.batches;
  s.keys_written = m.keys_written;
  s.inserted = m.inserted;
  s.duplicates = m.duplicates;
  s.unavailable = m.unavailable;
  s.write_behind_conflicts = m.write_behind_conflicts;
  s.batch_failures = m.batch_failures;
  s.write_behind_lost = m.write_behind_lost;
  s.dead_lettered = m.dead_lettered;
  s.in_doubt_committed = m.in_doubt_committed;
  s.in_doubt_aborted = m.in_doubt_aborted;
  s.in_doubt_unknown = m.in_doubt_unknown;
  s.copy_batches = m.copy_batches;
  s.copy_fallbacks = m.copy_fallbacks;
  s.last_warm_streams = last_warm_streams_.load();
  s.cancelled = cancelled_.load();
  s.batch_size_buckets = CumulativeBuckets(kBatchBounds, m.batch_counts);
  s.batch_size_sum = m.batch_sum;
  s.batch_size_count = s.batch_size_buckets.back().second;
  s.commit_seconds_buckets = CumulativeBuckets(kCommitBounds, m.commit_counts);
  s.commit_seconds_sum = m.commit_sum;
  s.commit_seconds_count = s.commit_seconds_buckets.back().second;
  return s;
}

}  // namespace scangate::storage
