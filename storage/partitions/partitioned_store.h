// PartitionedStore: the exact authority spread over 2^k logical partitions, one PostgreSQL database each
// (issue 23). The map — which connection string each partition lives at — is PL/Proxy's cluster definition
// in the proxy database (storage/partitions/partition_map.h), read at Start() and every map_poll; scangate writes
// DIRECTLY: one storage::Store per partition (its writers, COPY path, in-doubt settlement by the partition's
// own xid, migrations), and every item goes to the Store of PartitionOf(digest).
// Invariant: a digest's every observation goes to the one partition its hash names, so each single-database
// guarantee of storage/store.h (committed outcomes only, exactly one kInserted per digest) holds per partition
// and therefore overall. A map change RETARGETS a partition's Store (same partition, new place: reconnect),
// never rehashes: a map with another partition count is refused and the old one kept. A partition that is
// down refuses (or answers kUnavailable for) its own keys only: up() is false, serving() stays true.
// Use: instead of Store when the server runs with --partitions (one per process); Start() once, Shutdown()
// before exit. JournalDrain takes it as its WriteBehindTarget.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/digest.h"
#include "core/mutex.h"
#include "storage/background_loop.h"
#include "storage/clock/pg_clock.h"
#include "storage/exact_store.h"
#include "storage/outcome.h"
#include "storage/partitions/partition_map.h"
#include "storage/store.h"
#include "storage/write_behind_target.h"

namespace scangate::storage {

struct PartitionedStoreOptions {
  StoreOptions base;            // url ignored; writers/batch_limit/queue_limit... apply PER PARTITION
  std::string proxy_url;        // where the map is read (connection defaults applied inside)
  std::string cluster = "scangate";
  std::chrono::milliseconds map_poll{5000};
  // Without --partitions: this map (one partition, --database-url), no proxy and no watcher; the Store then logs and
  // fails exactly as a lone Store does (no partition label).
  std::optional<PartitionMap> fixed_map;
};

// One partition as /stats and /metrics show it.
struct PartitionState {
  unsigned partition;
  std::string where;  // DescribeConninfo of its current connection string (no password)
  StoreStats stats;
};

class PartitionedStore final : public ExactStore, public WriteBehindTarget {
 public:
  explicit PartitionedStore(PartitionedStoreOptions options);
  ~PartitionedStore() override;  // calls Shutdown()
  PartitionedStore(const PartitionedStore&) = delete;
  PartitionedStore& operator=(const PartitionedStore&) = delete;

  // Called on the watcher thread after a partition's Store was retargeted (Lookup, Expiry, BRIN summarizer of
  // that partition follow it). Must not block for long and must not throw.
  using RetargetListener = std::function<void(unsigned partition, const std::string& conninfo)>;
  // Set before Start().
  void OnRetarget(RetargetListener listener);

  // Reads the map (connection failures retried until base.start_timeout, as Store::Start), creates one Store
  // per partition (url = the partition's connection string, label "p<i>") and starts them all in parallel,
  // then the map watcher. Throws StartError (every Store started so far is shut down first). Call once, first,
  // before any other thread calls anything (the partition list is fixed from here on).
  void Start();

  // Store::Submit on the partition of `d` (contracts as there). Safe to call concurrently.
  bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
              std::shared_ptr<Ticket> ticket = nullptr, Expect expect = Expect::kUnknown,
              PackAttrs attrs = {}) override;
  bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, std::int64_t first_seen_us,
                         const std::optional<RequestId>& request) override;
  // Store::SubmitWriteBehindGroup's contract over all partitions: room is reserved per involved partition (in
  // index order); the accepted rows are the prefix up to the first row whose partition ran out of room; the
  // excess is released and each partition gets its rows of the prefix, in order. Safe to call concurrently.
  std::size_t SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) override;

  bool up() const override;       // every partition up
  bool serving() const override;  // at least one partition up
  bool full() const override;     // any partition full
  // Sums of the partitions' StoreStats (histograms bucket-wise; up = all up). Safe to call concurrently.
  StoreStats Stats() const override;
  // Per partition (metrics, /stats). Safe to call concurrently.
  std::vector<PartitionState> Partitions() const;

  // Every partition's Store::WarmLoad in parallel, one thread each (so `sink` IS CALLED CONCURRENTLY: it must
  // be thread-safe); the sum. The first exception of any partition is rethrown after all have finished.
  std::uint64_t WarmLoad(std::chrono::seconds window, const std::function<void(std::span<const Digest>)>& sink);
  // Partition p's Store::WarmLoad alone (a follower's reload after it reconnected). Safe to call concurrently.
  std::uint64_t WarmLoadPartition(unsigned p, std::chrono::seconds window,
                                  const std::function<void(std::span<const Digest>)>& sink) {
    return stores_.at(p)->WarmLoad(window, sink);
  }

  // The watcher stops first; then every partition's Shutdown in parallel. Idempotent.
  void Shutdown();

  std::size_t partitions() const { return stores_.size(); }  // 0 before Start()
  // Each partition's store guards its take-overs by that partition's clock (Store::AttachClock); `clocks` has one
  // per partition and outlives the store. After Start(); any thread.
  void AttachClocks(const PgClocks& clocks) {
    for (std::size_t p = 0; p < stores_.size() && p < clocks.size(); ++p) stores_[p]->AttachClock(&clocks.at(p));
  }
  // The partition's current connection string (the map's). Safe to call concurrently.
  std::string conninfo(unsigned p) const ABSL_LOCKS_EXCLUDED(map_mu_);

 private:
  Store& StoreOf(const Digest& d) { return *stores_[PartitionOf(d, stores_.size())]; }
  // One poll of the map: applies a change of the same count, refuses another count, logs what it did.
  void Poll();
  void Apply(const PartitionMap& next) ABSL_LOCKS_EXCLUDED(map_mu_);

  PartitionedStoreOptions options_;
  std::string proxy_conninfo_;  // proxy_url + connection defaults
  std::shared_ptr<LogSink> log_;
  RetargetListener listener_;
  std::vector<std::unique_ptr<Store>> stores_;  // fixed after Start()
  std::atomic<bool> accepting_{false};
  // Group submissions in progress: Shutdown() waits for them after accepting_ goes false, so no partition's
  // Store is stopped in the middle of a group (which would break the prefix contract).
  std::atomic<std::uint32_t> in_group_{0};
  std::once_flag shutdown_once_;
  std::atomic<bool> started_{false};

  mutable Mutex map_mu_;
  PartitionMap map_ ABSL_GUARDED_BY(map_mu_);
  // Watcher thread only: the last refusal / read error logged (each is logged once, not every poll).
  std::string last_refused_;
  std::string last_unreadable_;
  BackgroundLoop watcher_;  // last: stopped before the members its passes use go away
};

}  // namespace scangate::storage
