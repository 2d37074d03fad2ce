#include "storage/write/batch_runner.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <iterator>
#include <optional>
#include <thread>
#include <utility>

#include <boost/json/object.hpp>
#include <pqxx/pqxx>

#include "storage/epochs/catalog.h"
#include "storage/write/completions.h"
#include "storage/write/in_doubt.h"
#include "storage/pg/batch_errors.h"
#include "storage/pg/batch_statement.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace {

// deadlock_detected / serialization_failure are retried on the same connection this many times before the
// batch counts as failed. Inserts are sorted by digest, so concurrent batches should never deadlock.
constexpr int kMaxRollbackRetries = 3;
// An in-doubt COMMIT that txid_status() says was rolled back is run again at most this often per batch
// part (each such round already cost a lost connection); beyond it the writer goes down as in an outage.
constexpr int kMaxAbortedRetries = 2;
// A batch part that meets a change of the epochs' catalog (SGE01: nothing written) reads it again on a new connection
// and runs again, at most this often: a change during the retry is another switch (seconds apart at the least in
// the product; every ~200 ms in epoch_closed_write_test, where one retry left ~10 % of answers 503 under ASan).
constexpr int kMaxCatalogChanges = 4;
// Pause before a rejected write-behind row's next single-row attempt (see kMaxRowAttempts).
constexpr std::chrono::milliseconds kRowRetryPause{20};
// COPY back-off: after a COPY that a present row aborted, the writer's next COPY-eligible batches go through
// ON CONFLICT, as many as the pause (doubled per abort, halved per COPY that succeeds). The cap bounds what a
// workload whose "new" keys mostly exist (a second instance without key affinity, rows older than the
// window) wastes: one aborted COPY per ~65 batches, against one per batch without the back-off.
constexpr unsigned kMaxCopyPause = 64;

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

const char* InDoubtName(InDoubt r) {
  return r == InDoubt::kCommitted ? "committed" : r == InDoubt::kAborted ? "aborted" : "unknown";
}

}  // namespace

enum class BatchRunner::PartEnd : std::uint8_t {
  kDone,       // every item finished (or, outcome unknown, write-behind items re-queued)
  kDataError,  // PostgreSQL rejected a row of the part; nothing of it committed, the connection is fine
  kFailed,     // outage: hand the part (and what is left of the batch) to the writer's MarkDown
  kRetry,      // its in-doubt COMMIT was settled as rolled back: run the part again (SettleAndFinish only)
};

// What one batch transaction established before its COMMIT: the outcomes it would deliver and the
// transaction id to settle an in-doubt COMMIT with.
struct BatchRunner::Attempt {
  std::vector<Result> results;
  InDoubtCommit commit;
  std::size_t distinct = 0;
  double seconds = 0;
  bool by_copy = false;  // written by binary COPY (BatchStatement::BeginCopy / CommitCopy)
  bool looked_up = false;  // some digest looked up in closed epochs (BatchStatement::PlanClosedProbes)

  // Notes what the batch's statements established, before its COMMIT: outcomes are final once it succeeds,
  // so an in-doubt COMMIT settled as committed can deliver them.
  void Note(BatchAnswer&& answer) {
    results = std::move(answer.results);
    // A batch that inserted (or took over) nothing holds its outcomes whether or not its COMMIT ran: settled
    // without asking, even when it was given an xid (sql/010's commit_xid default assigns one as soon as it is
    // evaluated for a proposed row, a duplicate's included).
    commit.xid = answer.any_inserted ? answer.xid : std::nullopt;
    commit.xid_trusted = commit.xid.has_value() || !answer.any_inserted;
  }
};

// A batch runs as one transaction while it can. A data error (a row PostgreSQL rejects) splits the
// failing part in halves until the row is alone; every other part commits normally, in queue order.
// ~2·log2(n) extra transactions per bad row (a batch of 1024: ~20), instead of n one-row transactions.
bool BatchRunner::Run(std::vector<QueuedItem>& batch, std::vector<QueuedItem>& failed, std::string& error) {
  std::deque<std::vector<QueuedItem>> todo;
  todo.push_back(std::move(batch));
  batch.clear();
  while (!todo.empty()) {
    std::vector<QueuedItem> part = std::move(todo.front());
    todo.pop_front();
    switch (RunPart(part, error)) {
      case PartEnd::kDone:
      case PartEnd::kRetry:  // never returned by RunPart
        break;
      case PartEnd::kDataError:
        if (part.size() > 1) {
          const std::size_t mid = part.size() / 2;
          std::vector<QueuedItem> second(std::make_move_iterator(part.begin() + static_cast<std::ptrdiff_t>(mid)),
                                         std::make_move_iterator(part.end()));
          part.erase(part.begin() + static_cast<std::ptrdiff_t>(mid), part.end());
          todo.push_front(std::move(second));
          todo.push_front(std::move(part));
        } else if (RejectRow(part.front(), error)) {
          todo.push_front(std::move(part));  // a write-behind row gets another attempt, in place
        }
        break;
      case PartEnd::kFailed:
        failed = std::move(part);
        for (auto& rest : todo) {
          for (auto& item : rest) failed.push_back(std::move(item));
        }
        return false;
    }
  }
  return true;
}

// One transaction for `part`. A connection lost before COMMIT: reconnect once at once and run it again
// (nothing of it committed). A COMMIT whose answer was lost: SettleAndFinish.
BatchRunner::PartEnd BatchRunner::RunPart(std::vector<QueuedItem>& part, std::string& error) {
  bool reconnected = false;
  int aborted_retries = 0, catalog_changes = 0;
  const auto reconnect = [&] {
    w_.conn.reset();
    std::string why;
    if (!ConnectWriter(w_, w_.target.writer_conninfo, &why)) {
      error = "connection lost; reconnect failed: " + why;
      return false;
    }
    return true;
  };
  // After a connection lost before COMMIT: one immediate reconnect per part; false = give up (kFailed).
  auto reconnect_once = [&] {
    if (reconnected) return false;
    reconnected = true;
    return reconnect();
  };
  for (;;) {
    Attempt att;
    try {
      if (!w_.conn) throw pqxx::broken_connection("not connected");
      WriteBatch(part, att);
      Deliver(shared_, w_, part, att.results);
      return PartEnd::kDone;
    } catch (const pqxx::in_doubt_error& e) {
      error = ErrorSummary(e.what());
    } catch (const pqxx::statement_completion_unknown& e) {
      error = ErrorSummary(e.what());
    } catch (const pqxx::sql_error& e) {
      error = ErrorSummary(e.what());
      if (w_.conn && w_.conn->is_open()) {
        // The table was moved to the other layout under the prepared statements (sql/013's swap): nothing of the
        // part committed; a new connection prepares the statements for the layout it finds, and the part runs again.
        if (IsLayoutChange(e) && reconnect_once()) continue;
        // The epochs' catalog changed since this connection read it (scangate_write_order, sql/018): nothing of the
        // part was written; a new connection reads the catalog again (and refuses one this version cannot check).
        if (IsEpochCatalogChange(e)) {
          shared_.log->Write(LogSeverity::kWarn, "epoch_catalog_changed", {{"writer", w_.index}});
          if (++catalog_changes <= kMaxCatalogChanges && reconnect()) continue;
          return PartEnd::kFailed;
        }
        return IsDataError(e) ? PartEnd::kDataError : PartEnd::kFailed;
      }
      if (!reconnect_once()) return PartEnd::kFailed;
      continue;
    } catch (const std::exception& e) {
      // Failed before COMMIT, or a definite COMMIT failure: nothing of this part committed, so running
      // it again cannot turn an insert into a "duplicate". If the connection is gone (typically: the
      // server restarted while it sat idle), reconnect at once and retry once; only if that fails does
      // the writer go down.
      error = ErrorSummary(e.what());
      if (w_.conn && w_.conn->is_open()) return PartEnd::kFailed;
      if (!reconnect_once()) return PartEnd::kFailed;
      continue;
    }
    const PartEnd end = SettleAndFinish(part, att, error, aborted_retries);
    if (end != PartEnd::kRetry) return end;
  }
}

// The COMMIT was sent and its answer lost. Never retried blindly: ask PostgreSQL what became of it.
BatchRunner::PartEnd BatchRunner::SettleAndFinish(std::vector<QueuedItem>& part, Attempt& att, std::string& error,
                                                  int& aborted_retries) {
  std::string why;
  const InDoubt r = SettleInDoubt(w_, att.commit, why);
  shared_.metrics.RecordInDoubt(r);
  boost::json::object fields{{"writer", w_.index}, {"resolution", InDoubtName(r)}, {"items", part.size()},
                             {"error", error}};
  if (!why.empty()) fields["detail"] = why;
  shared_.log->Write(r == InDoubt::kUnknown ? LogSeverity::kError : LogSeverity::kWarn, "commit_in_doubt",
                     std::move(fields));
  if (r == InDoubt::kCommitted) {
    RecordBatch(part, att);
    Deliver(shared_, w_, part, att.results);
    return PartEnd::kDone;
  }
  if (r == InDoubt::kAborted) {
    // Nothing of it happened: run it again, like a batch whose connection broke before COMMIT.
    if (w_.conn && ++aborted_retries <= kMaxAbortedRetries) return PartEnd::kRetry;
    error = "COMMIT lost and rolled back; " + error;
    return PartEnd::kFailed;
  }
  // Unknown: waiting items are told so; write-behind items stay queued (re-inserting is idempotent).
  std::vector<QueuedItem> waiting, behind;
  for (auto& item : part) (item.write_behind ? behind : waiting).push_back(std::move(item));
  part = std::move(behind);
  shared_.metrics.RecordUnavailable(waiting.size());
  DeliverAll(shared_, w_, waiting, Outcome::kUnknown);
  if (!w_.conn) {
    error = "COMMIT outcome unknown; " + (why.empty() ? error : why);
    return PartEnd::kFailed;  // MarkDown re-queues the write-behind items and marks the writer down
  }
  w_.queue.Requeue(part);
  return PartEnd::kDone;
}

// Runs `batch` as one transaction and commits it. Fills `att` before the COMMIT (outcomes, xid), so an
// in-doubt COMMIT can still deliver them. Throws on any failure; records metrics on success.
void BatchRunner::WriteBatch(std::vector<QueuedItem>& batch, Attempt& att) {
  BatchStatement statement(batch.size(), shared_.options.pack_horizons, w_.retention, w_.layout);
  for (const auto& item : batch) statement.Add(item.digest, item.source, item.first_seen_us, item.attrs);
  statement.SetWriteOrder(w_.epoch_generation);
  if (const PgClock* clock = shared_.clock.load(std::memory_order_acquire)) {  // acquire: the clock it points to
    statement.SetClockGuard(clock->GuardUs());
  }
  att.distinct = statement.distinct();
  // Digests that may be live in a closed epoch are looked up there first (a summary that says absent spares it).
  const bool probing = statement.PlanClosedProbes(w_.closed_epochs);
  att.looked_up = probing;
  // A batch of Bloom negatives ("definitely new": write-behind rows, and Submit items the filter called new)
  // goes by binary COPY, which skips ON CONFLICT's probe of the primary key before each insert: 1.3–2.1x
  // per row from 256 rows up (bench/RESULTS.md "Batch statement shapes"), and −22 % of PostgreSQL's CPU per
  // row in ack=commit's ~44-row batches ("COPY for ack=commit's Bloom negatives"). A row that exists after
  // all (another instance, a row older than the window, a journal replay) aborts the COPY: the batch is then
  // re-run through ON CONFLICT in a fresh transaction, counted in copy_fallbacks, and the back-off pauses
  // COPY on this writer (kMaxCopyPause). What decides is each digest's first item: a later item of the same digest
  // (a repeat submitted while its first observation was queued, issue 44) is answered from the first's row, so it
  // no longer sends its whole batch through ON CONFLICT (12 % of ack=commit's batches at 50 % repeats).
  const auto& firsts = statement.first_items();
  // A batch with look-ups in closed epochs is looked up before its COPY (ProbeClosedBeforeCopy), which leaves out
  // what was found: in the write-behind's batches of hundreds of Bloom negatives some digest's summary says maybe
  // in most of them (0.085 % per digest and closed epoch), and each such batch would otherwise lose the COPY.
  bool use_copy = !firsts.empty() && std::all_of(firsts.begin(), firsts.end(), [&](std::uint32_t i) {
                    return batch[i].write_behind || batch[i].expect == Expect::kNew;
                  });
  bool probed_for_copy = false;
  if (use_copy && w_.copy_skip > 0) {
    --w_.copy_skip;
    use_copy = false;
  }
  const auto started = StoreClock::now();
  for (int attempt = 0;; ++attempt) {
    att.commit.xid.reset();
    att.by_copy = use_copy;
    try {
      if (use_copy && probing && !probed_for_copy) {
        std::size_t found = 0;
        {
          pqxx::nontransaction tx(*w_.conn);
          found = statement.ProbeClosedBeforeCopy(tx);
        }
        probed_for_copy = true;
        if (found == statement.distinct()) use_copy = false;  // nothing left to write: Run() answers them all
      }
      att.by_copy = use_copy;
      if (use_copy) {
        PGconn* c = w_.conn->raw();
        try {
          att.Note(statement.BeginCopy(c));
          Commit(att, [&] { statement.CommitCopy(c); }, [&] { BatchStatement::AbandonCopy(c); });
        } catch (...) {
          BatchStatement::AbandonCopy(c);  // an open COPY is rolled back; an idle or broken connection left as is
          throw;
        }
      } else {
        pqxx::work tx(*w_.conn);
        att.Note(statement.Run(tx));
        Commit(att, [&] { tx.commit(); }, [&] { tx.abort(); });  // ~tx rolls back when it throws
      }
      break;
    } catch (const CopyConflict&) {
      use_copy = false;  // the COPY was rolled back; nothing of it holds
      --attempt;         // not a rollback retry: runs once more, through ON CONFLICT
      w_.copy_pause = std::min(std::max(2 * w_.copy_pause, 1u), kMaxCopyPause);
      w_.copy_skip = w_.copy_pause;
      shared_.metrics.RecordCopyFallback();
    } catch (const pqxx::deadlock_detected&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    } catch (const pqxx::serialization_failure&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    }
  }
  if (att.by_copy) w_.copy_pause /= 2;  // a COPY that held: the back-off decays
  att.seconds = std::chrono::duration<double>(StoreClock::now() - started).count();
  RecordBatch(batch, att);
}

// Commits by `commit` — or, under StoreOptions::fault_hook (tests), fails around it the way the hook says.
// `abandon` rolls the open transaction back without committing.
void BatchRunner::Commit(Attempt& att, absl::FunctionRef<void()> commit, absl::FunctionRef<void()> abandon) {
  switch (shared_.options.fault_hook ? shared_.options.fault_hook() : StoreFault::kNone) {
    case StoreFault::kNone:
      break;
    case StoreFault::kXidUnknowable:
      if (att.commit.xid) *att.commit.xid += std::int64_t{1} << 32;  // one xid epoch ahead: "in the future"
      [[fallthrough]];
    case StoreFault::kCommitAnswerLost:
      commit();
      throw pqxx::in_doubt_error("fault hook: COMMIT answer lost");
    case StoreFault::kLostBeforeCommit:
      abandon();
      throw pqxx::in_doubt_error("fault hook: connection lost before COMMIT");
    case StoreFault::kSocketShutBeforeCommit:
      ::shutdown(w_.conn->sock(), SHUT_RDWR);
      break;
  }
  commit();
}

void BatchRunner::RecordBatch(const std::vector<QueuedItem>& batch, const Attempt& att) {
  std::uint64_t inserted = 0, conflicts = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const bool won = att.results[i].outcome == Outcome::kInserted;
    inserted += won ? 1 : 0;
    if (!won && batch[i].write_behind) ++conflicts;
  }
  shared_.metrics.RecordBatch(batch.size(), inserted, conflicts, att.distinct, att.seconds, att.by_copy,
                              att.looked_up);
}

// A row PostgreSQL rejected in a transaction of its own. Returns true when it should be tried again.
bool BatchRunner::RejectRow(QueuedItem& item, const std::string& error) {
  ++item.rejected;
  if (item.write_behind && item.rejected < kMaxRowAttempts) {
    std::this_thread::sleep_for(kRowRetryPause);
    return true;
  }
  std::vector<QueuedItem> one;
  one.push_back(std::move(item));
  const bool behind = one.front().write_behind;
  // Digest hex only (never the key); the reason is libpq's first line, which names no row value.
  shared_.log->Write(behind ? LogSeverity::kError : LogSeverity::kWarn, behind ? "dead_letter" : "row_rejected",
                     {{"writer", w_.index}, {"digest", DigestHex(one.front().digest)},
                      {"attempts", one.front().rejected}, {"error", error}});
  if (behind) {
    shared_.metrics.RecordDeadLetter();
  } else {
    shared_.metrics.RecordUnavailable(1);
  }
  DeliverAll(shared_, w_, one, Outcome::kUnavailable);
  return false;
}

}  // namespace scangate::storage
