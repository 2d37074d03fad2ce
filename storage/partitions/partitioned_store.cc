#include "storage/partitions/partitioned_store.h"

#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <pqxx/pqxx>

#include "storage/pg/conninfo.h"
#include "storage/pg/error_summary.h"
#include "storage/start/start_error.h"
#include "storage/start/startup.h"

namespace scangate::storage {
namespace {

constexpr std::chrono::milliseconds kBackoffMin{50};  // as Store::Start's first pause
// Reading the map is one small catalog query: a proxy that hangs must not hold the watcher for long.
constexpr std::chrono::milliseconds kMapStatementTimeout{5000};

// Adds `s` to `into` (histograms bucket-wise: the partitions share the bounds).
void AddStats(StoreStats& into, const StoreStats& s) {
  into.up = into.up && s.up;
  into.queue_depth += s.queue_depth;
  into.batches += s.batches;
  into.keys_written += s.keys_written;
  into.inserted += s.inserted;
  into.duplicates += s.duplicates;
  into.unavailable += s.unavailable;
  into.write_behind_conflicts += s.write_behind_conflicts;
  for (std::size_t i = 0; i < into.batch_size_buckets.size() && i < s.batch_size_buckets.size(); ++i) {
    into.batch_size_buckets[i].second += s.batch_size_buckets[i].second;
  }
  into.batch_size_sum += s.batch_size_sum;
  into.batch_size_count += s.batch_size_count;
  for (std::size_t i = 0; i < into.commit_seconds_buckets.size() && i < s.commit_seconds_buckets.size(); ++i) {
    into.commit_seconds_buckets[i].second += s.commit_seconds_buckets[i].second;
  }
  into.commit_seconds_sum += s.commit_seconds_sum;
  into.commit_seconds_count += s.commit_seconds_count;
  into.batch_failures += s.batch_failures;
  into.write_behind_lost += s.write_behind_lost;
  into.last_warm_streams += s.last_warm_streams;
  into.dead_lettered += s.dead_lettered;
  into.in_doubt_committed += s.in_doubt_committed;
  into.in_doubt_aborted += s.in_doubt_aborted;
  into.in_doubt_unknown += s.in_doubt_unknown;
  into.cancelled += s.cancelled;
  into.copy_batches += s.copy_batches;
  into.copy_fallbacks += s.copy_fallbacks;
}

// Runs fn(i) for i in [0, n) on n threads; the first exception (by index) is rethrown after all joined.
template <typename Fn>
void InParallel(std::size_t n, Fn fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

PartitionedStore::PartitionedStore(PartitionedStoreOptions options) : options_(std::move(options)) {
  if (options_.map_poll <= std::chrono::milliseconds::zero()) {
    throw std::invalid_argument("PartitionedStoreOptions.map_poll must be positive");
  }
  ConnectionDefaults defaults;
  defaults.statement_timeout = kMapStatementTimeout;
  defaults.tcp_user_timeout = options_.base.tcp_user_timeout;
  if (!options_.fixed_map) proxy_conninfo_ = WithConnectionDefaults(options_.proxy_url, defaults);  // throws std::invalid_argument
  log_ = options_.base.log ? options_.base.log : StderrLogSink();
}

PartitionedStore::~PartitionedStore() { Shutdown(); }

void PartitionedStore::OnRetarget(RetargetListener listener) { listener_ = std::move(listener); }

void PartitionedStore::Start() {
  if (started_.exchange(true)) throw std::logic_error("PartitionedStore::Start called twice");
  PartitionMap map;
  const bool fixed = options_.fixed_map.has_value();
  if (fixed) {
    map = *options_.fixed_map;
  } else {
    // The map, under the store's start-up policy: a proxy still starting is waited for, a refusal is final.
    std::optional<StartError> last;
    const bool read = RetryWithBackoff(
        RetryPolicy{kBackoffMin, options_.base.reconnect_backoff_max,
                    std::chrono::steady_clock::now() + options_.base.start_timeout},
        [&](int, std::chrono::milliseconds) {
          try {
            map = ReadPartitionMap(proxy_conninfo_, options_.cluster);
            return true;
          } catch (const pqxx::broken_connection& e) {
            last = ClassifyStartError(e);
            if (last->permanent()) throw *last;
            return false;
          } catch (const std::invalid_argument& e) {
            throw StartError(std::string("partition map: ") + e.what(), "", true);
          } catch (const pqxx::sql_error& e) {
            throw ClassifyStartError(e);
          } catch (const std::exception& e) {  // no such cluster: the proxy is up, its configuration is not
            throw StartError(e.what(), "", true);
          }
        },
        SleepFor);
    if (!read) throw *last;

    boost::json::array where;
    for (const auto& c : map.conninfo) where.emplace_back(DescribeConninfo(c));
    log_->Write(LogSeverity::kInfo, "partition_map",
                {{"cluster", options_.cluster}, {"count", map.conninfo.size()}, {"partitions", std::move(where)}});
  }
  if (map.conninfo.empty()) throw StartError("partition map: no partitions", "", true);
  const bool labelled = !fixed || map.conninfo.size() > 1;

  std::vector<std::unique_ptr<Store>> stores;
  for (std::size_t p = 0; p < map.conninfo.size(); ++p) {
    StoreOptions o = options_.base;
    o.url = map.conninfo[p];
    if (labelled) o.label = PartitionLabel(p);
    o.log = log_;
    // The warm load's streams are shared out: every partition loads at once (WarmLoad), one connection each
    // beyond the first few partitions rather than warm_streams per partition.
    o.warm_streams = std::max(1u, options_.base.warm_streams / static_cast<unsigned>(map.conninfo.size()));
    stores.push_back(std::make_unique<Store>(std::move(o)));  // throws std::invalid_argument: a bad connstr
  }
  try {
    InParallel(stores.size(), [&](std::size_t p) {
      try {
        stores[p]->Start();
      } catch (const StartError& e) {  // which partition, and where (never a password)
        if (!labelled) throw;
        throw StartError(PartitionLabel(p) + " (" + DescribeConninfo(map.conninfo[p]) + "): " + e.what(),
                         e.sqlstate(), e.permanent());
      }
    });
  } catch (...) {
    InParallel(stores.size(), [&](std::size_t p) { stores[p]->Shutdown(); });
    throw;
  }
  {
    const MutexLock lock(&map_mu_);
    map_ = std::move(map);
  }
  stores_ = std::move(stores);
  accepting_.store(true);
  if (fixed) return;
  watcher_.Start("sg-partition-map", options_.map_poll, /*first_at_once=*/false, [this] {
    Poll();
    return true;
  });
}

bool PartitionedStore::Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                              std::shared_ptr<Ticket> ticket, Expect expect, PackAttrs attrs) {
  if (!accepting_.load()) return false;
  return StoreOf(d).Submit(route, d, std::move(source), std::move(done), std::move(ticket), expect, attrs);
}

bool PartitionedStore::SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source,
                                         std::int64_t first_seen_us, const std::optional<RequestId>& request) {
  if (!accepting_.load()) return false;
  return StoreOf(d).SubmitWriteBehind(route, d, std::move(source), first_seen_us, request);
}

std::size_t PartitionedStore::SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) {
  if (rows.empty()) return 0;
  // seq_cst (both): Shutdown() stores accepting_ then reads in_group_; this increments in_group_ then reads
  // accepting_ — one of the two always sees the other.
  in_group_.fetch_add(1);
  struct Leave {
    std::atomic<std::uint32_t>& n;
    ~Leave() { n.fetch_sub(1); }
  } leave{in_group_};
  if (!accepting_.load()) return 0;
  const std::size_t np = stores_.size();
  absl::InlinedVector<std::size_t, 16> want(np, 0), got(np, 0), used(np, 0);
  absl::InlinedVector<unsigned, 64> part_of(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    part_of[i] = PartitionOf(rows[i].digest, np);
    ++want[part_of[i]];
  }
  for (std::size_t p = 0; p < np; ++p) {
    if (want[p] > 0) got[p] = stores_[p]->ReserveWriteBehind(want[p]);
  }
  // The prefix: up to the first row whose partition has no reserved room left.
  std::size_t n = 0;
  for (; n < rows.size(); ++n) {
    const unsigned p = part_of[n];
    if (used[p] == got[p]) break;
    ++used[p];
  }
  for (std::size_t p = 0; p < np; ++p) stores_[p]->ReleaseReserved(got[p] - used[p]);
  if (n == 0) return 0;
  // Each partition's rows of the prefix, in order.
  std::vector<WriteBehindRow> mine;
  std::size_t accepted = n;
  for (std::size_t p = 0; p < np; ++p) {
    if (used[p] == 0) continue;
    mine.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (part_of[i] == p) mine.push_back(rows[i]);
    }
    if (!stores_[p]->SubmitWriteBehindGroupReserved(mine, sink)) {
      // Not reachable while accepting_ holds (Shutdown waits for this call before stopping a Store). Were it
      // reached, the prefix ends before this partition's first row.
      for (std::size_t i = 0; i < accepted; ++i) {
        if (part_of[i] == p) {
          accepted = i;
          break;
        }
      }
    }
  }
  return accepted;
}

bool PartitionedStore::up() const {
  if (stores_.empty()) return false;
  for (const auto& s : stores_) {
    if (!s->up()) return false;
  }
  return true;
}

bool PartitionedStore::serving() const {
  for (const auto& s : stores_) {
    if (s->up()) return true;
  }
  return false;
}

bool PartitionedStore::full() const {
  for (const auto& s : stores_) {
    if (s->full()) return true;
  }
  return false;
}

StoreStats PartitionedStore::Stats() const {
  if (stores_.empty()) return StoreStats{};  // not started: down
  StoreStats sum = stores_.front()->Stats();
  for (std::size_t p = 1; p < stores_.size(); ++p) AddStats(sum, stores_[p]->Stats());
  return sum;
}

std::vector<PartitionState> PartitionedStore::Partitions() const {
  std::vector<PartitionState> out;
  out.reserve(stores_.size());
  for (std::size_t p = 0; p < stores_.size(); ++p) {
    out.push_back(PartitionState{static_cast<unsigned>(p), DescribeConninfo(conninfo(static_cast<unsigned>(p))),
                                 stores_[p]->Stats()});
  }
  return out;
}

std::uint64_t PartitionedStore::WarmLoad(std::chrono::seconds window,
                                         const std::function<void(std::span<const Digest>)>& sink) {
  std::vector<std::uint64_t> counts(stores_.size(), 0);
  InParallel(stores_.size(), [&](std::size_t p) { counts[p] = stores_[p]->WarmLoad(window, sink); });
  std::uint64_t total = 0;
  for (const auto c : counts) total += c;
  return total;
}

void PartitionedStore::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    watcher_.Stop();
    accepting_.store(false);
    while (in_group_.load() != 0) std::this_thread::yield();  // a group submission is a few µs of pushes
    InParallel(stores_.size(), [&](std::size_t p) { stores_[p]->Shutdown(); });
  });
}

std::string PartitionedStore::conninfo(unsigned p) const {
  const MutexLock lock(&map_mu_);
  return p < map_.conninfo.size() ? map_.conninfo[p] : std::string();
}

void PartitionedStore::Poll() {
  PartitionMap next;
  try {
    next = ReadPartitionMap(proxy_conninfo_, options_.cluster);
  } catch (const std::invalid_argument& e) {
    if (last_refused_ != e.what()) {
      last_refused_ = e.what();
      log_->Write(LogSeverity::kWarn, "partition_map_refused", {{"reason", last_refused_}});
    }
    return;
  } catch (const std::exception& e) {
    // The proxy is down (or the cluster gone): the old map stays; the partitions keep being written.
    const std::string error = ErrorSummary(e.what());
    if (last_unreadable_ != error) {
      last_unreadable_ = error;
      log_->Write(LogSeverity::kWarn, "partition_map_unreadable", {{"error", error}});
    }
    return;
  }
  last_unreadable_.clear();
  if (next.conninfo.size() != stores_.size()) {
    const std::string reason = "the map now has " + std::to_string(next.conninfo.size()) +
                               " partitions, this store " + std::to_string(stores_.size()) +
                               " (re-partitioning is offline); the old map is kept";
    if (last_refused_ != reason) {
      last_refused_ = reason;
      log_->Write(LogSeverity::kWarn, "partition_map_refused", {{"reason", reason}});
    }
    return;
  }
  Apply(next);
}

void PartitionedStore::Apply(const PartitionMap& next) {
  bool refused = false;
  for (std::size_t p = 0; p < next.conninfo.size(); ++p) {
    const std::string before = conninfo(static_cast<unsigned>(p));
    if (before == next.conninfo[p]) continue;
    try {
      stores_[p]->Retarget(next.conninfo[p]);
    } catch (const std::invalid_argument& e) {
      const std::string reason = PartitionLabel(p) + ": " + e.what();
      if (last_refused_ != reason) {  // once, not every poll
        last_refused_ = reason;
        log_->Write(LogSeverity::kWarn, "partition_map_refused",
                    {{"partition", PartitionLabel(p)}, {"reason", e.what()}});
      }
      refused = true;
      continue;
    }
    {
      const MutexLock lock(&map_mu_);
      map_.conninfo[p] = next.conninfo[p];
    }
    log_->Write(LogSeverity::kWarn, "partition_map_changed",
                {{"partition", PartitionLabel(p)}, {"from", DescribeConninfo(before)},
                 {"to", DescribeConninfo(next.conninfo[p])}});
    if (listener_) listener_(static_cast<unsigned>(p), next.conninfo[p]);
  }
  if (!refused) last_refused_.clear();  // a later refusal (the same one again) is logged anew
}

}  // namespace scangate::storage
