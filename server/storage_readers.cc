#include "server/storage_readers.h"

#include <algorithm>
#include <utility>

namespace scangate::server {

StorageReaders::StorageReaders(storage::PartitionedStore& store, StorageReaderOptions options)
    : store_(store), options_(std::move(options)) {}

StorageReaders::~StorageReaders() { Shutdown(); }

std::string StorageReaders::LookupConninfo(const std::string& c) const {
  storage::ConnectionDefaults d = options_.lookup_defaults;
  d.application_name = "scangate-lookup";
  return storage::WithConnectionDefaults(c, d);
}

std::string StorageReaders::MaintenanceConninfo(const std::string& c, const char* application) const {
  storage::ConnectionDefaults d = options_.maintenance_defaults;
  d.application_name = application;
  return storage::WithConnectionDefaults(c, d);
}

void StorageReaders::Start() {
  MutexLock lock(&mu_);
  if (started_ || stopped_) return;
  const std::size_t n = store_.partitions();
  std::vector<std::string> lookup_conninfo;
  for (unsigned p = 0; p < n; ++p) {
    // The partition's connection string is read under mu_: a Retarget of it waits for this and then moves the
    // readers made here (the store changes its string before it calls the listener).
    const std::string conninfo = store_.conninfo(p);
    lookup_conninfo.push_back(LookupConninfo(conninfo));
    // The first_seen BRIN index is summarized from here (sql/003: autosummarize cannot keep up); a pass may read
    // every range a long outage of it left, hence the long statement bound.
    storage::BrinSummarizerOptions bo;
    bo.conninfo = MaintenanceConninfo(conninfo, "scangate-brin");
    bo.log = options_.log;
    brin_.push_back(std::make_unique<storage::BrinSummarizer>(std::move(bo)));
    // The horizon's expiry (storage/horizon/expiry.h); with --retention=off it only reads the table's vital signs.
    storage::ExpiryOptions eo;
    eo.conninfo = MaintenanceConninfo(conninfo, "scangate-expiry");
    eo.retention = options_.retention;
    eo.pack_horizons = options_.pack_horizons;  // rows past their own keep_until
    eo.log = options_.log;
    if (options_.clocks != nullptr) eo.clock = &options_.clocks->at(p);
    expiry_.push_back(std::make_unique<storage::Expiry>(std::move(eo)));
    // The epochs (storage/epochs/switcher.h): switched at this instance's bounds, if any; closed and dropped by
    // every instance, whoever switched them.
    storage::EpochSwitcherOptions so;
    so.conninfo = MaintenanceConninfo(conninfo, "scangate-epochs");
    so.max_keys = static_cast<std::int64_t>(options_.epoch_keys);
    so.max_age = options_.epoch_max_age;
    so.retention = options_.retention;
    if (options_.clocks != nullptr) so.clock = &options_.clocks->at(p);
    so.log = options_.log;
    epochs_.push_back(std::make_unique<storage::EpochSwitcher>(std::move(so)));
  }
  storage::LookupOptions lo;
  lo.retention = options_.retention;
  lookups_ = std::make_unique<storage::PartitionedReader>(std::move(lo), lookup_conninfo);
  lookups_->Start();
  for (auto& b : brin_) b->Start();
  for (auto& e : expiry_) e->Start();
  for (auto& e : epochs_) e->Start();
  started_ = true;
}

void StorageReaders::Retarget(unsigned p, const std::string& conninfo) {
  MutexLock lock(&mu_);
  if (!started_ || stopped_ || p >= expiry_.size()) return;  // not made yet: Start() reads the new string
  lookups_->Retarget(p, LookupConninfo(conninfo));
  brin_[p]->Retarget(MaintenanceConninfo(conninfo, "scangate-brin"));
  expiry_[p]->Retarget(MaintenanceConninfo(conninfo, "scangate-expiry"));
  if (p < epochs_.size()) epochs_[p]->Retarget(MaintenanceConninfo(conninfo, "scangate-epochs"));
}

void StorageReaders::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (!started_ || stopped_) {
      stopped_ = true;
      return;
    }
    stopped_ = true;
  }
  // Outside the lock: a reader's thread never takes it, and joining under it would hold up a Retarget.
  lookups_->Shutdown();
  for (auto& b : brin_) b->Shutdown();
  for (auto& e : expiry_) e->Shutdown();
  for (auto& e : epochs_) e->Shutdown();
}

storage::DigestReader* StorageReaders::lookups() { return lookups_.get(); }

void StorageReaders::Fill(MetricsSnapshot& s) const {
  if (brin_.empty()) return;
  storage::BrinSummarizerStats b;
  for (const auto& one : brin_) {
    const auto x = one->Stats();
    b.passes += x.passes;
    b.ranges += x.ranges;
    b.failures += x.failures;
    b.stopped = b.stopped || x.stopped;
  }
  s.brin = b;
  std::vector<storage::ExpiryStats> per;
  per.reserve(expiry_.size());
  for (const auto& one : expiry_) per.push_back(one->Stats());
  storage::ExpiryStats e = per.front();
  for (std::size_t i = 1; i < per.size(); ++i) {
    const auto& x = per[i];
    e.passes += x.passes;
    e.failures += x.failures;
    e.rows_expired += x.rows_expired;
    e.rows_expired_keep_until += x.rows_expired_keep_until;
    e.behind_events += x.behind_events;
    e.behind = e.behind || x.behind;
    // The worst partition: the oldest row, the earliest own horizon, the largest lag.
    if (x.oldest_age_seconds && (!e.oldest_age_seconds || *x.oldest_age_seconds > *e.oldest_age_seconds)) {
      e.oldest_age_seconds = x.oldest_age_seconds;
    }
    if (x.earliest_keep_until_in_seconds &&
        (!e.earliest_keep_until_in_seconds || *x.earliest_keep_until_in_seconds < *e.earliest_keep_until_in_seconds)) {
      e.earliest_keep_until_in_seconds = x.earliest_keep_until_in_seconds;
    }
    // Sizes: the sum once every partition has read them (-1 = not yet, as for one table).
    auto add = [](std::int64_t& into, std::int64_t v) { into = into < 0 || v < 0 ? -1 : into + v; };
    add(e.table_bytes, x.table_bytes);
    add(e.index_bytes, x.index_bytes);
    add(e.dead_tuples, x.dead_tuples);
    add(e.live_tuples, x.live_tuples);
    e.lag_seconds = std::max(e.lag_seconds, x.lag_seconds);
  }
  s.expiry = e;
  if (!epochs_.empty()) {
    storage::EpochSwitcherStats sum = epochs_.front()->Stats();
    for (std::size_t i = 1; i < epochs_.size(); ++i) {
      const auto x = epochs_[i]->Stats();
      sum.passes += x.passes;
      sum.failures += x.failures;
      sum.switches += x.switches;
      sum.lock_timeouts += x.lock_timeouts;
      sum.closes += x.closes;
      sum.closes_postponed += x.closes_postponed;
      sum.merges += x.merges;
      sum.merges_postponed += x.merges_postponed;
      sum.drops += x.drops;
      sum.dropped_keys += x.dropped_keys;
      sum.last_close_seconds = std::max(sum.last_close_seconds, x.last_close_seconds);
      // The largest open epoch and closed-epoch count of any partition: what a bound and a look-up face.
      sum.open_keys = std::max(sum.open_keys, x.open_keys);
      sum.open_age_seconds = std::max(sum.open_age_seconds, x.open_age_seconds);
      sum.closed_epochs = std::max(sum.closed_epochs, x.closed_epochs);
      sum.last_switch_seconds = std::max(sum.last_switch_seconds, x.last_switch_seconds);
    }
    s.epochs = sum;
  }
  if (per.size() < 2) return;
  const auto states = store_.Partitions();
  s.partitions.clear();
  for (const auto& st : states) {
    PartitionSample ps;
    ps.label = storage::PartitionLabel(st.partition);
    ps.where = st.where;
    ps.up = st.stats.up;
    ps.queue_depth = st.stats.queue_depth;
    ps.inserted = st.stats.inserted;
    ps.duplicates = st.stats.duplicates;
    ps.unavailable = st.stats.unavailable;
    ps.batches = st.stats.batches;
    ps.batch_failures = st.stats.batch_failures;
    ps.in_doubt = st.stats.in_doubt_committed + st.stats.in_doubt_aborted + st.stats.in_doubt_unknown;
    if (st.partition < per.size()) {
      const auto& x = per[st.partition];
      if (x.live_tuples >= 0) ps.live_rows = x.live_tuples;
      if (x.table_bytes >= 0) ps.table_bytes = x.table_bytes;
      if (x.passes > 0) ps.expiry_lag_seconds = x.lag_seconds;
    }
    s.partitions.push_back(std::move(ps));
  }
}

}  // namespace scangate::server
