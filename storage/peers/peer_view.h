// PeerView (issue 42): what this instance knows of the other journal owners (--ack=filter instances with a journal)
// of one database — one logical partition with --partitions — namely each one's commit watermark, and so whether a
// key that arrived at a given moment may be decided `new` here. Fed by the statement that reads the peers table
// (storage/peers/peer_sql.h): the follower's poll or probe, or --ack=commit's PeerWatch. Sibling: the writer side,
// storage/peers/watermark_publisher.h.
//
// THE ARGUMENT — written down here, once; docs/design.md "The peers' commit watermark" states the promise it gives.
// Notation: PG(x) = PostgreSQL's clock (now()) at the moment a host's boot clock (core/boot_clock.h) reads x.
//  1. A journal owner A answers a key `new` only after appending its record, and only once its own row is
//     registered and held by this very process (WatermarkPublisher::published(); issue 55: the row is a lease held
//     by one process's incarnation, storage/peers/watermark_publisher.h "THE LEASE" — so one row describes one
//     journal; a reader's own row is the one with its id AND its incarnation, the same id under another
//     incarnation is a peer). An --ack=filter instance without a journal has no row: it runs alone on its database
//     (storage/peers/presence.h). Its journal tells, under one lock, when its oldest record not
//     yet committed was appended (Journal::UncommittedOf): every record appended before that — before the lock's
//     `now` when none is outstanding — is committed, its COMMIT acknowledged.
//  2. A's publisher writes covered_until = a LOWER bound of PG(that append time) (of PG(now) when none): its
//     previous statement, answered at r' with now() = T', gives PG(r') >= T', so PG(x) >= T' + (x - r'). It reads
//     the journal before the UPDATE that carries the value, so the commits it covers were acknowledged before that
//     UPDATE: a snapshot that sees the new covered_until sees those rows. (W1): every key A answered `new` before
//     covered_until (PostgreSQL's clock) is committed, visible to any snapshot that shows that covered_until.
//  3. This instance reads the rows of its database in ONE statement, sent at boot time s, whose now() is T —
//     PG(s) <= T: it started after it was sent — and whose snapshot also gave the follower's keys (or, --ack=commit,
//     before the insert that will look for the key). The rows carry lag = T - covered_until. Once the follower has
//     applied that snapshot's keys, the view stores deadline = s + W - max(lag) (release); a request that arrived at
//     t is covered iff t <= deadline (acquire, read before the filter is probed), i.e.
//     covered_until >= T + (t - s) - W >= PG(t) - W. With (W1): every key any running peer answered `new` before
//     PG(t) - W is in the filter and in PostgreSQL's index (an insert finds it). So a key another instance
//     answered `new` more than W before this request arrived is never `new` here. W = --max-commit-lag +
//     --follow-max-lag (2 s by default).
//  4. A peer registered after that sample answered nothing before PG(s) >= PG(t) - W (t <= s + W): a database
//     without rows is covered up to s + W.
//  5. Not covered — a peer stalled (a lock, a failover, a slow PostgreSQL), a peer dead with keys in its journal,
//     or this view not refreshed within W — the key is not decided `new`: a read answers `duplicate` when
//     PostgreSQL holds it, else it waits (bounded) for coverage, then 503 + Retry-After (server/verdict/
//     service_peers.cc). A peer that died keeps its row `running` with its last covered_until: the others wait
//     until it restarts (recovers and replays its journal, publishes again) or an operator retires it (sql/011
//     scangate_retire_instance: an explicit, logged loss window). A clean stop drains first, then marks it stopped.
//  6. Both times of lag (covered_until, the reader's now()) must be read off one continuous clock. A step of
//     PostgreSQL's clock (a restart or failover onto a host whose clock differs, an NTP step) opens a new clock
//     epoch (sql/016; the publisher's side: watermark_publisher.h, THE CLOCK EPOCH): a row carries the epoch its
//     covered_until was computed under, and the statement that reads it says whether that is the current one
//     ("clock"). A running peer whose row is of another epoch covers nothing — as a peer lagging without bound —
//     until it publishes again under the current one (a beat or two after it reconnects).
// Assumptions: PostgreSQL's clock runs at the boot clocks' rate between steps (NTP slews it; a step of more than a
// few ms is detected, 6.); the boot clock counts suspensions (CLOCK_BOOTTIME).
// Threading: Apply() on one thread (the sampler's); Covered() lock-free from any thread; Stats() any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/log_sink.h"

namespace scangate::storage {

// One peer as the last sample showed it.
struct PeerInfo {
  std::string id;
  std::string incarnation;      // the process holding the row (sql/015); "" = unknown
  std::string state;            // running | stopped | retired
  double lag_seconds = 0;       // now() - covered_until at the sample: how far behind its coverage is
  double heartbeat_age_seconds = 0;
  std::uint64_t uncommitted = 0;  // keys it answered new and not yet committed, at its last heartbeat
  std::string host;
  std::int64_t pid = 0;
  // Its covered_until was computed under the database's current clock epoch (sql/016): false after PostgreSQL's
  // clock stepped or the server restarted, until the peer publishes again — a running peer then covers nothing.
  bool clock_current = false;
};

struct PeerViewStats {
  bool sampled = false;            // at least one sample applied
  double sample_age_seconds = -1;  // since the last sample's statement was sent; -1 = never
  double covered_for_seconds = 0;  // how much longer a request arriving now is covered (negative: not covered)
  std::uint64_t samples = 0;
  std::uint64_t lagging = 0;       // running peers whose lag exceeds the window now, or of another clock epoch
  std::uint64_t retired_seen = 0;  // running peers seen retired by an operator (scangate --retire-instance)
  std::vector<PeerInfo> peers;     // the other instances' rows of the last sample
};

class PeerView {
 public:
  // `window`: W. `await_self`: this instance owns a journal whose id (its own row, not a peer's) is known only once
  // the journal is open — samples are ignored (nothing is covered) until SetSelf(); false: it has none (--ack=commit,
  // --journal=off).
  PeerView(bool await_self, std::chrono::nanoseconds window, std::string label, std::shared_ptr<LogSink> log);

  // This instance's id (Journal::instance_id) and this process's incarnation (issue 55): only the row that carries
  // both is this instance's own. A row of the same id held by another incarnation — a clone, or the process that
  // took the row over while this one's lease had lapsed (storage/peers/watermark_publisher.h, the lease) — is a
  // peer like any other: its covered_until covers what THAT process answered. Once, any thread.
  void SetSelf(std::string self, std::string incarnation);

  // A sample: `rows_json` (PeersJsonSql's text) read by a statement sent at boot time `sent_ns`, to be applied
  // only once everything that statement's snapshot showed is applied (the follower calls it after its keys). A
  // malformed text covers nothing (and is logged). Called on one thread.
  void Apply(std::string_view rows_json, std::int64_t sent_ns);

  // Every running peer's coverage reaches a request that arrived at boot time `t_ns` (see the argument, 3.).
  // acquire: pairs with Apply's release, so the filter's bits the follower set before it are seen by the probe
  // that follows this call. Lock-free; any thread.
  bool Covered(std::int64_t t_ns) const { return t_ns <= deadline_ns_.load(std::memory_order_acquire); }

  // A sample has been applied (the view covers something, or did). Lock-free; any thread.
  bool sampled() const { return deadline_ns_.load(std::memory_order_relaxed) != 0; }  // relaxed: a readiness flag
  // "" while covered now, else what lags ("instance <id> (<host>) 3.2 s behind, 120 keys uncommitted"). Any thread.
  std::string Lagging(std::int64_t now_ns) const;
  PeerViewStats Stats(std::int64_t now_ns) const;
  const std::string& label() const { return label_; }

 private:
  // Logs a peer's transitions (joined, lagging past the window, covering again, stopped, retired). Sampler thread.
  void NoteTransitions(const std::vector<PeerInfo>& peers);

  const std::int64_t window_ns_;
  const std::string label_;
  std::shared_ptr<LogSink> log_;
  std::atomic<std::int64_t> deadline_ns_{0};  // 0: never sampled (nothing is covered)
  // The sampler's memory of each peer's last state, for the transitions it logs. Sampler thread only.
  struct Seen {
    std::string state;
    bool lagging = false;
    bool clock_current = true;
  };
  std::map<std::string, Seen> seen_;
  mutable Mutex mu_;
  bool self_known_ ABSL_GUARDED_BY(mu_);
  std::string self_ ABSL_GUARDED_BY(mu_);
  std::string self_incarnation_ ABSL_GUARDED_BY(mu_);
  std::vector<PeerInfo> peers_ ABSL_GUARDED_BY(mu_);
  std::int64_t sent_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t retired_seen_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace scangate::storage
