#include "server/service.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/time_format.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kUnavailableDetail =
    "PostgreSQL is unavailable or the write queue is full; retry after the Retry-After delay";
constexpr std::string_view kBatchUnavailableDetail =
    "PostgreSQL is unavailable or the write queue is full; keys of this batch that were already inserted "
    "stay inserted, so a retry reports them as duplicates";

constexpr std::string_view kDeadlineQueuedDetail =
    "PostgreSQL did not answer within the request timeout; the key was withdrawn before it was written, so "
    "nothing was recorded; retry after the Retry-After delay";
constexpr std::string_view kDeadlineInFlightDetail =
    "PostgreSQL did not answer within the request timeout while the key's transaction was in flight: the key "
    "may have been recorded, and a retry may answer duplicate with a first_seen inside this attempt";
constexpr std::string_view kBatchDeadlineQueuedDetail =
    "PostgreSQL did not answer within the request timeout; the keys still waiting were withdrawn unwritten; "
    "keys of this batch that were already inserted stay inserted, so a retry reports them as duplicates";
constexpr std::string_view kBatchDeadlineInFlightDetail =
    "PostgreSQL did not answer within the request timeout while keys of this batch were in a transaction: "
    "they may have been recorded, and a retry may answer duplicate with a first_seen inside this attempt";
constexpr std::string_view kOutcomeUnknownDetail =
    "the connection to PostgreSQL broke while this key's transaction was committing and PostgreSQL could not "
    "tell whether it committed; the key may be recorded: a retry may be answered duplicate with a first_seen "
    "inside this attempt";
constexpr std::string_view kBatchOutcomeUnknownDetail =
    "the connection to PostgreSQL broke while keys of this batch were committing and PostgreSQL could not "
    "tell whether they committed; a retry may report them as duplicates with a first_seen inside this attempt";

std::uint64_t NextInstanceId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1);
}

// Now as µs since the epoch: the first_seen of a key this instance records itself (write-behind, journal).
std::int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Store route of a digest: its first four bytes (uniform for SHA-256/HMAC output).
std::uint32_t RouteOfDigest(const Digest& d) {
  std::uint32_t r = 0;
  std::memcpy(&r, d.data(), sizeof r);
  return r;
}
}  // namespace

// What the filter said about one digest, and whether the filter's answer counts (filter on and warm).
// Only kDefinitelyNew is a filter verdict; kDefinitelyNewUntrusted (the shard forgot keys within the window,
// core/filter.h) takes the exact path like kPossiblySeen and is labelled `via: exact` in both ack modes.
struct Service::Probed {
  bool filter_trusted = false;
  Probe probe = Probe::kPossiblySeen;
  // The filter vouched "definitely new" (an exact negative of a trusted filter).
  bool filter_said_new() const { return filter_trusted && probe == Probe::kDefinitelyNew; }
  // The Store's hint: a batch of such digests may go by COPY (storage/exact_store.h, Expect).
  storage::Expect expect() const { return filter_said_new() ? storage::Expect::kNew : storage::Expect::kUnknown; }
};

namespace {
// Counts a "definitely new" the filter could not vouch for (after warm start, when the filter counts).
void CountUntrusted(bool filter_trusted, Probe probe, ThreadCounters& counters) {
  if (filter_trusted && probe == Probe::kDefinitelyNewUntrusted) counters.untrusted_negatives.Inc();
}
}  // namespace

// One observation waiting for the Store. Touched on the request's executor only (one thread), except the
// ticket (atomic, shared with the writer). `done` is emptied by whichever of deadline and completion
// answers first; the other then does nothing (and the session is no longer referenced from here).
struct Service::Waiting {
  Waiting(const net::any_io_executor& ex, const Probed& p, Verdict v, ObserveDone d)
      : timer(ex), probed(p), verdict(std::move(v)), done(std::move(d)) {}
  storage::Ticket ticket;
  net::steady_timer timer;
  Probed probed;
  Verdict verdict;
  ObserveDone done;
};

Service::Service(const Config& config, Digester digester, ShardedFilter& filter, storage::ExactStore& store,
                 Metrics& metrics, storage::JournalDrain* journal)
    : ack_(config.ack),
      request_timeout_(config.request_timeout),
      queue_wait_(std::min(config.queue_wait, config.request_timeout)),
      filter_on_(config.filter),
      digester_(std::move(digester)),
      filter_(filter),
      store_(store),
      metrics_(metrics),
      window_seconds_(std::chrono::duration<double>(config.window).count()),
      fp_target_(config.fp_target),
      filter_telemetry_(filter),
      recent_(config.recent_keys),
      journal_(journal),
      instance_id_(NextInstanceId()) {}

bool Service::RecentKnown(const Digest& d, Verdict& v, ThreadCounters& counters) {
  const std::optional<std::int64_t> first_seen_us = recent_.FindConcurrently(d);
  if (!first_seen_us) return false;
  v.is_new = false;
  v.via_filter = false;
  v.first_seen = Rfc3339Micros(*first_seen_us);
  counters.recent_hits.Inc();
  return true;
}

void Service::RememberStored(const Digest& d, const storage::Result& r) {
  if (!recent_.enabled()) return;
  if (r.outcome != storage::Outcome::kInserted && r.outcome != storage::Outcome::kDuplicate) return;
  // No first_seen: not remembered (forgetting is always safe; the next repeat asks PostgreSQL).
  if (!r.first_seen.empty()) recent_.InsertConcurrently(d, r.first_seen_us);
}

void Service::Decide(const Probed& p, const storage::Result& r, ThreadCounters& counters, Verdict& v) const {
  const bool filter_said_new = p.filter_said_new();
  if (r.outcome == storage::Outcome::kInserted) {
    v.is_new = true;
    // ack=commit: "via filter" = the filter said new and PostgreSQL confirmed it.
    v.via_filter = filter_said_new;
    if (p.filter_trusted && p.probe == Probe::kPossiblySeen) counters.false_positives.Inc();
  } else {
    v.is_new = false;
    v.via_filter = false;
    v.first_seen = r.first_seen;
    if (filter_said_new) counters.stale.Inc();
  }
}

void Service::SubmitWaiting(std::uint32_t route, const Digest& d, const std::string& source, const Probed& p,
                            Verdict v, const net::any_io_executor& ex, ThreadCounters& counters, ObserveDone done) {
  auto w = std::make_shared<Waiting>(ex, p, std::move(v), std::move(done));
  auto on_stored = [this, w, &counters, d, inbox = &InboxOf(ex)](const storage::Result& r) {
    // Runs on a writer thread: hop back to the session's thread (batched with the rest of the writer's batch
    // bound for it), never block here. A committed outcome is remembered first (even when the deadline already
    // answered: it is a fact either way).
    RememberStored(d, r);
    inbox->Post([this, w, &counters, r] {
      if (!w->done) return;  // the deadline already answered: this late outcome is dropped
      ObserveDone answer = std::move(w->done);
      w->done = nullptr;
      w->timer.cancel();
      if (r.outcome == storage::Outcome::kUnavailable) {
        answer(Problem::Unavailable(std::string(kUnavailableDetail)));
        return;
      }
      if (r.outcome == storage::Outcome::kUnknown) {  // in-doubt COMMIT PostgreSQL could not settle
        answer(Problem::OutcomeUnknown(std::string(kOutcomeUnknownDetail)));
        return;
      }
      Decide(w->probed, r, counters, w->verdict);
      counters.CountVerdict(w->verdict.is_new, w->verdict.via_filter);
      answer(std::move(w->verdict));
    });
  };
  const auto started = std::chrono::steady_clock::now();
  // The ticket lives inside `w` (aliasing shared_ptr): no allocation of its own. Behind parked requests, this
  // one parks too (first come, first served) rather than taking the room they wait for.
  if (OthersWaitForRoom() ||
      !store_.Submit(route, d, source, on_stored, std::shared_ptr<storage::Ticket>(w, &w->ticket),
                     p.expect())) {
    if (MayWaitForRoom()) {
      // Queue full: wait for room (backpressure), then submit; the request deadline still counts from now.
      WaitForRoom(
          ex, counters,
          [this, w, route, d, source, on_stored = std::move(on_stored), started] {
            if (!store_.Submit(route, d, source, on_stored, std::shared_ptr<storage::Ticket>(w, &w->ticket),
                               w->probed.expect())) {
              return false;
            }
            ArmDeadline(w, started + request_timeout_);
            return true;
          },
          [w](Problem problem) {
            ObserveDone answer = std::move(w->done);
            w->done = nullptr;
            answer(std::move(problem));
          });
      return;
    }
    ObserveDone answer = std::move(w->done);
    w->done = nullptr;
    answer(Problem::Unavailable(std::string(kUnavailableDetail)));
    return;
  }
  ArmDeadline(w, started + request_timeout_);
}

void Service::ArmDeadline(const std::shared_ptr<Waiting>& w, std::chrono::steady_clock::time_point deadline) {
  w->timer.expires_at(deadline);
  w->timer.async_wait([w](const boost::system::error_code& ec) {
    if (ec || !w->done) return;  // operation_aborted: the outcome arrived first and cancelled the timer
    ObserveDone answer = std::move(w->done);
    w->done = nullptr;
    if (w->ticket.Cancel()) {
      answer(Problem::Unavailable(std::string(kDeadlineQueuedDetail)));  // withdrawn: never written
    } else {
      answer(Problem::OutcomeUnknown(std::string(kDeadlineInFlightDetail)));  // its transaction may commit
    }
  });
}

void Service::Observe(const Observation& obs, const net::any_io_executor& ex, ThreadCounters& counters,
                      ObserveDone done) {
  const Digest d = digester_(obs.key);
  const std::uint32_t route = RouteOfDigest(d);
  Verdict v;
  v.digest_hex = ToHex(d);
  Probed p;
  p.filter_trusted = filter_on_ && warm();

  if (ack_ == AckMode::kFilter && filter_on_) {
    // Probe and enqueue atomically per stripe: if another observer of this digest sees our bits, its exact
    // Submit is queued after our write-behind row (same store route, FIFO) and so gets "duplicate".
    const std::lock_guard lock(stripes_[route & (kStripes - 1)]);
    p.probe = filter_.ObserveConcurrently(d);
    CountUntrusted(p.filter_trusted, p.probe, counters);
    if (journal_ != nullptr && JournalKnown(d, v.digest_hex, ex, counters, done)) return;  // journal hook
    // An untrusted negative falls through to the exact path below: queued behind any write-behind row of
    // this digest (same route, FIFO), so a key the filter forgot within the window is answered duplicate.
    if (p.filter_trusted && p.probe == Probe::kDefinitelyNew) {
      const std::int64_t now_us = NowUs();  // first_seen of the journal record / write-behind row and the set
      if (journal_ != nullptr) {
        if (journal_->usable()) return JournalNew(d, obs.source, std::move(v), ex, counters, done, now_us);
        // The journal is unusable (a fault; it heals by itself): decide exactly, as --ack=commit does.
        return SubmitWaiting(route, d, obs.source, p, std::move(v), ex, counters, std::move(done));
      }
      if (OthersWaitForRoom() || !store_.SubmitWriteBehind(route, d, obs.source, now_us)) {
        // Queue full (backpressure). We must not wait holding the stripe lock, and our bits are already set:
        // an observer of this digest arriving from now on sees them and takes the exact path, which our
        // write-behind row would no longer precede. So this request takes the exact path too (waiting for
        // room without the lock): both exact, PostgreSQL tells exactly one of them "new" (invariant 2).
        if (MayWaitForRoom()) {
          return SubmitWaiting(route, d, obs.source, p, std::move(v), ex, counters, std::move(done));
        }
        done(Problem::Unavailable(std::string(kUnavailableDetail)));
        return;
      }
      // Accepted: recorded (written behind with this first_seen). Inserted under the stripe lock, so a
      // concurrent observer of the digest finds either nothing yet (and queues behind the row) or this entry.
      recent_.InsertConcurrently(d, now_us);
      v.is_new = true;
      v.via_filter = true;
      counters.CountVerdict(true, true);
      done(std::move(v));
      return;
    }
    if (RecentKnown(d, v, counters)) {  // a recorded repeat: no PostgreSQL round trip
      counters.CountVerdict(false, false);
      done(std::move(v));
      return;
    }
    SubmitWaiting(route, d, obs.source, p, std::move(v), ex, counters, std::move(done));
  } else {
    // Before warm start the probe still sets the key's bits (so the filter is complete once warm), but its
    // answer is not trusted and the key takes the exact path.
    if (filter_on_) p.probe = filter_.ObserveConcurrently(d);
    CountUntrusted(p.filter_trusted, p.probe, counters);
    if (journal_ != nullptr && JournalKnown(d, v.digest_hex, ex, counters, done)) return;  // journal hook (filter off)
    // A trusted "definitely new" skips the set (ack=commit: PostgreSQL decides it anyway; no lookup per new key).
    if (!(p.filter_trusted && p.probe == Probe::kDefinitelyNew) && RecentKnown(d, v, counters)) {
      counters.CountVerdict(false, false);
      done(std::move(v));
      return;
    }
    SubmitWaiting(route, d, obs.source, p, std::move(v), ex, counters, std::move(done));
  }
}

void Service::ObserveBatch(const BatchRequest& batch, const net::any_io_executor& ex, ThreadCounters& counters,
                           BatchDone done) {
  if (WaitBeforeBatch(batch, ex, counters, done)) return;  // backpressure: queue full, parked until room
  const std::size_t n = batch.entries.size();
  // Aggregation state: touched only on `ex` (one thread), so plain fields suffice.
  // `done` is emptied by whichever of the last completion and the deadline answers first.
  struct State {
    explicit State(const net::any_io_executor& ex, std::size_t n)
        : tickets(n), in_store(n, 0), in_journal(n, 0), timer(ex) {}
    std::vector<Verdict> verdicts;
    std::vector<Probed> probed;
    std::size_t pending = 0;
    bool unavailable = false;
    bool unknown = false;  // some entry's outcome is unknown: answered outcome-unknown (the weaker claim)
    BatchDone done;
    std::vector<storage::Ticket> tickets;  // one per entry; only those submitted are used
    std::vector<char> in_store;            // submitted and not completed yet
    std::vector<char> in_journal;          // waiting for a journal group commit (may become durable)
    net::steady_timer timer;
  };
  auto st = std::make_shared<State>(ex, n);
  st->verdicts.resize(n);
  st->probed.resize(n);
  st->pending = n;
  st->done = std::move(done);

  std::vector<Digest> digests(n);
  for (std::size_t i = 0; i < n; ++i) {
    digests[i] = digester_(batch.entries[i].key);
    st->verdicts[i].digest_hex = ToHex(digests[i]);
  }
  const bool trusted = filter_on_ && warm();
  for (Probed& p : st->probed) p.filter_trusted = trusted;

  // Called on `ex` for every entry exactly once; the last one answers.
  auto finish_one = [&counters](const std::shared_ptr<State>& s) {
    if (--s->pending != 0 || !s->done) return;  // !done: the deadline already answered
    BatchDone answer = std::move(s->done);
    s->done = nullptr;
    s->timer.cancel();
    if (s->unknown) {
      answer(Problem::OutcomeUnknown(std::string(kBatchOutcomeUnknownDetail)));
      return;
    }
    if (s->unavailable) {
      answer(Problem::Unavailable(std::string(kBatchUnavailableDetail)));
      return;
    }
    for (const Verdict& v : s->verdicts) counters.CountVerdict(v.is_new, v.via_filter);
    answer(std::move(s->verdicts));
  };
  // Submits entry i to the Store (by value: a parked entry calls it later, after ObserveBatch returned).
  auto submit_entry = [this, st, inbox = &InboxOf(ex), &counters, finish_one](std::size_t i, const Digest& d,
                                                                             const std::string& source) {
    const bool queued = store_.Submit(RouteOfDigest(d), d, source,
                                      [this, st, i, inbox, &counters, finish_one, d](const storage::Result& r) {
                                        // Writer thread: remember a committed outcome, hop back to `ex`.
                                        RememberStored(d, r);
                                        inbox->Post([this, st, i, r, &counters, finish_one] {
                                          st->in_store[i] = 0;
                                          if (r.outcome == storage::Outcome::kUnavailable) {
                                            st->unavailable = true;
                                          } else if (r.outcome == storage::Outcome::kUnknown) {
                                            st->unknown = true;
                                          } else {
                                            Decide(st->probed[i], r, counters, st->verdicts[i]);
                                          }
                                          finish_one(st);
                                        });
                                      },
                                      std::shared_ptr<storage::Ticket>(st, &st->tickets[i]), st->probed[i].expect());
    if (queued) st->in_store[i] = 1;
    return queued;
  };
  // Entry i to the Store, or (queue full, PostgreSQL up: backpressure) parked until there is room, first
  // come first served as in Observe. False = refused (down, or --queue-wait=0): the batch is answered 503.
  // A parked entry whose batch was answered meanwhile (deadline) is dropped unsubmitted: that answer said
  // nothing of it was recorded.
  auto submit = [&](std::size_t i) {
    if (!OthersWaitForRoom() && submit_entry(i, digests[i], batch.entries[i].source)) return true;
    if (!MayWaitForRoom()) return false;
    WaitForRoom(
        ex, counters,
        [st, i, submit_entry, d = digests[i], source = batch.entries[i].source] {
          return !st->done || submit_entry(i, d, source);
        },
        [st, finish_one](Problem) {
          st->unavailable = true;
          finish_one(st);
        });
    return true;
  };
  // Armed once every entry is submitted, if some still wait: withdraws the queued ones at the deadline.
  auto arm_deadline = [this, &st] {
    if (!st->done || st->pending == 0) return;
    st->timer.expires_after(request_timeout_);
    st->timer.async_wait([st](const boost::system::error_code& ec) {
      if (ec || !st->done) return;  // operation_aborted: the last outcome arrived first
      BatchDone answer = std::move(st->done);
      st->done = nullptr;
      bool in_flight = false;
      for (std::size_t i = 0; i < st->in_store.size(); ++i) {
        if (st->in_store[i] && !st->tickets[i].Cancel()) in_flight = true;
        if (st->in_journal[i]) in_flight = true;  // its record may still become durable
      }
      answer(in_flight ? Problem::OutcomeUnknown(std::string(kBatchDeadlineInFlightDetail))
                       : Problem::Unavailable(std::string(kBatchDeadlineQueuedDetail)));
    });
  };

  // Journal hooks of the batch path: entry i answered from / recorded in the journal (see Observe).
  auto entry_done = [st, finish_one](std::size_t i, bool is_new, const std::string& first_seen) {
    return [st, finish_one, i, is_new, first_seen](storage::JournalFate fate) {
      st->in_journal[i] = 0;
      if (fate == storage::JournalFate::kIoError) {
        st->unknown = true;  // the record may be on disk (and replayed): outcome-unknown
      } else if (fate != storage::JournalFate::kDurable) {
        st->unavailable = true;
      } else {
        st->verdicts[i].is_new = is_new;
        st->verdicts[i].via_filter = is_new;
        st->verdicts[i].first_seen = first_seen;
      }
      finish_one(st);
    };
  };
  auto JournalKnownInBatch = [&](std::size_t i) {
    if (!journal_->Holds(digests[i])) return false;  // the common case, without building a waiter
    auto first_seen = std::make_shared<std::string>();
    auto r = journal_->Lookup(digests[i], JournalGroup(ex), [entry_done, i, first_seen](storage::JournalFate fate) {
      entry_done(i, false, *first_seen)(fate);
    });
    *first_seen = r.first_seen;  // the follower runs later, on this thread (posted to `ex`)
    if (r.state != storage::JournalDrain::LookupResult::kAbsent) st->in_journal[i] = 1;
    if (r.state == storage::JournalDrain::LookupResult::kDurable) {
      entry_done(i, false, r.first_seen)(storage::JournalFate::kDurable);
    }
    return r.state != storage::JournalDrain::LookupResult::kAbsent;
  };
  auto JournalNewInBatch = [&](std::size_t i, std::int64_t now_us) {
    st->in_journal[i] = 1;
    auto waiter = [this, d = digests[i], now_us, answer = entry_done(i, true, {})](storage::JournalFate fate) {
      if (fate == storage::JournalFate::kDurable) recent_.InsertConcurrently(d, now_us);  // as JournalNew
      answer(fate);
    };
    if (!journal_->Append(digests[i], batch.entries[i].source, JournalGroup(ex), std::move(waiter), now_us)) {
      entry_done(i, true, {})(storage::JournalFate::kRefused);
    }
  };
  // A recorded repeat: answered from the recent set (entry finished by the caller).
  auto RecentKnownInBatch = [&](std::size_t i) { return RecentKnown(digests[i], st->verdicts[i], counters); };

  if (ack_ == AckMode::kFilter && filter_on_) {
    for (std::size_t i = 0; i < n; ++i) {
      if (st->unavailable) {
        finish_one(st);
        continue;
      }
      const std::uint32_t route = RouteOfDigest(digests[i]);
      const std::lock_guard lock(stripes_[route & (kStripes - 1)]);  // see Observe
      Probed& p = st->probed[i];
      p.probe = filter_.ObserveConcurrently(digests[i]);
      CountUntrusted(p.filter_trusted, p.probe, counters);  // untrusted: exact path, as in Observe
      if (journal_ != nullptr && JournalKnownInBatch(i)) continue;  // journal hook
      if (p.filter_trusted && p.probe == Probe::kDefinitelyNew) {
        const std::int64_t now_us = NowUs();
        if (journal_ != nullptr) {  // journal hook
          if (journal_->usable()) {
            JournalNewInBatch(i, now_us);
          } else if (!submit(i)) {  // unusable journal: decided exactly, as in Observe
            st->unavailable = true;
            finish_one(st);
          }
          continue;
        }
        if (store_.SubmitWriteBehind(route, digests[i], batch.entries[i].source, now_us)) {
          recent_.InsertConcurrently(digests[i], now_us);  // under the stripe lock, as in Observe
          st->verdicts[i].is_new = true;
          st->verdicts[i].via_filter = true;
        } else {
          st->unavailable = true;
        }
        finish_one(st);
      } else if (RecentKnownInBatch(i)) {
        finish_one(st);
      } else if (!submit(i)) {
        st->unavailable = true;
        finish_one(st);
      }
    }
    arm_deadline();
    return;
  }

  if (filter_on_) {
    std::vector<Probe> probes(n);
    filter_.ObserveBatchConcurrently(digests, probes);
    for (std::size_t i = 0; i < n; ++i) {
      st->probed[i].probe = probes[i];
      CountUntrusted(st->probed[i].filter_trusted, probes[i], counters);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!st->unavailable && journal_ != nullptr && JournalKnownInBatch(i)) continue;  // journal hook (filter off)
    const Probed& p = st->probed[i];
    if (!st->unavailable && !(p.filter_trusted && p.probe == Probe::kDefinitelyNew) && RecentKnownInBatch(i)) {
      finish_one(st);  // a recorded repeat (see Observe)
      continue;
    }
    // After the first refusal the rest are not submitted: the whole batch is answered 503 anyway.
    if (st->unavailable || !submit(i)) {
      st->unavailable = true;
      finish_one(st);
    }
  }
  arm_deadline();
}

MetricsSnapshot Service::Snapshot() const {
  MetricsSnapshot s;
  metrics_.Collect(s);
  const auto now = std::chrono::steady_clock::now();
  const auto sample = filter_telemetry_.Latest();
  s.filter_snapshot_age_seconds = std::chrono::duration<double>(now - sample->taken).count();
  s.shards = sample->shards;
  for (ShardStats& st : s.shards) st.age_seconds += s.filter_snapshot_age_seconds;  // generation age now
  s.filter_window_seconds = window_seconds_;
  s.filter_capacity_per_shard = filter_.geometry().capacity_per_shard;
  s.filter_fp_target = fp_target_;
  s.uptime_seconds = std::chrono::duration<double>(now - started_).count();
  s.filter_memory_bytes = filter_.geometry().memory_bytes;
  s.warm = warm();
  s.store = store_.Stats();
  s.recent_keys = recent_.size();
  s.recent_capacity = recent_.bound();
  if (journal_ != nullptr) s.journal = journal_->Stats();
  if (brin_ != nullptr) s.brin = brin_->Stats();
  return s;
}

}  // namespace scangate::server
