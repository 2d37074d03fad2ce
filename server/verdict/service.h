// The verdict logic of scangate: digest a key, ask the sharded Bloom filter, and let PostgreSQL (the Store)
// decide whenever the filter cannot. The per-key decision is written once (server/verdict/verdict.cc): /observe is a
// call of one key, /observe/batch a loop over the same decision with one answer (server/verdict/service_call.h).
// Invariants kept here: a filter positive always goes to PostgreSQL (never a "duplicate" from the filter); in
// ack=commit no "new" is given before the commit; in ack=filter a "new" from the filter is given only after
// its write-behind row is queued (or its journal record is durable), with probe and enqueue atomic per digest
// stripe so a concurrent observer's exact insert is ordered after it. Called on I/O threads; completions run
// on the caller's executor. The HTTP side is server/http/http_server.h; the pure parsing is request.h.
// Request deadline (--request-timeout): a call waiting for the Store is answered 503 when it passes —
// `unavailable` if its keys were still queued (withdrawn through their storage::Ticket: nothing recorded),
// `outcome-unknown` if a transaction (or a journal commit) already held one. The deadline timer and the Store
// completions race on the call's executor (one thread); the first answers, the late ones only count down.
// Recent set (--recent-keys, core/recent_set.h): digests this instance KNOWS are recorded — the Store answered
// kInserted/kDuplicate (committed, with PostgreSQL's first_seen), or (ack=filter) a write-behind row was
// accepted or a journal record became durable, with the first_seen the row will carry. A key the filter does
// not vouch for as new is looked up there first and, when found, answered "duplicate" at once (no PostgreSQL
// round trip; counted as a recent hit). It is exact, so only recorded keys are ever answered from it; a
// forgotten key goes to PostgreSQL. Each entry also keeps its recorder — the idempotency record of the request
// that recorded the key (the row's: the inserting request's, or read back from the row), none, or unknown when
// its source did not carry it (--follow's rows, a raw batch's duplicate) — so a request with an Idempotency-Key
// is answered from it too: its retry replayed `new`, a second scan "duplicate"; unknown -> PostgreSQL.
// Write-behind inserts happen under the stripe lock with the enqueue, so a concurrent observer of the digest
// finds either nothing (and queues behind the row, FIFO) or the entry.
// Eviction is safe only because a key not found still queues behind its digest's write-behind row: a lane that
// skipped the write-behind queue would need the set to keep pending rows' digests.
// Peers (issue 42, service_peers.cc; the argument: storage/peers/peer_view.h): a key is decided `new` — by the
// filter (journal, write-behind) or by an insert on the exact path — only while every running journal owner of its
// database covers the request's arrival (PeerHooks::covered, read with the follower's freshness BEFORE the filter is
// probed); otherwise a read answers `duplicate` when PostgreSQL holds the key, else it waits for coverage up to
// min(--peer-wait, --request-timeout), then 503 unavailable.
// Backpressure (--queue-wait, service_backpressure.cc): a key the Store refuses because its queue is full
// waits for room (server/verdict/room_wait.h) up to min(--queue-wait, --request-timeout), then 503 unavailable — the
// same for a single key and for each key of a batch; a Store that is down still answers 503 at once.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <boost/asio/any_io_executor.hpp>

#include "core/boot_clock.h"
#include "core/digest.h"
#include "core/mutex.h"
#include "core/filter.h"
#include "core/recent_set.h"
#include "server/config/config.h"
#include "server/metrics/filter_telemetry.h"
#include "server/verdict/io_inbox.h"
#include "server/verdict/scan_key.h"
#include "server/metrics/metrics.h"
#include "server/http/request.h"
#include "storage/horizon/brin_summarizer.h"
#include "storage/horizon/expiry.h"
#include "storage/clock/pg_clock.h"
#include "storage/exact_store.h"
#include "storage/journal/journal_drain.h"
#include "storage/read/lookup.h"
#include "storage/store.h"

namespace scangate::server {

class Service {
 public:
  // Move-only: a completion of up to 16 bytes (the router's Reply) is held inline, without an allocation.
  using ObserveDone = absl::AnyInvocable<void(std::variant<Verdict, Problem>)>;
  using BatchDone = absl::AnyInvocable<void(std::variant<std::vector<Verdict>, Problem>)>;

  // All references must outlive the Service. `journal` (ack=filter with --journal=on, else null): filter
  // negatives are answered "new" only once durable in it, and its pending digests answer repeats.
  Service(const Config& config, Digester digester, ShardedFilter& filter, storage::ExactStore& store,
          Metrics& metrics, storage::JournalDrain* journal = nullptr);

  // Decide one observation. Call on the I/O thread that owns `ex` and `counters`; `done` runs on `ex`, either
  // inline (before Observe returns) or later, exactly once. Throws only on digest failure (-> 500).
  void Observe(const Observation& obs, const boost::asio::any_io_executor& ex, ThreadCounters& counters,
               ObserveDone done);
  // Decide a batch in request order: the same per-key decision as Observe for every entry, then one answer
  // (any entry unavailable -> one 503 for the batch; any outcome unknown -> one outcome-unknown). Same
  // threading contract.
  void ObserveBatch(const BatchRequest& batch, const boost::asio::any_io_executor& ex, ThreadCounters& counters,
                    BatchDone done);

  // Warm start: before MarkWarm every key takes the exact path. Safe to call from any thread.
  void MarkWarm() { warm_.store(true, std::memory_order_release); }  // release: the warm-load inserts precede it
  bool warm() const { return warm_.load(std::memory_order_acquire); }  // acquire: pairs with MarkWarm
  // /readyz: PostgreSQL up, warm start done, and (journal) every recovered record replayed into PostgreSQL.
  // An unusable journal does not make the instance unready: new keys are then decided exactly in PostgreSQL
  // (as --ack=commit), so its answers stay right; JournalState() names the fault for /readyz's body instead.
  // The store "serving" (storage::ExactStore::serving): with --partitions one partition down leaves the instance
  // ready — its keys get 503, the others are answered — so a load balancer does not take every instance out.
  // Issue 42: and, once, the peers read and this instance's own watermark rows registered (PeerHooks::started), so
  // that its first keys are not all decided in PostgreSQL or made to wait; later lapses leave it ready (named by
  // PeerState()).
  bool ready() const {
    return warm() && store_.serving() && (journal_ == nullptr || journal_->replayed()) &&
           (!peers_.started || peers_.started());
  }
  // "" without a journal or while it is usable, else e.g. "unusable: ENOSPC: No space left on device (...)".
  // Safe to call concurrently.
  std::string JournalState() const {
    if (journal_ == nullptr || journal_->usable()) return {};
    return "unusable: " + journal_->unusable_cause();
  }

  // What Snapshot() reports of the storage's readers — the BRIN summarizers, the expiries and (--partitions) the
  // state per partition — filled by `fill` (App owns them: one per partition). Call before serving; `fill` runs
  // on the scraping thread and must be thread-safe.
  void AttachStorageStats(std::function<void(MetricsSnapshot&)> fill) { storage_stats_ = std::move(fill); }

  // --follow (issue 32, ack=filter): `fresh(d, t)` is true while the follower of d's database holds every digest
  // committed there more than --follow-max-lag before boot time t; a definitely-new is the verdict only then (else
  // PostgreSQL decides it: counted as a follower fallback). Read before the filter is probed (issue 42: with acquire,
  // after which the probe sees every digest the follower applied before its stamp). `state` names the stale
  // followers for /readyz ("" when none). Call before serving; both run on I/O threads and must be thread-safe.
  void AttachFollowers(std::function<bool(const Digest&, BootClock::time_point)> fresh,
                       std::function<std::string()> state) {
    fresh_ = std::move(fresh);
    follower_state_ = std::move(state);
  }
  // The clock of every partition's PostgreSQL (storage/clock/pg_clock.h, issue 42): the first_seen of a key this
  // instance answers new is the least its PostgreSQL's clock can read at the answer, and a record it remembers is
  // past the horizon once the most that clock can read says so — never this host's wall clock. A partition whose
  // clock is not read yet decides its new keys in PostgreSQL. Without (unit tests), this host's wall clock.
  // Call before serving; `clocks` must outlive the Service.
  void AttachClocks(const storage::PgClocks* clocks) { clocks_ = clocks; }
  // Issue 42: what the Service asks of the peers' watermark (storage/peers/). Every member may be empty (no peers
  // read or published: everything covered). All run on I/O threads and must be thread-safe and lock-free.
  struct PeerHooks {
    // Every running journal owner of d's database covers a request that arrived at boot time t_ns
    // (storage::PeerView::Covered, acquire).
    std::function<bool(const Digest&, std::int64_t t_ns)> covered;
    // This instance's own row of d's database is registered and held (WatermarkPublisher::published, the lease of
    // issue 55): a journal `new` of d may be given. --journal=off: it is alone on d's database
    // (InstancePresence::held). Empty: everything may be given.
    std::function<bool(const Digest&)> published;
    std::function<unsigned(const Digest&)> partition;  // d's logical partition (its waiters' queue)
    unsigned partitions = 1;
    storage::DigestReader* reader = nullptr;  // reads PostgreSQL while coverage lacks; null = none (wait at once)
    std::function<std::string()> state;       // what lags, for /readyz ("" when covered)
    // Every view has been sampled once and every own row registered (part of ready()).
    std::function<bool()> started;
  };
  // Call before serving.
  void AttachPeers(PeerHooks hooks);
  // Issue 55, rotation (--digest-secret-previous-file; service_previous.cc): `previous` digests keys as the previous
  // secret did; `reader` reads PostgreSQL for them (a key found under its previous digest is a duplicate). Call
  // before serving; `reader` must outlive the Service.
  void AttachPrevious(Digester previous, const Config& config, storage::DigestReader* reader);
  // Issue 55: true while the database's digest scheme is confirmed to be this instance's for d's partition
  // (storage/scheme/scheme_watch.h): a filter `new` is given only then. Call before serving; thread-safe.
  void AttachSchemeWatch(std::function<bool(const Digest&)> current) { scheme_current_ = std::move(current); }
  bool rotating() const { return previous_keys_.has_value(); }
  // "" without peers or while covered, else e.g. "instance 1b4e... (host) 3.1 s behind". Thread-safe.
  std::string PeerState() const { return peers_.state ? peers_.state() : std::string(); }
  // "" without followers or while every one is fresh, else e.g. "stale: p1 (connection refused...)".
  std::string FollowerState() const { return follower_state_ ? follower_state_() : std::string(); }
  // --ack=commit with --follow (Config::follow_commit): raw keys any instance committed, with their first_seen,
  // enter the recent set (they are recorded: PostgreSQL committed them), so their repeats here are answered
  // duplicate without a round trip — within the horizon, as this instance's own. Follower's thread; thread-safe.
  void LearnCommitted(std::span<const Digest> digests, std::span<const std::int64_t> first_seen_us);

  // Every counter now; the filter's per-shard figures from the latest RefreshTelemetry() (age reported).
  MetricsSnapshot Snapshot() const;
  // Re-samples the filter for Snapshot(). Call from the maintenance timer (one thread), every
  // FilterTelemetry::kRefreshPeriod.
  void RefreshTelemetry() { filter_telemetry_.Refresh(); }

  // The digest and (--keys=gs1) pack attributes of `key`, exactly as an observation of it would be read, or a
  // 400 problem: POST /lookup. Thread-safe.
  std::variant<ScanKey, Problem> ReadKey(std::string_view key) const { return keys_.Read(key); }
  // The same under the previous digest secret while rotating (issue 55), else nullopt. Thread-safe.
  std::optional<ScanKey> ReadPreviousKey(std::string_view key) const {
    if (!previous_keys_) return std::nullopt;
    auto read = previous_keys_->Read(key);
    if (auto* k = std::get_if<ScanKey>(&read)) return std::move(*k);
    return std::nullopt;
  }
  // MismatchBits of a scan against a recorded pack (POST /lookup). Pure.
  static std::uint8_t Mismatch(const storage::PackAttrs& scan, const storage::PackAttrs& recorded) {
    return KeyReader::Mismatch(scan, recorded);
  }

 private:
  // ack=filter: probe+enqueue of one digest happen under its stripe's mutex (uncontended in practice:
  // two observers of one stripe at once). 1024 stripes cut collisions of unrelated keys to ~0.1 %.
  static constexpr std::size_t kStripes = 1024;
  static_assert((kStripes & (kStripes - 1)) == 0, "kStripes must be a power of two");

  struct Probed;  // server/verdict/service_call.h
  struct Call;    // one Observe/ObserveBatch call's keys in flight (server/verdict/service_call.h)
  using CallPtr = std::shared_ptr<Call>;

  // THE per-key decision (server/verdict/verdict.cc), for /observe, /observe/batch and the journal hooks alike:
  // probes key i of `call` (under its stripe lock in ack=filter; `probe` = the batch's pre-probe otherwise)
  // and either finishes it at once (filter-new written behind, a recent or journalled repeat) or hands it to
  // the journal or the Store, whose answer finishes it later. Call on the call's I/O thread.
  void DecideKey(const CallPtr& call, std::size_t i, const Digest& d, const std::string& source,
                 std::optional<Probe> probe);
  // The rule itself, once the probe is in call->at(i) (under the stripe lock in ack=filter).
  void DecideProbed(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                    const std::string& source);
  // Reads the followers' freshness and the peers' coverage for key i (Entry::fresh, covered): BEFORE the filter is
  // probed (issue 42: acquire loads that make the follower's applied digests visible to the probe).
  void ReadTrust(Call& call, std::size_t i, const Digest& d) const;
  // The exact path: PostgreSQL decides. Submits key i to the Store, waits for room when the queue is full
  // (backpressure, the same for both routes), or fails it 503 unavailable. A key whose request the peers do not
  // cover goes to Uncovered instead (an insert could answer `new` a key a peer holds uncommitted).
  void ExactPath(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                 const std::string& source);
  // One Store submission of key i; false = refused (nothing queued). Arms the call's deadline.
  bool SubmitExact(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                   const std::string& source);
  // The Store's outcome of key i, on the call's thread.
  void OnStored(Call& call, std::size_t i, const storage::Result& r) const;
  // A Store outcome on its way from a writer thread to the call's I/O thread (its IoInbox).
  struct StoredAnswer {
    CallPtr call;
    std::size_t index = 0;
    storage::Result result;
  };
  // --max-commit-lag: the journal's oldest record of d's partition not yet in PostgreSQL was appended longer than
  // the bound before boot time `now_ns` (always false when the bound is 0, i.e. unbounded or not following with the
  // journal). On the boot clock (issue 42): a wall-clock step cannot switch it off.
  bool CommitLagPastBound(std::int64_t now_ns, const Digest& d) const;
  // Idempotency-Key: `v` answers a retry of the request that recorded its key — `new` again, marked replayed
  // (counted). Decide (from the row) and OnJournal (from the journal's record) share it.
  static void Replay(Verdict& v, ThreadCounters& counters);
  // Verdict of a committed Store outcome (counts false positives and stale negatives).
  // --keys=gs1: a duplicate whose `scan` attributes contradict the recorded ones carries the mismatch (counted,
  // logged with the digest only).
  void Decide(const Probed& p, const storage::PackAttrs& scan, const storage::Result& r, ThreadCounters& counters,
              Verdict& v) const;
  // Starts the call's request deadline (once, at its first Store submission): at started + --request-timeout,
  // queued keys are withdrawn (503 unavailable) or, if one is in a transaction or a journal commit, 503
  // outcome-unknown.
  void ArmDeadline(const CallPtr& call);

  // Peers' hooks (service_peers.cc). Key i may not be decided `new` now: a read answers `duplicate` when
  // PostgreSQL holds it (not for an Idempotency-Key: the read does not return the row's request record), else it
  // waits for coverage (WaitForCoverage), then takes the exact path.
  void Uncovered(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d, const std::string& source);
  // Issue 55 (service_previous.cc): e's digests under the previous secret (no-op without one); the read of key i's
  // previous digest before its insert, and its answer on the call's thread.
  void ReadPreviousDigest(Call& call, std::size_t i, std::string_view key) const;
  void ReadPrevious(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                    const std::string& source);
  void OnPreviousRead(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                      const std::string& source, const storage::RecordLookup& r);
  void OnUncoveredRead(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                       const std::string& source, const storage::RecordLookup& r);
  // Parks key i on its partition's queue (server/verdict/room_wait.h) until the peers cover its arrival (then the
  // exact path) or min(--peer-wait, the request deadline) passes (503 unavailable, counted).
  void WaitForCoverage(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                       const std::string& source);

  // Backpressure hooks (service_backpressure.cc). True when a refused item may wait for room: --queue-wait
  // is not 0 and the Store is up (a refusal while up means its queue is full or it is shutting down).
  bool MayWaitForRoom() const { return queue_wait_.count() > 0 && store_.up(); }
  // True while requests are parked for room (any I/O thread): a new request then parks behind them instead of
  // taking room the moment it appears (the parked ones retry only on their poll tick), so waiting stays
  // first come, first served and its latency bounded by the drain rate, not by starvation up to --queue-wait.
  bool OthersWaitForRoom() const { return parked_.load(std::memory_order_relaxed) > 0 && MayWaitForRoom(); }
  // Parks a refused step on this I/O thread until the queue has room: `submit` retries it (true = accepted);
  // `refuse` answers 503 unavailable when min(--queue-wait, --request-timeout) passes or the Store goes down.
  void WaitForRoom(const boost::asio::any_io_executor& ex, ThreadCounters& counters, std::function<bool()> submit,
                   std::function<void(Problem)> refuse);

  // The recent set: true (and `v` a duplicate with its first_seen, the hit counted) when `d` is in it with a
  // first_seen within the horizon (an older entry is not an answer: PostgreSQL decides).
  // `d` is the key's recent-set digest (ScanKey::recent_digest): a hit is a record with the scan's attributes;
  // `keep_until_us` (0 = none) the scan's pack horizon, past which the entry is not an answer either.
  // `identity` is the key's digest (its partition's clock judges the horizon). `request` (Idempotency-Key): the
  // scan's idempotency record. When the entry's recorder is that request, `v` is its replayed `new` (counted);
  // another recorder (or none) — a duplicate as above; an unknown recorder — no answer (false: PostgreSQL, which
  // holds the row's record, decides).
  bool RecentKnown(const Digest& d, const Digest& identity, std::int64_t keep_until_us,
                   const std::optional<storage::RequestId>& request, Verdict& v, ThreadCounters& counters);
  // Now by the clock of d's PostgreSQL (AttachClocks): the least it can read (`upper` false: a first_seen to
  // record) or the most (`upper` true: is a record past the horizon? PgClock::ExpiryUpperUs); nullopt while unknown.
  std::optional<std::int64_t> PgNowUs(const Digest& d, bool upper) const;
  // µs since the epoch before which a record has expired (now - --retention); the minimum when off. The
  // overload takes a `now_us` the caller already read; the other, d's PostgreSQL's least reading (an entry of
  // the recent set older than it is surely expired: replaced by a new record).
  std::int64_t ExpiredBeforeUs(const Digest& d) const;
  std::int64_t ExpiredBeforeUs(std::int64_t now_us) const;
  // Puts `d` (the identity digest; --keys=gs1: keyed with r.recorded's attributes) into the recent set when `r`
  // is a committed fact (kInserted/kDuplicate with a first_seen), with the row's recorder (unknown when the
  // statement did not read it: Result::request_known). Any thread (writer threads call it).
  void RememberStored(const Digest& d, const storage::Result& r);

  // Journal hooks (service_journal.cc), called by DecideProbed under the digest's stripe lock in ack=filter.
  // JournalKnown: the digest is journalled and not yet in PostgreSQL -> key i is a "duplicate" (now, or once
  // its record is durable; a replayed "new" when the record holds key i's request record): kAnswered; a durable
  // record older than the horizon: kExpired (the caller takes the exact path, behind the record's row); not
  // pending: kAbsent. JournalNew: journals a definitely-new digest first seen at `time_us` (with key i's request
  // record); key i is "new" once durable, when the digest also enters the recent set with that time; false
  // (nothing recorded, key i untouched) when the journal refused it for being unusable: the caller takes the
  // exact path.
  enum class Journalled : std::uint8_t { kAbsent, kAnswered, kExpired };
  Journalled JournalKnown(const CallPtr& call, std::size_t i, const Digest& d);
  bool JournalNew(const CallPtr& call, std::size_t i, const Digest& d, const std::string& source,
                  std::int64_t time_us);
  // Key i's journal record (or the record it follows) reached `fate`: durable -> its verdict, else 503.
  static void OnJournal(Call& call, std::size_t i, bool is_new, storage::JournalFate fate);
  // One per I/O thread: its executor (journal waiter batches) and the inbox of its Store completions.
  struct JournalGroupSlot final : storage::WaiterGroup {
    JournalGroupSlot(const boost::asio::any_io_executor& e, const Service& service)
        : ex(e), inbox(e, [&service](StoredAnswer& a) { service.OnStored(*a.call, a.index, a.result); }) {}
    // Posts one call running every waiter to this I/O thread (service_journal.cc). Journal flusher thread.
    void Deliver(std::vector<storage::JournalWaiter> waiters, storage::JournalFate fate) override;
    boost::asio::any_io_executor ex;  // the I/O thread's executor
    IoInbox<StoredAnswer> inbox;      // Store completions, hopped from writer threads in batches
  };
  // This I/O thread's slot (journal waiter group, Store inbox), created on first use. Call on the I/O thread
  // that owns `ex`.
  JournalGroupSlot& JournalGroup(const boost::asio::any_io_executor& ex);
  // This I/O thread's inbox for Store completions. Call on the I/O thread that owns `ex`.
  IoInbox<StoredAnswer>& InboxOf(const boost::asio::any_io_executor& ex) { return JournalGroup(ex).inbox; }

  const AckMode ack_;
  const std::chrono::milliseconds request_timeout_;
  const std::chrono::milliseconds queue_wait_;  // --queue-wait, capped by request_timeout_; 0 = 503 at once
  // Requests parked for room now. Relaxed: a fairness hint (who tries the queue first), no data depends on it.
  std::atomic<std::int64_t> parked_{0};
  const bool filter_on_;
  // --keys=gs1 with --ack=filter: the filter's "definitely new" is never trusted. A pack is kept until its
  // expiry (+ grace), far past the filter's window, and another spelling may have recorded it: every pack is
  // decided in PostgreSQL (the filter still spares repeats nothing; the recent set does).
  const bool filter_vouches_;
  const KeyReader keys_;
  ShardedFilter& filter_;
  storage::ExactStore& store_;
  Metrics& metrics_;
  std::atomic<bool> warm_{false};
  const double window_seconds_;
  // The horizon (--retention; 0 = off): a recent-set entry older than it is not an answer (verdict.cc).
  const std::chrono::seconds retention_;
  const double fp_target_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  FilterTelemetry filter_telemetry_;  // after filter_: samples it on construction
  std::array<Mutex, kStripes> stripes_;  // guard no member: they make probe + record atomic per digest
  RecentSet recent_;
  storage::JournalDrain* const journal_;
  std::function<void(MetricsSnapshot&)> storage_stats_;  // set before serving, read-only afterwards
  std::function<bool(const Digest&, BootClock::time_point)> fresh_;  // --follow; set before serving, then read-only
  // --max-commit-lag in ns while following with the journal (else 0: unbounded).
  const std::int64_t max_commit_lag_ns_;
  std::function<std::string()> follower_state_;           // --follow; as fresh_
  const storage::PgClocks* clocks_ = nullptr;             // set before serving, read-only afterwards
  std::optional<KeyReader> previous_keys_;                 // issue 55; set before serving
  storage::DigestReader* previous_reader_ = nullptr;
  std::function<bool(const Digest&)> scheme_current_;
  PeerHooks peers_;                                       // issue 42; set before serving, read-only afterwards
  const std::chrono::milliseconds peer_wait_;             // --peer-wait, capped by request_timeout_
  // One waiters' queue per partition (their addresses are the queues' owners: room_wait.h), so a partition whose
  // peer lags does not hold up another's waiters. Sized by AttachPeers.
  std::vector<char> peer_queues_;
  const std::uint64_t instance_id_;  // tells this Service's thread-local group apart from an earlier one's
  Mutex groups_mu_;             // taken once per I/O thread (its first journalled or stored request)
  std::vector<std::unique_ptr<JournalGroupSlot>> groups_ ABSL_GUARDED_BY(groups_mu_);
};

}  // namespace scangate::server
