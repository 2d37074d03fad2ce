#include "storage/peers/presence.h"

#include <optional>
#include <utility>
#include <vector>

#include "core/thread_name.h"
#include "storage/peers/peer_connection.h"

namespace scangate::storage {
namespace {

using peers_detail::ConnPtr;
using peers_detail::Exec;
using peers_detail::PeerError;
using peers_detail::ResultPtr;

constexpr const char* kTryShared = "SELECT pg_try_advisory_lock_shared($1::int4, $2::int4)";
constexpr const char* kTryExclusive = "SELECT pg_try_advisory_lock($1::int4, $2::int4)";
constexpr const char* kPingSql = "SELECT 1";
// Who holds the lock (for the refusal's message): pg_locks and pg_stat_activity are readable by every role (another
// role's client_addr reads NULL without pg_read_all_stats).
constexpr const char* kHoldersSql = R"sql(
SELECT count(*), string_agg(DISTINCT coalesce(host(a.client_addr), 'local') || ' pid ' || a.pid, ', '),
       bool_or(l.mode = 'ExclusiveLock')
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.classid = $1::int8::oid AND l.objid = $2::int8::oid AND l.objsubid = 2
   AND l.granted AND l.pid <> pg_backend_pid()
)sql";

}  // namespace

struct InstancePresence::Session {
  ConnPtr conn;
};

InstancePresence::InstancePresence(InstancePresenceOptions options) : options_(std::move(options)) {
  if (!options_.log) options_.log = StderrLogSink();
  MutexLock lock(&mu_);
  conninfo_ = options_.conninfo;
}

InstancePresence::~InstancePresence() { Stop(); }

std::string InstancePresence::conflict() const {
  MutexLock lock(&mu_);
  return conflict_;
}

bool InstancePresence::TryLock(Session& s) {
  const std::vector<std::optional<std::string>> key = {std::to_string(kClass), std::to_string(options_.partition)};
  const std::int64_t sent = BootClock::NowNs();
  ResultPtr r = Exec(s.conn.get(), options_.exclusive ? kTryExclusive : kTryShared, key, "instance presence");
  if (PQntuples(r.get()) == 1 && std::string_view(PQgetvalue(r.get(), 0, 0)) == "t") {
    held_until_ns_.store(sent + std::chrono::nanoseconds(kFence).count(), std::memory_order_relaxed);
    MutexLock lock(&mu_);
    conflict_.clear();
    return true;
  }
  ResultPtr h = Exec(s.conn.get(), kHoldersSql, key, "instance presence");
  std::string who = PQntuples(h.get()) == 1 && !PQgetisnull(h.get(), 0, 1) ? PQgetvalue(h.get(), 0, 1) : "?";
  const std::string what =
      options_.exclusive
          ? "other scangate instances serve this database (" + who +
                "): an --ack=filter --journal=off instance keeps keys it answered new in memory, where they cannot "
                "see them; run it alone on its database, or with --journal=on beside them"
          : "an --ack=filter --journal=off scangate instance serves this database (" + who +
                "): it keeps keys it answered new in memory, where this instance cannot see them; stop it, or "
                "restart it with --journal=on, before starting this one";
  MutexLock lock(&mu_);
  conflict_ = what;
  return false;
}

InstancePresence::Acquired InstancePresence::Acquire() {
  auto s = std::make_unique<Session>();
  try {
    std::string conninfo;
    {
      MutexLock lock(&mu_);
      conninfo = conninfo_;
    }
    s->conn = peers_detail::Open(conninfo, "scangate-presence", "instance presence");
    if (!TryLock(*s)) return Acquired::kConflict;
  } catch (const std::exception& e) {
    MutexLock lock(&mu_);
    conflict_.clear();
    boost::json::object f{{"state", "down"}, {"error", e.what()}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(LogSeverity::kWarn, "instance_presence", std::move(f));
    return Acquired::kUnreachable;
  }
  session_ = std::move(s);
  return Acquired::kHeld;
}

void InstancePresence::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-presence");
    Run();
  });
}

void InstancePresence::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  session_.reset();  // closing the session releases the lock
  held_until_ns_.store(0, std::memory_order_relaxed);
}

void InstancePresence::Retarget(std::string conninfo) {
  {
    MutexLock lock(&mu_);
    conninfo_ = std::move(conninfo);
  }
  retarget_.store(true);
}

void InstancePresence::Run() {
  std::string logged;  // the last cause logged: each once
  auto note = [&](LogSeverity sev, const std::string& state, const std::string& what) {
    if (what == logged) return;
    logged = what;
    boost::json::object f{{"state", state}, {"error", what}, {"exclusive", options_.exclusive}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(sev, "instance_presence", std::move(f));
  };
  while (!stop_.load()) {
    try {
      if (!session_ || retarget_.exchange(false)) {
        session_.reset();  // a moved partition: the old server's lock means nothing now
        held_until_ns_.store(0, std::memory_order_relaxed);
        std::string conninfo;
        {
          MutexLock lock(&mu_);
          conninfo = conninfo_;
        }
        auto s = std::make_unique<Session>();
        s->conn = peers_detail::Open(conninfo, "scangate-presence", "instance presence");
        if (!TryLock(*s)) {
          note(LogSeverity::kError, "conflict", conflict());
          peers_detail::SleepUnlessStopped(kPing * 2, stop_);
          continue;
        }
        session_ = std::move(s);
        note(LogSeverity::kInfo, "held", "");
      }
      const std::int64_t sent = BootClock::NowNs();
      Exec(session_->conn.get(), kPingSql, {}, "instance presence");
      held_until_ns_.store(sent + std::chrono::nanoseconds(kFence).count(), std::memory_order_relaxed);
      peers_detail::SleepUnlessStopped(kPing, stop_);
    } catch (const std::exception& e) {
      session_.reset();
      if (stop_.load()) break;
      note(LogSeverity::kWarn, "down", e.what());
      peers_detail::SleepUnlessStopped(kPing * 2, stop_);
    }
  }
}

}  // namespace scangate::storage
