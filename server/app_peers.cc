// App's peers (issue 42, server/app.h; the argument: storage/peers/peer_view.h): the journal owners' commit
// watermark in every database (partition) this instance writes to.
//   writer — --ack=filter with the journal: one WatermarkPublisher per partition, on a connection of its own,
//            registered before any journal `new` of its partition (Service::PeerHooks::published);
//   reader — --ack=filter following: one PeerView per partition, fed by that partition's follower in the snapshot
//            its keys come from; --ack=commit: the same views, fed by a PeerWatch each (an insert cannot see a key a
//            journal owner holds uncommitted). A key the views do not cover is read on peer_reader_ (connections of
//            their own: reads go on while inserts wait), waits for coverage (--peer-wait) or gets 503.
// --ack=filter with --follow=off reads nothing: its filter is trusted without the others (docs/ha.md: route by key).
// Apart from app.cc, which owns start-up order.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <vector>
#include <string>

#include "server/app.h"
#include "server/log.h"
#include "server/metrics/metrics.h"
#include "server/verdict/service.h"
#include "storage/journal/journal_files.h"
#include "storage/partitions/partition_map.h"
#include "storage/peers/peer_sql.h"
#include "storage/pg/conninfo.h"

namespace scangate::server {
namespace {
namespace json = boost::json;

std::string Label(const Config& config, unsigned p) { return config.partitioned() ? storage::PartitionLabel(p) : ""; }

// The peers' threads' connections: the writers' timeouts (a silently dropped network fails a statement instead of
// blocking it), their own application_name.
std::string PeerConninfo(const std::string& conninfo, const storage::StoreOptions& store, const char* application) {
  storage::ConnectionDefaults d;
  d.statement_timeout = store.statement_timeout;
  d.tcp_user_timeout = store.tcp_user_timeout;
  d.application_name = application;
  return storage::WithConnectionDefaults(conninfo, d);
}

// The lease's L4 (storage/peers/watermark_publisher.h): the incarnations `dir` ran under before (nullopt when its
// `incarnations` file is missing: an older folder, or one the journal rebuilt), then `incarnation` appended and
// fsynced — before the claim, so a crash between the two leaves the row's holder listed.
std::optional<std::vector<std::string>> RecordIncarnation(const std::string& dir, const std::string& incarnation) {
  const std::string path = dir + "/incarnations";
  std::optional<std::vector<std::string>> before;
  if (std::ifstream in(path); in) {
    before.emplace();
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) before->push_back(line);
    }
  }
  const std::string line = incarnation + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const bool ok = fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                  ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);  // the file's name, when it was created
    ::close(dfd);
  }
  if (!ok) {
    Log(LogLevel::kWarn, "instance_lease",
        {{"state", "unrecorded"}, {"path", path}, {"error", std::strerror(errno)},
         {"note", "this process's incarnation could not be recorded in the journal folder: a later copy of this "
                  "folder is not told from its original by it"}});
  }
  return before;
}

}  // namespace

void App::MakePeerViews() {
  const bool reads = (config_.ack == AckMode::kFilter && config_.following()) || config_.ack == AckMode::kCommit;
  if (!reads) return;
  const unsigned n = static_cast<unsigned>(store_->partitions());
  for (unsigned p = 0; p < n; ++p) {
    peer_views_.push_back(std::make_unique<storage::PeerView>(
        /*await_self=*/config_.publishes_watermark(), config_.peer_window(), Label(config_, p), store_options_.log));
  }
}

void App::ConfigurePeers(storage::FollowerOptions& fo, unsigned p) {
  if (config_.ack != AckMode::kFilter || p >= peer_views_.size()) return;
  fo.peers_sql = storage::PeersJsonSql(p);
  storage::PeerView* view = peer_views_[p].get();
  fo.peers = [view](std::string_view rows, std::int64_t sent_ns) { view->Apply(rows, sent_ns); };
}

std::optional<int> App::StartPeers() {
  const unsigned n = static_cast<unsigned>(store_->partitions());
  std::vector<std::string> made_with;  // the strings the peers' connections are made with
  for (unsigned p = 0; p < n; ++p) made_with.push_back(store_->conninfo(p));
  // Issue 55: an --ack=filter --journal=off instance is refused beside any other (storage/peers/presence.h).
  const bool exclusive = config_.ack == AckMode::kFilter && !config_.journal;
  for (unsigned p = 0; p < n; ++p) {
    storage::InstancePresenceOptions o;
    o.conninfo = PeerConninfo(made_with[p], store_options_, "scangate-presence");
    o.partition = p;
    o.label = Label(config_, p);
    o.exclusive = exclusive;
    o.log = store_options_.log;
    presence_.push_back(std::make_unique<storage::InstancePresence>(std::move(o)));
    storage::InstancePresence::Acquired got;
    while ((got = presence_.back()->Acquire()) == storage::InstancePresence::Acquired::kUnreachable) {
      if (!PauseUnlessStopped(std::chrono::milliseconds(500))) return std::nullopt;  // Run() sees the stop
    }
    if (got == storage::InstancePresence::Acquired::kConflict) {
      json::object f{{"state", "refused"}, {"error", presence_.back()->conflict()}, {"exit_code", kExitConfig},
                     {"journal", config_.journal}};
      if (config_.partitioned()) f["partition"] = Label(config_, p);
      Log(LogLevel::kError, "instance_presence", std::move(f));
      return kExitConfig;
    }
    presence_.back()->Start();
  }
  if (journal_ != nullptr) {
    incarnation_ = storage::journal_files::NewInstanceId();
    const std::optional<std::vector<std::string>> ran_under = RecordIncarnation(config_.journal_dir, incarnation_);
    for (auto& v : peer_views_) v->SetSelf(journal_->instance_id(), incarnation_);
    for (unsigned p = 0; p < n; ++p) {
      storage::WatermarkPublisherOptions o;
      o.conninfo = PeerConninfo(made_with[p], store_options_, "scangate-watermark");
      o.instance_id = journal_->instance_id();
      o.incarnation = incarnation_;
      o.journal_incarnations = ran_under;
      o.partition = p;
      o.label = Label(config_, p);
      o.log = store_options_.log;
      o.uncommitted = [this, p] { return journal_->UncommittedOf(p); };
      // Issue 55: a step its watermark connection sees (every 50 ms) drops the bounds of that clock at once; its
      // clock reader re-establishes them from the new clock within a second (new keys decided in PostgreSQL
      // meanwhile), measuring and recording the step against the old ones (sql/017), which guard the take-over
      // and the expiry until then.
      if (clocks_ != nullptr) o.on_clock_step = [clock = &clocks_->at(p)] { clock->SuspendForStep(); };
      publishers_.push_back(std::make_unique<storage::WatermarkPublisher>(std::move(o)));
      publishers_.back()->Start();
    }
    Log(LogLevel::kInfo, "watermark",
        {{"instance", journal_->instance_id()}, {"incarnation", incarnation_}, {"partitions", n}});
    // Issue 55: serve only once every first claim ended (a restart after kill -9 waits out its predecessor's lease,
    // at most storage::kLease), and exit when another live process holds the identity. A partition PostgreSQL does
    // not answer now is claimed in the background (its journal `new`s wait for it, as before).
    notify_.Status("starting: claiming this instance's rows (the lease)");
    while (true) {
      // `done` first: a publisher records its refusal before its first claim's end, so done implies it is seen.
      const bool done =
          std::all_of(publishers_.begin(), publishers_.end(), [](const auto& p) { return p->first_claim_done(); });
      const auto refused = std::find_if(publishers_.begin(), publishers_.end(), [](const auto& p) { return p->refused(); });
      if (refused != publishers_.end()) {
        Log(LogLevel::kError, "startup_failed",
            {{"error", (*refused)->lost_reason()}, {"exit_code", kExitConfig},
             {"todo", "another live scangate process holds this journal's identity (see the instance_lease event): "
                      "stop this copy; delete it, or remove its 'instance' file to drain it under a new identity"}});
        return kExitConfig;
      }
      if (done) break;
      if (!PauseUnlessStopped(std::chrono::milliseconds(20))) return std::nullopt;  // Run() sees the stop
    }
  }
  if (config_.ack == AckMode::kCommit) {
    for (unsigned p = 0; p < n && p < peer_views_.size(); ++p) {
      storage::PeerWatchOptions o;
      o.conninfo = PeerConninfo(made_with[p], store_options_, "scangate-peer-watch");
      o.partition = p;
      o.log = store_options_.log;
      peer_watches_.push_back(std::make_unique<storage::PeerWatch>(std::move(o), *peer_views_[p]));
      peer_watches_.back()->Start();
    }
  }
  if (!peer_views_.empty()) {
    std::vector<std::string> conninfo;
    for (unsigned p = 0; p < n; ++p) conninfo.push_back(PeerConninfo(made_with[p], store_options_, "scangate-peer-read"));
    storage::LookupOptions lo;
    lo.retention = config_.retention;  // an expired row reads as absent (it may be taken over)
    peer_reader_ = std::make_unique<storage::PartitionedReader>(std::move(lo), conninfo);
    peer_reader_->Start();
  }
  peers_retargetable_.store(true);
  // A partition moved while these were made: they read the old string; the listener skipped them until now.
  for (unsigned p = 0; p < n; ++p) {
    if (const std::string now = store_->conninfo(p); now != made_with[p]) RetargetPeers(p, now);
  }
  return std::nullopt;
}

void App::RetargetPeers(unsigned p, const std::string& conninfo) {
  if (!peers_retargetable_.load()) return;  // StartPeers reads the new string, then calls this again
  if (p < presence_.size()) presence_[p]->Retarget(PeerConninfo(conninfo, store_options_, "scangate-presence"));
  if (p < publishers_.size()) publishers_[p]->Retarget(PeerConninfo(conninfo, store_options_, "scangate-watermark"));
  if (p < peer_watches_.size()) peer_watches_[p]->Retarget(PeerConninfo(conninfo, store_options_, "scangate-peer-watch"));
  if (peer_reader_ && p < peer_reader_->partitions()) {
    peer_reader_->Retarget(p, PeerConninfo(conninfo, store_options_, "scangate-peer-read"));
  }
}

void App::AttachPeers() {
  const bool exclusive = config_.ack == AckMode::kFilter && !config_.journal;
  if (peer_views_.empty() && publishers_.empty() && !exclusive) return;
  Service::PeerHooks h;
  const unsigned n = static_cast<unsigned>(store_->partitions());
  h.partitions = n;
  h.partition = [n](const Digest& d) { return n == 1 ? 0u : storage::PartitionOf(d, n); };
  if (!peer_views_.empty()) {
    h.covered = [this, n](const Digest& d, std::int64_t t_ns) {
      return peer_views_[n == 1 ? 0 : storage::PartitionOf(d, n)]->Covered(t_ns);
    };
    h.reader = peer_reader_.get();
    h.state = [this] {
      std::string lagging;
      const std::int64_t now = BootClock::NowNs();
      for (const auto& v : peer_views_) {
        const std::string what = v->Lagging(now);
        if (what.empty()) continue;
        lagging.append(lagging.empty() ? "not covered: " : "; ");
        lagging.append(v->label().empty() ? std::string_view("database") : std::string_view(v->label()));
        lagging.append(": ").append(what);
      }
      if (!lagging.empty()) lagging.append(": new keys wait (--peer-wait) or get 503 meanwhile");
      return lagging;
    };
  }
  if (!publishers_.empty()) {
    h.published = [this, n](const Digest& d) {
      return publishers_[n == 1 ? 0 : storage::PartitionOf(d, n)]->published();
    };
  } else if (exclusive && presence_.size() == n) {
    // --journal=off (issue 55): a write-behind `new` only while this instance is known to be alone on d's database.
    h.published = [this, n](const Digest& d) {
      return presence_[n == 1 ? 0 : storage::PartitionOf(d, n)]->held();
    };
  }
  h.started = [this] {
    return std::all_of(peer_views_.begin(), peer_views_.end(), [](const auto& v) { return v->sampled(); }) &&
           std::all_of(publishers_.begin(), publishers_.end(), [](const auto& p) { return p->published(); });
  };
  service_->AttachPeers(std::move(h));
}

void App::FillPeerStats(MetricsSnapshot& s) const {
  const std::int64_t now = BootClock::NowNs();
  for (const auto& v : peer_views_) s.peer_views.emplace_back(v->label(), v->Stats(now));
  for (const auto& p : publishers_) s.publishers.emplace_back(p->label(), p->Stats());
  s.peer_window_seconds = std::chrono::duration<double>(config_.peer_window()).count();
}

void App::StopPeerReaders() {
  for (auto& w : peer_watches_) w->Stop();
  if (peer_reader_) peer_reader_->Shutdown();
}

void App::StopPublishers(bool clean) {
  peers_retargetable_.store(false);
  for (auto& p : publishers_) p->Stop(clean);
  for (auto& p : presence_) p->Stop();  // last: the write-behind is flushed (the store shut down) before another starts
}

}  // namespace scangate::server
