// The per-key decision of scangate, written once: /observe is a call of one key, /observe/batch a loop over
// the same decision with one answer for the batch, and the journal hooks (service_journal.cc) are two of its
// steps. The rule, for a key whose digest the filter has just probed:
//   1. journalled and not yet in PostgreSQL (ack=filter, --journal=on)  -> duplicate, from the journal
//   2. ack=filter and a trusted "definitely new"                        -> new, once journalled (durable) or
//      written behind; a journal that is unusable (disk full, I/O error, folder removed), a write-behind
//      queue that is full, a stale follower (--follow-max-lag) or a journal whose oldest uncommitted record
//      is older than --max-commit-lag sends it to the exact path instead (step 4)
//   3. not a trusted "definitely new", and in the recent set            -> duplicate, no round trip
//   4. otherwise the exact path: PostgreSQL decides (insert-if-absent), waiting for room in a full queue
//      up to --queue-wait; a Store that is down -> 503 unavailable
// Idempotency-Key (issue 34): a key observed with one carries its request's idempotency record wherever it is
// recorded (step 2: the journal record, the pending set and the write-behind row; step 4: the row), and a
// duplicate whose record is this request's is a retry of the request that recorded it, answered `new` again
// (replayed): from the pending set in step 1, from the recent set in step 3 (an entry keeps the recording
// request's record; one whose record is unknown — a follower's row, a duplicate whose row was not read — is no
// answer for such a request), from PostgreSQL's row in step 4.
// Rotation (issue 55, service_previous.cc): with --digest-secret-previous-file step 2 is skipped and step 4 first
// reads the key's previous digest in PostgreSQL (found: duplicate), then inserts the current one.
// Peers (issue 42): step 2's `new` and step 4's insert need every running journal owner's watermark to cover the
// request (read with the follower's freshness before the probe); otherwise the key is read (a duplicate when
// PostgreSQL holds it), waits for coverage (bounded) or gets 503 (service_peers.cc).
// Invariants: a filter positive always reaches step 1, 3 or 4 (never a "duplicate" from the filter); in
// ack=filter steps 1-4 run under the digest's stripe lock, so a concurrent observer of the digest finds
// either nothing (and queues behind its write-behind row: same Store route, FIFO) or the record.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/json/array.hpp>

#include "server/verdict/service.h"
#include "server/log.h"
#include "server/verdict/service_call.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kUnavailableDetail =
    "PostgreSQL is unavailable or the write queue is full; retry after the Retry-After delay";
constexpr std::string_view kOutcomeUnknownDetail =
    "the connection to PostgreSQL broke while this key's transaction was committing and PostgreSQL could not "
    "tell whether it committed; the key may be recorded: a retry may be answered duplicate with a first_seen "
    "inside this attempt (a retry with this attempt's Idempotency-Key gets its real verdict)";
// A batch's 503 names the cause of its first failed key (outcome-unknown first), then this.
constexpr std::string_view kBatchNote =
    " (a key of this batch; keys of this batch that were already recorded stay recorded, so a retry reports "
    "them as duplicates)";

constexpr std::string_view kDeadlineQueuedDetail =
    "PostgreSQL did not answer within the request timeout; the key was withdrawn before it was written, so "
    "nothing was recorded; retry after the Retry-After delay";
constexpr std::string_view kDeadlineInFlightDetail =
    "PostgreSQL did not answer within the request timeout while the key's transaction was in flight: the key "
    "may have been recorded, and a retry may answer duplicate with a first_seen inside this attempt (a retry "
    "with this attempt's Idempotency-Key gets its real verdict)";
constexpr std::string_view kBatchDeadlineQueuedDetail =
    "PostgreSQL did not answer within the request timeout; the keys still waiting were withdrawn unwritten; "
    "keys of this batch that were already inserted stay inserted, so a retry reports them as duplicates";
constexpr std::string_view kBatchDeadlineInFlightDetail =
    "PostgreSQL did not answer within the request timeout while keys of this batch were in a transaction: "
    "they may have been recorded, and a retry may answer duplicate with a first_seen inside this attempt";


// Store route of a digest: its first four bytes (uniform for SHA-256/HMAC output).
std::uint32_t RouteOfDigest(const Digest& d) {
  std::uint32_t r = 0;
  std::memcpy(&r, d.data(), sizeof r);
  return r;
}
}  // namespace

void Service::Call::Answer() {
  if (problem_) {
    Problem p = std::move(*problem_);
    if (batch()) p.detail += kBatchNote;
    return Deliver(std::move(p));
  }
  for (std::size_t i = 0; i < n_; ++i) counters.CountVerdict(data_[i].verdict.is_new, data_[i].verdict.via_filter);
  if (deadline) deadline->cancel();
  if (auto* single = std::get_if<ObserveDone>(&done_)) {
    ObserveDone answer = std::exchange(*single, nullptr);
    return answer(std::move(one_.verdict));
  }
  BatchDone answer = std::exchange(std::get<BatchDone>(done_), nullptr);
  std::vector<Verdict> verdicts;
  verdicts.reserve(n_);
  for (std::size_t i = 0; i < n_; ++i) verdicts.push_back(std::move(data_[i].verdict));
  answer(std::move(verdicts));
}

void Service::Call::Deliver(Problem p) {
  if (deadline) deadline->cancel();
  if (auto* single = std::get_if<ObserveDone>(&done_)) return std::exchange(*single, nullptr)(std::move(p));
  std::exchange(std::get<BatchDone>(done_), nullptr)(std::move(p));
}

namespace {
// --keys=gs1: a pack scanned with another lot or expiry than its first scan (European verification systems
// raise it as a suspected falsification): counted per field and logged — the digest, never the key or lot.
void NoteMismatch(const Verdict& v, ThreadCounters& counters) {
  boost::json::array fields;
  if ((v.mismatch & kMismatchLot) != 0) {
    counters.mismatch_lot.Inc();
    fields.emplace_back("lot");
  }
  if ((v.mismatch & kMismatchExpiry) != 0) {
    counters.mismatch_expiry.Inc();
    fields.emplace_back("expiry");
  }
  Log(LogLevel::kWarn, "pack_mismatch",
      {{"digest", v.digest_hex}, {"fields", std::move(fields)}, {"first_seen", v.first_seen}});
}

// Counts a "definitely new" the filter could not vouch for (after warm start, when the filter counts).
void CountUntrusted(bool filter_trusted, Probe probe, ThreadCounters& counters) {
  if (filter_trusted && probe == Probe::kDefinitelyNewUntrusted) counters.untrusted_negatives.Inc();
}
}  // namespace

void Service::ReadTrust(Call& call, std::size_t i, const Digest& d) const {
  Call::Entry& e = call.at(i);
  // Issue 42, item 2: read BEFORE the probe. The follower stores its stamp (and the peers' view its deadline) with
  // release after setting a poll's digests in the filter; these acquire loads make those digests visible to the
  // probe below. Read after the probe (as before), a stale->fresh flip in between vouched for a negative the probe
  // had taken before the digests were set — a key committed elsewhere answered `new`.
  if (fresh_) e.fresh = fresh_(d, BootClock::time_point(BootClock::duration(call.arrived_ns)));
  if (peers_.covered) e.covered = peers_.covered(d, call.arrived_ns);
}

void Service::DecideKey(const CallPtr& call, std::size_t i, const Digest& d, const std::string& source,
                        std::optional<Probe> probe) {
  Call::Entry& e = call->at(i);
  const std::uint32_t route = RouteOfDigest(d);
  ReadTrust(*call, i, d);
  if (ack_ == AckMode::kFilter && filter_on_) {
    // Probe and decide atomically per stripe: if another observer of this digest sees our bits, its exact
    // Submit is queued after our write-behind row (same store route, FIFO) and so gets "duplicate".
    const MutexLock lock(&stripes_[route & (kStripes - 1)]);
    e.probed.probe = filter_.ObserveConcurrently(d);
    return DecideProbed(call, i, route, d, source);
  }
  // Before warm start the probe still sets the key's bits (so the filter is complete once warm), but its
  // answer is not trusted and the key takes the exact path.
  if (filter_on_) e.probed.probe = probe ? *probe : filter_.ObserveConcurrently(d);
  DecideProbed(call, i, route, d, source);
}

void Service::DecideProbed(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                           const std::string& source) {
  Call::Entry& e = call->at(i);
  CountUntrusted(e.probed.filter_trusted, e.probed.probe, call->counters);
  // 1. Journalled, not yet in PostgreSQL: answered from the journal.
  if (journal_ != nullptr) {
    switch (JournalKnown(call, i, d)) {
      case Journalled::kAnswered:
        return;
      case Journalled::kExpired:
        // Its record is past the horizon but not yet in PostgreSQL: PostgreSQL decides, behind that row (same
        // route, FIFO), and takes the expired row over (`new`); never journalled twice while pending.
        return ExactPath(call, i, route, d, source);
      case Journalled::kAbsent:
        break;
    }
    // Rotating (issue 55): this instance's journal may still hold the key under the previous digest (recorded
    // before the rotation, replayed into PostgreSQL after start): a duplicate of that record. Expired: as absent.
    if (e.previous && JournalKnown(call, i, *e.previous) == Journalled::kAnswered) return;
  }
  const bool filter_said_new = e.probed.filter_said_new();
  // 2. ack=filter: a trusted "definitely new" is recorded by this instance (filter_said_new implies the
  // filter is on). An untrusted negative goes on to the exact path: queued behind any write-behind row of
  // this digest (same route, FIFO), so a key the filter forgot within the window is answered duplicate.
  // --follow: a definitely-new is a verdict only while the follower of the digest's database is fresh (it holds
  // every digest committed there, by any instance, up to --follow-max-lag ago); stale, PostgreSQL decides.
  if (ack_ == AckMode::kFilter && filter_said_new) {
    // Issue 55: while rotating, a key is new only if PostgreSQL holds it under neither digest (the previous one is
    // read first: ExactPath); and an instance whose scheme the database no longer confirms (another instance may
    // have rotated) answers nothing from its filter — its inserts are fenced in PostgreSQL (sql/014).
    if (e.previous || (scheme_current_ && !scheme_current_(d))) return ExactPath(call, i, route, d, source);
    if (!e.fresh) {
      call->counters.follower_fallbacks.Inc();
      return ExactPath(call, i, route, d, source);
    }
    // Issue 42: a peer may hold this key answered `new` and uncommitted (ExactPath sends it to Uncovered).
    if (!e.covered) return ExactPath(call, i, route, d, source);
    // This instance's own watermark row is not registered yet (at start) or not held (issue 55: its lease lapsed,
    // or it was fenced), or — --journal=off — it is not known to be alone on d's database (storage/peers/
    // presence.h): the other instances could not know what it answers, so PostgreSQL decides.
    if (peers_.published && !peers_.published(d)) {
      call->counters.unpublished_fallbacks.Inc();
      return ExactPath(call, i, route, d, source);
    }
    // first_seen of the journal record / write-behind row and the set: the least PostgreSQL's clock can read now
    // (Service::AttachClocks), so its row expires no later than --retention from now, when every filter may forget
    // it — whatever this host's clock says. Not read yet (a partition just moved): PostgreSQL decides, by its own.
    const std::optional<std::int64_t> stamp_us = PgNowUs(d, /*upper=*/false);
    if (!stamp_us) return ExactPath(call, i, route, d, source);
    const std::int64_t now_us = *stamp_us;
    // --max-commit-lag: a key this instance answered `new` is unknown to the other instances until PostgreSQL
    // commits it; while the oldest such key has waited longer than the bound (PostgreSQL behind this instance's
    // rate), new keys are decided in PostgreSQL — which adds nothing to the journal's backlog — until it is
    // younger. So the cross-instance window stays bounded under any load. Per partition (the journal keeps the
    // oldest per partition): one partition's outage does not send the others' new keys to PostgreSQL.
    if (CommitLagPastBound(call->arrived_ns, d)) {
      call->counters.commit_lag_fallbacks.Inc();
      return ExactPath(call, i, route, d, source);
    }
    if (journal_ != nullptr) {
      if (journal_->usable() && JournalNew(call, i, d, source, now_us)) return;
      // The journal is unusable (a fault; it heals by itself): PostgreSQL decides, as with --ack=commit.
      return ExactPath(call, i, route, d, source);
    }
    if (!OthersWaitForRoom() && store_.SubmitWriteBehind(route, d, source, now_us, e.attrs.request)) {
      // Recorded (written behind with this first_seen and request record). Inserted under the stripe lock, so a
      // concurrent observer of the digest finds either nothing yet (and queues behind the row) or this entry.
      recent_.InsertConcurrently(d, now_us, Recorder::Of(e.attrs.request), ExpiredBeforeUs(now_us));
      e.verdict.is_new = true;
      e.verdict.via_filter = true;
      return call->Finish();
    }
    // Queue full (backpressure). We must not wait holding the stripe lock, and our bits are already set: an
    // observer of this digest arriving from now on sees them and takes the exact path, which our write-behind
    // row would no longer precede. So this key takes the exact path too (waiting for room without the lock):
    // both exact, PostgreSQL tells exactly one of them "new" (invariant 2).
    return ExactPath(call, i, route, d, source);
  }
  // 3. A recorded repeat: no PostgreSQL round trip — a duplicate, or (Idempotency-Key) the recording request's
  // retry replayed. A trusted "definitely new" skips the set (ack=commit: PostgreSQL decides it anyway; no lookup
  // per new key).
  if (!filter_said_new &&
      RecentKnown(e.recent_digest, d, e.attrs.keep_until_us, e.attrs.request, e.verdict, call->counters)) {
    return call->Finish();
  }
  // 4. PostgreSQL decides.
  ExactPath(call, i, route, d, source);
}

void Service::ExactPath(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                        const std::string& source) {
  // Issue 42: an insert cannot see a key a peer answered `new` and has not committed.
  if (!call->at(i).covered) return Uncovered(call, i, route, d, source);
  // Issue 55: covered, so every key a peer answered before this request is committed: read the previous digest
  // now, before the insert under the current one (service_previous.cc).
  if (call->at(i).previous && !call->at(i).previous_read) return ReadPrevious(call, i, route, d, source);
  // Behind parked requests, this one parks too (first come, first served) rather than taking their room.
  if (!OthersWaitForRoom() && SubmitExact(call, i, route, d, source)) return;
  if (!MayWaitForRoom()) return call->Fail(Problem::Unavailable(std::string(kUnavailableDetail)));
  // Queue full: wait for room, then submit; the request deadline still counts from the call's start. A key
  // whose call was answered meanwhile (deadline) is dropped unsubmitted: that answer said it was not recorded.
  WaitForRoom(
      call->ex, call->counters,
      [this, call, i, route, d, source] { return call->answered() || SubmitExact(call, i, route, d, source); },
      [call](Problem problem) { call->Fail(std::move(problem)); });
}

bool Service::SubmitExact(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                          const std::string& source) {
  Call::Entry& e = call->at(i);
  e.digest = d;
  if (call->inbox == nullptr) call->inbox = &InboxOf(call->ex);
  // The completion holds the entry alone: a shared_ptr sharing the call's (16 bytes: inline in the Store's
  // AnyInvocable, no allocation), the call reached through it.
  auto on_stored = [entry = std::shared_ptr<Call::Entry>(call, &e)](const storage::Result& r) {
    // Runs on a writer thread: remember a committed outcome (a fact, even when the deadline already
    // answered), then hop back to the call's thread (batched with the rest of the writer's batch bound for
    // it); never block here.
    Call& c = *entry->call;
    c.service.RememberStored(entry->digest, r);
    c.inbox->Post(StoredAnswer{CallPtr(entry, &c), c.index_of(*entry), r});
  };
  static_assert(sizeof(on_stored) <= 2 * sizeof(void*) && std::is_nothrow_move_constructible_v<decltype(on_stored)>,
                "the Store completion must stay inline in its AnyInvocable (no allocation per key)");
  // The ticket lives inside the call (aliasing shared_ptr): no allocation of its own.
  if (!store_.Submit(route, d, source, std::move(on_stored), std::shared_ptr<storage::Ticket>(call, &e.ticket),
                     e.probed.expect(), e.attrs)) {
    return false;
  }
  e.in_store = true;
  ArmDeadline(call);
  return true;
}

void Service::OnStored(Call& call, std::size_t i, const storage::Result& r) const {
  Call::Entry& e = call.at(i);
  e.in_store = false;
  if (r.outcome == storage::Outcome::kUnavailable) {
    return call.Fail(Problem::Unavailable(std::string(kUnavailableDetail)));
  }
  if (r.outcome == storage::Outcome::kUnknown) {  // an in-doubt COMMIT PostgreSQL could not settle
    return call.Fail(Problem::OutcomeUnknown(std::string(kOutcomeUnknownDetail)));
  }
  Decide(e.probed, e.attrs, r, call.counters, e.verdict);
  call.Finish();
}

bool Service::CommitLagPastBound(std::int64_t now_ns, const Digest& d) const {
  if (max_commit_lag_ns_ == 0) return false;  // unbounded, or not following with the journal (no journal_)
  const std::int64_t oldest = journal_->oldest_uncommitted_ns(d);  // of d's partition; boot clock
  return oldest != 0 && now_ns - oldest > max_commit_lag_ns_;
}

void Service::Replay(Verdict& v, ThreadCounters& counters) {
  v.is_new = true;
  v.via_filter = false;
  v.replayed = true;
  counters.idempotent_replays.Inc();
}

void Service::Decide(const Probed& p, const storage::PackAttrs& scan, const storage::Result& r,
                     ThreadCounters& counters, Verdict& v) const {
  const bool filter_said_new = p.filter_said_new();
  if (r.outcome == storage::Outcome::kInserted) {
    v.is_new = true;
    // ack=commit: "via filter" = the filter said new and PostgreSQL confirmed it.
    v.via_filter = filter_said_new;
    if (p.filter_trusted && p.probe == Probe::kPossiblySeen) counters.false_positives.Inc();
  } else if (scan.request && r.recorded.request == scan.request) {
    // The row holds this request's idempotency record: a retry of the request that recorded the key (its first
    // answer lost), answered as that one was.
    Replay(v, counters);
  } else {
    v.is_new = false;
    v.via_filter = false;
    v.first_seen = r.first_seen;
    if (filter_said_new) counters.stale.Inc();
    v.mismatch = KeyReader::Mismatch(scan, r.recorded);
    if (v.mismatch != 0) NoteMismatch(v, counters);
  }
}

void Service::ArmDeadline(const CallPtr& call) {
  if (call->deadline || call->answered()) return;
  call->deadline.emplace(call->ex);
  call->deadline->expires_at(call->started + request_timeout_);
  call->deadline->async_wait([call](const boost::system::error_code& ec) {
    if (ec || call->answered()) return;  // operation_aborted: the last outcome arrived first
    bool in_flight = false;
    for (std::size_t i = 0; i < call->size(); ++i) {
      Call::Entry& e = call->at(i);
      if (e.in_store && !e.ticket.Cancel()) in_flight = true;  // a writer holds it: its transaction may commit
      if (e.in_journal) in_flight = true;                      // its record may still become durable
    }
    const bool batch = call->batch();
    if (in_flight) {
      call->AnswerNow(Problem::OutcomeUnknown(
          std::string(batch ? kBatchDeadlineInFlightDetail : kDeadlineInFlightDetail)));
    } else {
      call->AnswerNow(
          Problem::Unavailable(std::string(batch ? kBatchDeadlineQueuedDetail : kDeadlineQueuedDetail)));
    }
  });
}

}  // namespace scangate::server
