#include "storage/follow/follower.h"

#include <string_view>
#include <utility>

#include "core/thread_name.h"
#include "storage/follow/follower_connection.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace follow_detail {

ConnPtr Open(const std::string& conninfo, const ConnectionDefaults& defaults, const char* application_name,
             bool replication, const char* what) {
  const std::string full = WithConnectionDefaults(conninfo, defaults);
  // application_name after dbname: it overrides whatever the expanded string says.
  const char* keys[] = {"dbname", "application_name", replication ? "replication" : nullptr, nullptr};
  const char* values[] = {full.c_str(), application_name, "database", nullptr};
  ConnPtr c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  DropNotices(c.get());
  if (!c || PQstatus(c.get()) != CONNECTION_OK) {
    throw FollowError(std::string(what) + ": " + ErrorSummary(c ? PQerrorMessage(c.get()) : "out of memory"));
  }
  return c;
}

ResultPtr Exec(PGconn* conn, const char* sql, std::span<const char* const> params, bool binary,
               std::chrono::milliseconds within, const std::atomic<bool>& stop, const char* what) {
  std::string error;
  ResultPtr r = ExecWithin(conn, sql, params, binary, within, stop, &error);
  if (!r) throw FollowError(std::string(what) + ": " + error);
  return r;
}

void RefuseStandby(PGconn* conn, std::chrono::milliseconds within, const std::atomic<bool>& stop) {
  ResultPtr r = Exec(conn, "SELECT pg_is_in_recovery()", {}, false, within, stop, "recovery check");
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    throw FollowError("recovery check: " + ErrorSummary(PQerrorMessage(conn)));
  }
  if (std::string_view(PQgetvalue(r.get(), 0, 0)) == "t") {
    throw FollowError(
        "the server is a standby (pg_is_in_recovery()): a standby's snapshots list none of the transactions running "
        "on the primary, so their rows would be missed; following the primary only (target_session_attrs=read-write "
        "in a multi-host URL), retrying");
  }
}

}  // namespace follow_detail
namespace {

using follow_detail::FollowError;
using follow_detail::kStopSlice;
using follow_detail::BootNs;

// How long Start() waits for the first connection: creating a logical slot waits for the transactions running at
// that moment to end (the snapshot builder), and a long one (anywhere on the cluster) must not hold the instance's
// start; past this the thread goes on trying and reloads the window once it is connected.
constexpr auto kStartWait = std::chrono::seconds(2);

}  // namespace

Follower::Follower(FollowerOptions options, Apply apply, Reload reload)
    : options_(std::move(options)),
      apply_(std::move(apply)),
      reload_(std::move(reload)),
      max_lag_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.max_lag).count()),
      target_(options_.conninfo) {
  if (!options_.log) options_.log = StderrLogSink();
}

Follower::~Follower() { Stop(); }

bool Follower::Start() {
  // The first attempt runs on the follower's thread, so that a slot waiting for a long transaction cannot hold the
  // start past kStartWait. The thread waits for this call's decision: in time (no reload: the caller's warm start
  // reads its snapshot after the slot) or late (the thread reloads the window once the slot exists).
  struct Handshake {
    Mutex mu;
    CondVar cv;
    int outcome ABSL_GUARDED_BY(mu) = 0;  // 0 pending, 1 slot created, 2 failed
    bool decided ABSL_GUARDED_BY(mu) = false;
    bool in_time ABSL_GUARDED_BY(mu) = false;
  };
  auto h = std::make_shared<Handshake>();
  thread_ = std::thread([this, h] {
    SetThreadName("sg-follower");
    auto c = std::make_unique<Connections>();
    int outcome = 2;
    std::string error;
    try {
      Connect(*c);
      outcome = 1;
    } catch (const FollowError& e) {
      error = e.what();
    } catch (const std::exception& e) {  // an operator's setting: the caller refuses to start
      error = e.what();
      MutexLock lock(&mu_);
      setup_error_ = error;
    }
    bool in_time = false;
    {
      MutexLock lock(&h->mu);
      h->outcome = outcome;
      h->cv.SignalAll();
      while (!h->decided) h->cv.Wait(&h->mu);
      in_time = h->in_time;
    }
    if (outcome != 1) Fail(error);
    Run(outcome == 1 ? std::move(c) : nullptr, /*reload=*/!in_time);
  });
  MutexLock lock(&h->mu);
  const auto deadline = std::chrono::steady_clock::now() + kStartWait;
  while (h->outcome == 0 && !h->cv.WaitUntil(&h->mu, deadline)) {
  }
  h->in_time = h->outcome == 1;
  h->decided = true;
  h->cv.SignalAll();
  return h->in_time;
}

void Follower::Connect(Connections& c) {
  // The generation with the string: a Retarget from now on moves it on, and Moved() drops this connection.
  const std::string conninfo = target_.Get(&c.generation);
  if (options_.method == FollowMethod::kPoll) {
    ConnectPoll(c, conninfo);
  } else {
    ConnectLogical(c, conninfo);
  }
}

void Follower::Stream(Connections& c) {
  if (options_.method == FollowMethod::kPoll) {
    Poll(c);
  } else {
    StreamLogical(c);
  }
}

void Follower::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  connected_.store(false);
}

void Follower::Retarget(std::string conninfo) {
  target_.Set(std::move(conninfo));
  // What commits at the new server from now on is not followed until the follower is there (and reloaded): not
  // fresh. relaxed: as in Run; the next probe there stamps it again.
  fresh_as_of_ns_.store(0, std::memory_order_relaxed);
}

bool Follower::Moved(Connections& c) {
  if (!c.moved) c.moved = target_.Changed(c.generation);
  return c.moved;
}

void Follower::Fail(const std::string& what) {
  {
    MutexLock lock(&mu_);
    if (error_ == what) return;  // the same cause again (a retry every reconnect_delay): logged once
    error_ = what;
  }
  boost::json::object f{{"state", "down"}, {"error", what}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kWarn, "follower", std::move(f));
}

void Follower::Up(const std::string& what) {
  connected_.store(true);
  {
    MutexLock lock(&mu_);
    error_.clear();
  }
  boost::json::object f{{"state", "up"}, {options_.method == FollowMethod::kPoll ? "method" : "slot", what}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kInfo, "follower", std::move(f));
}

void Follower::Run(std::unique_ptr<Connections> first, bool reload) {
  while (!stop_.load()) {
    try {
      Session(std::move(first), reload);
    } catch (const std::exception& e) {
      connected_.store(false);
      // Not fresh from now on: what commits while it is away is not followed (the reload after the next
      // connection reads it). relaxed: as in Stream.
      fresh_as_of_ns_.store(0, std::memory_order_relaxed);
      if (stop_.load()) break;
      reconnects_.fetch_add(1);
      Fail(e.what());
      for (auto waited = std::chrono::milliseconds(0); waited < options_.reconnect_delay && !stop_.load();
           waited += kStopSlice) {
        std::this_thread::sleep_for(kStopSlice);
      }
    }
    first = nullptr;
    reload = true;  // every later connection missed what committed while this one was down
  }
}

void Follower::Session(std::unique_ptr<Connections> c, bool reload) {
  if (c == nullptr) {
    c = std::make_unique<Connections>();
    Connect(*c);
  }
  if (reload) {
    reloads_.fetch_add(1);
    // Stop() ends a long reload at its next chunk of rows.
    const std::uint64_t n = reload_([this](std::span<const Digest> digests) {
      if (stop_.load()) throw FollowError("stopping");
      apply_(digests);
    });
    keys_.fetch_add(n);
  }
  Stream(*c);  // returns on Stop() or a retarget
  connected_.store(false);
  if (c->moved) throw FollowError("the partition moved: reconnecting to its new server");
}

FollowerStats Follower::Stats() const {
  FollowerStats s;
  const auto now = BootClock::now();
  s.connected = connected_.load();
  s.fresh = Fresh(now);
  const auto as_of = fresh_as_of_ns_.load(std::memory_order_relaxed);  // relaxed: a figure for a scrape
  s.lag_seconds = as_of == 0 ? -1 : static_cast<double>(BootNs(now) - as_of) * 1e-9;
  s.keys = keys_.load();
  s.transactions = transactions_.load();
  s.reconnects = reconnects_.load();
  s.reloads = reloads_.load();
  MutexLock lock(&mu_);
  s.error = error_;
  return s;
}

}  // namespace scangate::storage
