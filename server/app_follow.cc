// App's followers (issue 32, server/app.h; storage/follow/follower.h): with --ack=filter and --follow one per
// database — one per partition with --partitions — each setting in the filter every digest committed to its
// database by anyone, so that a key new at one instance is a duplicate at the others; the Service trusts a
// definitely-new only while the follower of its database is fresh. Apart from app.cc, which owns start-up order.
#include <algorithm>
#include <string>

#include "server/app.h"
#include "server/log.h"
#include "server/verdict/service.h"
#include "storage/partitions/partition_map.h"

namespace scangate::server {

std::chrono::seconds App::WarmWindow() const {
  // Rows past the horizon count as absent: not loaded (they would only send their keys to PostgreSQL).
  return config_.retention.count() > 0 ? std::min(config_.window, config_.retention) : config_.window;
}

std::optional<int> App::StartFollowers() {
  if (!config_.following()) return std::nullopt;
  const unsigned n = static_cast<unsigned>(store_->partitions());
  // Under the listener's mutex: a partition moved after its string was read here is retargeted by the listener once
  // this publishes the followers (the store changes its string before it calls the listener).
  UniqueMutexLock lock(&followers_mu_);
  for (unsigned p = 0; p < n; ++p) {
    storage::FollowerOptions fo;
    fo.method = config_.follow_method;
    fo.conninfo = store_->conninfo(p);
    fo.label = config_.partitioned() ? storage::PartitionLabel(p) : "";
    fo.max_lag = config_.follow_max_lag;
    fo.log = store_options_.log;
    // The writers' connection safety: keepalives and connect_timeout (the defaults), tcp_user_timeout.
    fo.connection.tcp_user_timeout = store_options_.tcp_user_timeout;
    auto apply = [this](std::span<const Digest> digests) {
      filter_->InsertBatchConcurrently(digests);
      filter_->PublishPendingInserts();  // the follower's counts reach the shards' capacity accounting now
    };
    if (config_.follow_commit) {
      fo.learned = [this](std::span<const Digest> digests, std::span<const std::int64_t> first_seen_us) {
        // acquire: the Service is built after the followers start; until AttachFollowers publishes it, nothing
        // is learned (forgetting is always safe: those repeats ask PostgreSQL).
        if (auto* s = learning_service_.load(std::memory_order_acquire)) s->LearnCommitted(digests, first_seen_us);
      };
    }
    ConfigurePeers(fo, p);  // issue 42: the peers' rows in the poll's (probe's) snapshot (server/app_peers.cc)
    auto reload = [this, p](const storage::Follower::Apply& sink) {
      return store_->WarmLoadPartition(p, WarmWindow(), sink);
    };
    followers_.push_back(std::make_unique<storage::Follower>(std::move(fo), std::move(apply), std::move(reload)));
  }
  followers_retargetable_ = true;
  lock.Unlock();
  for (auto& f : followers_) {
    if (f->Start()) continue;
    if (const std::string why = f->SetupError(); !why.empty()) {
      Log(LogLevel::kError, "startup_failed", {{"error", why}, {"partition", f->label()}, {"exit_code", kExitStartup}});
      StopFollowers();
      return kExitStartup;
    }
    // A connection or a slot still waiting: the follower goes on trying; until it is fresh, PostgreSQL decides.
  }
  return std::nullopt;
}

void App::RetargetFollower(unsigned p, const std::string& conninfo) {
  MutexLock lock(&followers_mu_);
  if (followers_retargetable_ && p < followers_.size()) followers_[p]->Retarget(conninfo);
  if (clocks_retargetable_ && p < clock_readers_.size()) clock_readers_[p]->Retarget(conninfo);
}

void App::AttachFollowers() {
  if (followers_.empty()) return;
  if (config_.follow_commit) {  // --ack=commit: nothing waits for freshness; the recent set learns from now on
    learning_service_.store(service_.get(), std::memory_order_release);  // release: the Service is fully built
    return;
  }
  auto fresh = [this](const Digest& d, BootClock::time_point t) {
    return followers_[storage::PartitionOf(d, followers_.size())]->Fresh(t);  // one database: partition 0
  };
  auto state = [this] {
    std::string stale;
    const auto now = BootClock::now();
    for (const auto& f : followers_) {
      if (f->Fresh(now)) continue;
      if (!stale.empty()) stale += "; ";
      stale += (f->label().empty() ? std::string("database") : f->label());
      const std::string error = f->Stats().error;
      if (!error.empty()) stale += " (" + error + ")";
    }
    return stale.empty() ? stale
                         : "stale: " + stale + ": new keys are decided in PostgreSQL until it catches up";
  };
  service_->AttachFollowers(std::move(fresh), std::move(state));
}

void App::StopFollowers() {
  {
    MutexLock lock(&followers_mu_);
    followers_retargetable_ = false;
  }
  learning_service_.store(nullptr);
  for (auto& f : followers_) f->Stop();
}

}  // namespace scangate::server
