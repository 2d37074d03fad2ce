// JournalDrain: the --ack=filter durable fast path around a Journal (storage/journal.h). It appends
// definitely-new digests, wakes their waiters once the group commit holding them is durable (batched per
// waiter group, i.e. per I/O thread), hands durable records to the Store's write-behind path, and tells the
// Journal when PostgreSQL committed them so the checkpoint can pass them.
// Invariant (ordering hazard): from Append() until PostgreSQL has committed the row, the digest is in an
// exact pending set; a possibly-seen observer calls Lookup() first (under the same per-digest lock as
// Append) and is answered from it instead of racing the journalled row to PostgreSQL. So of all
// observations of a digest, only the Append()ed one is "new", and a "duplicate" always names an exact
// record this instance made durable. Records recovered at start are pending too until replayed.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>

#include "core/digest.h"
#include "core/digest_hash.h"
#include "storage/journal.h"
#include "storage/store.h"

namespace scangate::storage {

struct JournalDrainStats {
  JournalStats journal;
  std::uint64_t pending = 0;      // digests journalled (or recovered) and not yet committed in PostgreSQL
  std::uint64_t backlog = 0;      // durable records the Store refused (queue full), retried
  std::uint64_t replay_left = 0;  // recovered records not yet committed in PostgreSQL
  std::uint64_t recovered = 0;    // records recovered at start
};

class JournalDrain final : private WriteBehindSink {
 public:
  // Called on the waiter's executor with the fate of the record: kDurable -> answer; kRefused -> 503, nothing
  // recorded; kIoError -> 503, the record may have reached the disk (outcome unknown).
  using Waiter = std::function<void(JournalFate fate)>;
  // Runs on the flusher thread once per waiter group and commit: post one call that runs every waiter of
  // `waiters` with `fate` to the group's executor (one post for the whole batch) and return.
  using Deliver = std::function<void(void* group, std::vector<Waiter> waiters, JournalFate fate)>;

  struct LookupResult {
    enum State : std::uint8_t { kAbsent, kDurable, kFollowing } state = kAbsent;
    std::string first_seen;  // RFC 3339 UTC with microseconds, for kDurable and kFollowing
  };

  // `store` must outlive the drain and be started. Opens nothing yet.
  JournalDrain(Store& store, JournalOptions options, Deliver deliver);
  ~JournalDrain();  // StopAppends() + Close(); call Store::Shutdown() in between for a clean checkpoint
  JournalDrain(const JournalDrain&) = delete;
  JournalDrain& operator=(const JournalDrain&) = delete;

  // Opens the journal (throws JournalError for a foreign/locked/corrupt directory), puts every record past
  // the checkpoint into the pending set, passes their digests to `recovered` (e.g. the filter), hands them to
  // the Store (idempotent: ON CONFLICT DO NOTHING) and starts the flusher. Call once, before serving.
  void Start(const std::function<void(std::span<const Digest>)>& recovered);

  // Under the caller's per-digest lock. Records `d` as first seen at `time_us` (µs since the epoch; 0 = now)
  // and queues it for the next group commit; `done` runs once on `group`'s executor. Returns false (nothing
  // recorded, `done` never runs) when the journal is failed or stopping. Call Lookup() first: `d` must not be
  // pending. A caller that passes its own `time_us` (the server's recent set) answers with the same time as
  // the record, Lookup() and the PostgreSQL row.
  bool Append(const Digest& d, std::string source, void* group, Waiter done, std::int64_t time_us = 0);

  // Under the caller's per-digest lock. kAbsent: not pending, ask PostgreSQL. kDurable: durable record,
  // answer "duplicate" with first_seen now. kFollowing: being journalled; `done` runs on `group`'s executor
  // with the record's fate (durable -> "duplicate", else 503). `done` is kept only for kFollowing.
  LookupResult Lookup(const Digest& d, void* group, Waiter done);
  // Whether `d` is pending (Lookup would not answer kAbsent right now): a cheap check (one shard lock, one
  // probe) so a caller builds Lookup's waiter only for the rare pending digest. Safe to call concurrently.
  bool Holds(const Digest& d);

  // Every record recovered at start is committed in PostgreSQL (part of /readyz). Safe to call concurrently.
  bool replayed() const { return replay_left_.load() == 0; }
  // The journal failed (I/O error): every filter-new key gets 503 until a restart. Safe to call concurrently.
  bool failed() const { return journal_ != nullptr && journal_->failed(); }

  // Flushes queued appends and stops the journal's flusher; later Append() calls fail. Idempotent.
  void StopAppends();
  // After Store::Shutdown(): final checkpoint. Idempotent.
  void Close();

  JournalDrainStats Stats() const;

  // "system_identifier=<n> database=<name>" of the PostgreSQL at `url` (the journal's `meta` identity).
  static std::string QueryIdentity(const std::string& url);

 private:
  struct Pending {
    std::int64_t time_us = 0;
    std::uint64_t lsn = 0;    // valid once durable
    bool durable = false;
    // Empty once durable. Almost always one waiter (the appender): kept inline, no allocation per key.
    absl::InlinedVector<std::pair<void*, Waiter>, 1> waiters;
  };
  // 64 shards: the set is touched once per request (Lookup) and once per commit; ~1/64 collision odds.
  static constexpr std::size_t kShards = 64;
  struct alignas(64) Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<Digest, Pending, DigestHash, DigestEq> map ABSL_GUARDED_BY(mu);
  };
  Shard& ShardOf(const Digest& d) { return shards_[d[4] % kShards]; }

  void OnCommit(std::vector<JournalEntry>& group, JournalFate fate);
  void HandOff(std::vector<JournalEntry>& entries, bool recovered);
  void RunRetry();
  // WriteBehindSink: rows of one Store transaction (or dead letter, or give-up) are finished. Writer threads.
  void Done(std::span<const WriteBehindDone> rows) override;

  Store& store_;
  JournalOptions options_;
  Deliver deliver_;
  std::unique_ptr<Journal> journal_;
  std::array<Shard, kShards> shards_;
  std::atomic<std::uint64_t> replay_left_{0};
  std::atomic<bool> stopping_{false};  // StopAppends() called: the Store is about to shut down
  std::uint64_t recovered_ = 0;

  mutable std::mutex retry_mu_;
  std::condition_variable retry_cv_;
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
