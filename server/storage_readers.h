// StorageReaders: the exact store's readers, one set per partition — POST /lookup's reader, the first_seen BRIN
// summarizer and the horizon's expiry, each on a connection of its own that reconnects by itself, never queued
// behind (or slowing) the writers. Without --partitions there is one partition: the --database-url database.
// Invariant: partition p's readers always talk to the database the partition map names for p now (Retarget, on
// the map watcher's thread, reaches the readers created before or after it: both happen under one mutex).
// Use: App creates it after the store started, Start() before serving, Shutdown() after the HTTP server stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "server/metrics/metrics.h"
#include "storage/epochs/switcher.h"
#include "storage/horizon/brin_summarizer.h"
#include "storage/horizon/expiry.h"
#include "storage/partitions/partitioned_reader.h"
#include "storage/partitions/partitioned_store.h"
#include "storage/pg/conninfo.h"

namespace scangate::server {

struct StorageReaderOptions {
  std::chrono::seconds retention{0};
  bool pack_horizons = false;
  // The epochs' bounds (storage/epochs/switcher.h); both 0: the switcher only closes and drops epochs.
  std::uint64_t epoch_keys = 0;
  std::chrono::seconds epoch_max_age{0};
  storage::ConnectionDefaults lookup_defaults;  // application_name set inside
  storage::ConnectionDefaults maintenance_defaults;  // BRIN and expiry: the long statement bound
  std::shared_ptr<storage::LogSink> log;
  storage::PgClocks* clocks = nullptr;  // the instance's bounds of each partition's clock (the expiry's guard)
};

class StorageReaders {
 public:
  StorageReaders(storage::PartitionedStore& store, StorageReaderOptions options);
  ~StorageReaders();  // calls Shutdown()
  StorageReaders(const StorageReaders&) = delete;
  StorageReaders& operator=(const StorageReaders&) = delete;

  // One reader set per partition of `store` on its current connection strings; starts them. Call once.
  void Start();
  // Partition p moved (the store's retarget listener): its readers reconnect to `conninfo`. Any thread.
  void Retarget(unsigned p, const std::string& conninfo);
  // Stops and joins every reader. Idempotent.
  void Shutdown();

  storage::DigestReader* lookups();
  // Sums of the BRIN summarizers', expiries' and epoch switchers' counters into `s` (brin, expiry, epochs) and, with two or more
  // partitions, one PartitionSample per partition (the store's state and the expiry's vital signs). Thread-safe.
  void Fill(MetricsSnapshot& s) const;

 private:
  std::string LookupConninfo(const std::string& c) const;
  std::string MaintenanceConninfo(const std::string& c, const char* application) const;

  storage::PartitionedStore& store_;
  const StorageReaderOptions options_;
  mutable Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<storage::PartitionedReader> lookups_;  // set once by Start(), before serving
  std::vector<std::unique_ptr<storage::BrinSummarizer>> brin_;  // as lookups_
  std::vector<std::unique_ptr<storage::Expiry>> expiry_;        // as lookups_
  std::vector<std::unique_ptr<storage::EpochSwitcher>> epochs_; // as lookups_
};

}  // namespace scangate::server
