// JournalDrain: the --ack=filter durable fast path around a Journal (storage/journal/journal.h). It appends
// definitely-new digests, wakes their waiters once the group commit holding them is durable (batched per
// waiter group, i.e. per I/O thread), hands durable records to the store's write-behind path (a WriteBehindTarget:
// one Store, or a PartitionedStore), and tells the Journal when PostgreSQL committed them so the checkpoint can
// pass them.
// Invariant (ordering hazard): from Append() until PostgreSQL has committed the row, the digest is in an
// exact pending set; a possibly-seen observer calls Lookup() first (under the same per-digest lock as
// Append) and is answered from it instead of racing the journalled row to PostgreSQL. So of all
// observations of a digest, only the Append()ed one is "new", and a "duplicate" always names an exact
// record this instance made durable. Records recovered at start are pending too until replayed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/any_invocable.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "core/digest.h"
#include "core/digest_hash.h"
#include "core/mutex.h"
#include "storage/pg/conninfo.h"
#include "storage/journal/journal.h"
#include "storage/store.h"
#include "storage/write_behind_target.h"

namespace scangate::storage {

// Called on its group's executor with the fate of a record: kDurable -> answer; kRefused -> 503, nothing
// recorded; kIoError -> 503, the record may have reached the disk (outcome unknown).
using JournalWaiter = absl::AnyInvocable<void(JournalFate fate)>;

// Where a batch of waiters runs: one executor (the server: one per I/O thread, server/verdict/service_journal.cc).
// The drain keeps a group by reference with each waiter; a group must outlive the drain's use of it.
class WaiterGroup {
 public:
  // Runs on the journal's flusher thread once per group and commit: post one call that runs every waiter of
  // `waiters` with `fate` to the group's executor (one post for the whole batch) and return; must not block.
  virtual void Deliver(std::vector<JournalWaiter> waiters, JournalFate fate) = 0;

 protected:
  ~WaiterGroup() = default;  // not owned through this interface
};

struct JournalDrainStats {
  JournalStats journal;
  std::uint64_t pending = 0;      // digests journalled (or recovered) and not yet committed in PostgreSQL
  std::uint64_t backlog = 0;      // durable records the Store refused (queue full), retried
  std::uint64_t replay_left = 0;  // recovered records not yet committed in PostgreSQL
  std::uint64_t recovered = 0;    // records recovered at start (and within the horizon: replayed)
  std::uint64_t recovered_expired = 0;  // records recovered at start older than the horizon: skipped
};

class JournalDrain final : private WriteBehindSink {
 public:
  using Waiter = JournalWaiter;

  struct LookupResult {
    // kExpired: a durable record older than the horizon (options.retention), still waiting for PostgreSQL
    // (e.g. an outage longer than the horizon): not an answer — the key must be decided in PostgreSQL, queued
    // behind that record's row (never journalled again while this one is pending).
    enum State : std::uint8_t { kAbsent, kDurable, kFollowing, kExpired } state = kAbsent;
    std::string first_seen;  // RFC 3339 UTC with microseconds, for kDurable and kFollowing
    std::optional<RequestId> request;  // the record's idempotency record (issue 34), for kDurable and kFollowing
  };

  // `store` must outlive the drain and be started. Opens nothing yet.
  JournalDrain(WriteBehindTarget& store, JournalOptions options);
  ~JournalDrain();  // StopAppends() + Close(); call Store::Shutdown() in between for a clean checkpoint
  JournalDrain(const JournalDrain&) = delete;
  JournalDrain& operator=(const JournalDrain&) = delete;

  // Opens the journal (throws JournalError for a foreign/locked/corrupt directory), skips the records past
  // the checkpoint older than the horizon (options.retention: they count as applied, never replayed), puts
  // every other record past the checkpoint into the pending set, passes their digests to `recovered` (e.g. the filter), hands them to
  // the Store (idempotent: ON CONFLICT DO NOTHING) and starts the flusher. Call once, before serving.
  void Start(const std::function<void(std::span<const Digest>)>& recovered);

  // Under the caller's per-digest lock. Records `d` as first seen at `time_us` (µs since the epoch; 0 = now)
  // and queues it for the next group commit; `done` runs once on `group`'s executor. Returns false (nothing
  // recorded, `done` never runs) when the journal is unusable or stopping. Call Lookup() first: `d` must not be
  // pending. A caller that passes its own `time_us` (the server's recent set) answers with the same time as
  // the record, Lookup() and the PostgreSQL row. `request`: the observing request's idempotency record (issue 34),
  // journalled, reported by Lookup() and written with the row, so a retry of that request is told it recorded it.
  bool Append(const Digest& d, std::string source, WaiterGroup& group, Waiter done, std::int64_t time_us = 0,
              const std::optional<RequestId>& request = std::nullopt);

  // Under the caller's per-digest lock. kAbsent: not pending, ask PostgreSQL. kDurable: durable record,
  // answer "duplicate" with first_seen now. kExpired: a durable record past the horizon: decide in PostgreSQL. kFollowing: being journalled; `done` runs on `group`'s executor
  // with the record's fate (durable -> "duplicate", else 503). `done` is kept only for kFollowing.
  LookupResult Lookup(const Digest& d, WaiterGroup& group, Waiter done);
  // Whether `d` is pending (Lookup would not answer kAbsent right now): a cheap check (one shard lock, one
  // probe) so a caller builds Lookup's waiter only for the rare pending digest. Safe to call concurrently.
  bool Holds(const Digest& d);

  // Every record recovered at start is committed in PostgreSQL (part of /readyz). Safe to call concurrently.
  bool replayed() const { return replay_left_.load() == 0; }
  // The journal can take records now. False after a fault (ENOSPC, EIO, its directory removed or replaced)
  // until its probe heals it (storage/journal/journal.h "Faults heal"): callers then decide new keys exactly, in
  // PostgreSQL, instead of calling Append(); Lookup() keeps answering pending digests. One atomic load.
  // Safe to call concurrently.
  bool usable() const { return journal_ != nullptr && journal_->usable(); }
  // Why it is unusable ("" while usable), for /readyz and /stats. Safe to call concurrently.
  std::string unusable_cause() const { return journal_ != nullptr ? journal_->unusable_cause() : std::string(); }

  // When (BootClock ns) the oldest record of d's partition not yet committed in PostgreSQL was appended
  // (Journal::oldest_uncommitted_ns: Journal::kAgeUnknown for a recovered one), 0 when none or before Start(). One
  // atomic load. Safe to call concurrently.
  std::int64_t oldest_uncommitted_ns(const Digest& d) const {
    return journal_ != nullptr ? journal_->oldest_uncommitted_ns(d) : 0;
  }
  // Partition p's records not yet committed, with the boot time read under the journal's lock
  // (Journal::UncommittedOf: the peers' watermark). After Start(). Safe to call concurrently.
  Journal::Uncommitted UncommittedOf(unsigned p) const { return journal_->UncommittedOf(p); }
  // The journal's owner's identity (Journal::instance_id). After Start().
  const std::string& instance_id() const { return journal_->instance_id(); }

  // Flushes queued appends and stops the journal's flusher; later Append() calls fail. Idempotent.
  void StopAppends();
  // After Store::Shutdown(): final checkpoint. Idempotent.
  void Close();

  JournalDrainStats Stats() const;

  // "system_identifier=<n> database=<name>" of the PostgreSQL at `url` (the journal's `meta` identity), on a
  // connection with `defaults` (storage/conninfo.h: timeouts, keepalives). Throws as pqxx does, or
  // std::invalid_argument for an unparsable `url`.
  static std::string QueryIdentity(const std::string& url, const ConnectionDefaults& defaults);

 private:
  // Now by the clock of d's PostgreSQL (options.clocks): its least (`upper` false) or most (`upper` true: as ages go,
  // PgClock::ExpiryUpperUs) reading; nullopt when unknown (no reading yet). Without clocks, this host's wall clock.
  std::optional<std::int64_t> ClockUs(const Digest& d, bool upper) const;
  std::int64_t RetentionUs() const;
  // The forward steps of d's partition's clock recorded in PostgreSQL (sql/017), µs; 0 without clocks.
  std::int64_t AheadUs(const Digest& d) const;
  struct Pending {
    std::int64_t time_us = 0;
    std::uint64_t lsn = 0;    // valid once durable
    bool durable = false;
    std::optional<RequestId> request;  // the record's (issue 34)
    // Empty once durable. Almost always one waiter (the appender): kept inline, no allocation per key.
    absl::InlinedVector<std::pair<WaiterGroup*, Waiter>, 1> waiters;
  };
  // 64 shards: the set is touched once per request (Lookup) and once per commit; ~1/64 collision odds.
  static constexpr std::size_t kShards = 64;
  struct alignas(64) Shard {
    mutable Mutex mu;
    absl::flat_hash_map<Digest, Pending, DigestHash, DigestEq> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(const Digest& d) { return shards_[d[4] % kShards]; }

  void OnCommit(std::vector<JournalEntry>& group, JournalFate fate);
  void HandOff(std::vector<JournalEntry>& entries, bool recovered);
  void RunRetry();
  // WriteBehindSink: rows of one Store transaction (or dead letter, or give-up) are finished. Writer threads.
  void Done(std::span<const WriteBehindDone> rows) override;

  WriteBehindTarget& store_;  // a Store, or a PartitionedStore
  JournalOptions options_;
  std::unique_ptr<Journal> journal_;
  std::array<Shard, kShards> shards_;
  std::atomic<std::uint64_t> replay_left_{0};
  std::atomic<bool> stopping_{false};  // StopAppends() called: the Store is about to shut down
  std::uint64_t recovered_ = 0;
  std::uint64_t recovered_expired_ = 0;

  mutable Mutex retry_mu_;
  CondVar retry_cv_;  // wakes the retry thread: backlog to feed, or stop
  struct Backlogged {
    JournalEntry entry;
    bool recovered;
  };
  std::deque<Backlogged> backlog_ ABSL_GUARDED_BY(retry_mu_);
  bool retry_stop_ ABSL_GUARDED_BY(retry_mu_) = false;
  std::thread retry_;
  std::vector<WriteBehindRow> handoff_rows_;  // HandOff's (Start, then the flusher thread only)
  bool stopped_ = false, closed_ = false;
};

// "2026-11-29T21:43:09.123456Z" from µs since the epoch.
std::string FormatTimeUs(std::int64_t time_us);

}  // namespace scangate::storage
