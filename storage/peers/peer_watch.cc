#include "storage/peers/peer_watch.h"

#include <utility>

#include "core/boot_clock.h"
#include "core/thread_name.h"
#include "storage/peers/peer_connection.h"
#include "storage/peers/peer_sql.h"

namespace scangate::storage {

PeerWatch::PeerWatch(PeerWatchOptions options, PeerView& view) : options_(std::move(options)), view_(view) {
  if (!options_.log) options_.log = StderrLogSink();
  MutexLock lock(&mu_);
  conninfo_ = options_.conninfo;
}

PeerWatch::~PeerWatch() { Stop(); }

void PeerWatch::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-peer-watch");
    Run();
  });
}

void PeerWatch::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::Retarget(std::string conninfo) {
  {
    MutexLock lock(&mu_);
    conninfo_ = std::move(conninfo);
  }
  retarget_.store(true);
}

std::string PeerWatch::error() const {
  MutexLock lock(&mu_);
  return error_;
}

void PeerWatch::Run() {
  while (!stop_.load()) {
    try {
      Serve();
    } catch (const std::exception& e) {
      if (stop_.load()) break;
      bool logged;
      {
        MutexLock lock(&mu_);
        logged = error_ == e.what();
        error_ = e.what();
      }
      if (!logged) {
        boost::json::object f{{"state", "down"}, {"error", e.what()}};
        if (!view_.label().empty()) f["partition"] = view_.label();
        options_.log->Write(LogSeverity::kWarn, "peer_watch", std::move(f));
      }
      // Meanwhile no sample: the view's deadline lapses and new keys wait (peer_view.h, the argument, 5.).
      peers_detail::SleepUnlessStopped(options_.reconnect_delay, stop_);
    }
  }
}

void PeerWatch::Serve() {
  std::string conninfo;
  {
    MutexLock lock(&mu_);
    conninfo = conninfo_;
  }
  retarget_.store(false);
  const peers_detail::ConnPtr conn = peers_detail::Open(conninfo, "scangate-peer-watch", "peer watch connection");
  const std::string sql = "SELECT " + PeersJsonSql(options_.partition);
  while (!stop_.load() && !retarget_.load()) {
    const std::int64_t sent = BootClock::NowNs();
    const peers_detail::ResultPtr r = peers_detail::Exec(conn.get(), sql.c_str(), {}, "peer watch");
    if (PQntuples(r.get()) != 1) throw peers_detail::PeerError("peer watch: no row");
    view_.Apply(PQgetvalue(r.get(), 0, 0), sent);
    {
      MutexLock lock(&mu_);
      error_.clear();
    }
    peers_detail::SleepUnlessStopped(std::chrono::nanoseconds(options_.interval) -
                                         std::chrono::nanoseconds(BootClock::NowNs() - sent),
                                     stop_);
  }
}

}  // namespace scangate::storage
