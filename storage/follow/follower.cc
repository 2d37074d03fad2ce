#include "storage/follow/follower.h"

#include <poll.h>
#include <unistd.h>

#include <deque>
#include <stdexcept>
#include <utility>

#include <libpq-fe.h>

#include "core/thread_name.h"
#include "storage/follow/pgoutput.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace {

constexpr const char* kPublication = "scangate_follow";  // sql/009
// How long Start() waits for the slot: creating one waits for the transactions running at that moment to end
// (the snapshot builder), and a long one (anywhere on the cluster) must not hold the instance's start; past this
// the thread goes on trying and reloads the window once the slot exists.
constexpr auto kStartWait = std::chrono::seconds(2);
constexpr auto kPollSlice = std::chrono::milliseconds(10);  // the stream's poll timeout: bounds Stop()'s wait
// After a round that read messages, the stream is left to gather for this long before the next read: the walsender
// sends one message per change, and a reader woken for each pays a poll + recv + wakeup per key (measured: the
// idle peer's follower took ~2 µs of CPU per key at 55 k keys/s; bench/RESULTS.md "Issue 32"). Adds at most this
// to the lag.
constexpr auto kGather = std::chrono::milliseconds(5);

std::int64_t SteadyNs(std::chrono::steady_clock::time_point t) { return t.time_since_epoch().count(); }
std::int64_t UnixUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using ConnPtr = std::unique_ptr<PGconn, ConnCloser>;
struct ResultClearer {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultClearer>;

// A connection failure the follower retries.
struct FollowError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

ConnPtr Open(const std::string& conninfo, bool replication) {
  const char* keys[] = {"dbname", "application_name", replication ? "replication" : nullptr, nullptr};
  const char* values[] = {conninfo.c_str(), replication ? "scangate-follower" : "scangate-follower-probe",
                          "database", nullptr};
  ConnPtr c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  if (!c || PQstatus(c.get()) != CONNECTION_OK) {
    throw FollowError(std::string(replication ? "replication connection: " : "probe connection: ") +
                      ErrorSummary(c ? PQerrorMessage(c.get()) : "out of memory"));
  }
  return c;
}

std::string SlotName() {
  static std::atomic<unsigned> next{0};
  return "scangate_follow_" + std::to_string(::getpid()) + "_" + std::to_string(next.fetch_add(1));
}

}  // namespace

struct Follower::Connections {
  ConnPtr repl, probe;
  std::string slot;
};

Follower::Follower(FollowerOptions options, Apply apply, Reload reload)
    : options_(std::move(options)),
      apply_(std::move(apply)),
      reload_(std::move(reload)),
      max_lag_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(options_.max_lag).count()) {
  if (!options_.log) options_.log = StderrLogSink();
  MutexLock lock(&mu_);
  conninfo_ = options_.conninfo;
}

Follower::~Follower() { Stop(); }

void Follower::Connect(Connections& c) {
  std::string conninfo;
  {
    MutexLock lock(&mu_);
    conninfo = conninfo_;
  }
  c.repl = Open(conninfo, true);
  c.probe = Open(conninfo, false);
  c.slot = SlotName();
  // TEMPORARY: dropped by PostgreSQL with this connection. NOEXPORT_SNAPSHOT: the reload reads its own snapshot,
  // taken after this point, so nothing committed in between is missed.
  const std::string sql = "CREATE_REPLICATION_SLOT " + c.slot + " TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT";
  ResultPtr r(PQexec(c.repl.get(), sql.c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const std::string what = ErrorSummary(PQerrorMessage(c.repl.get()));
    // wal_level below logical (55000) or a role without REPLICATION (42501): an operator's setting, named.
    if (state != nullptr && (std::string_view(state) == "55000" || std::string_view(state) == "42501")) {
      throw std::runtime_error("cannot follow: " + what +
                               " (the follower needs wal_level=logical, a free replication slot and wal sender, and a "
                               "role with REPLICATION; README 'Several instances'; --follow=off turns it off)");
    }
    throw FollowError("create slot: " + what);
  }
}

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

void Follower::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  connected_.store(false);
}

void Follower::Retarget(std::string conninfo) {
  {
    MutexLock lock(&mu_);
    conninfo_ = std::move(conninfo);
  }
  retarget_.store(true);
}

void Follower::Fail(const std::string& what) {
  {
    MutexLock lock(&mu_);
    error_ = what;
  }
  boost::json::object f{{"state", "down"}, {"error", what}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kWarn, "follower", std::move(f));
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
           waited += kPollSlice) {
        std::this_thread::sleep_for(kPollSlice);
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
  retarget_.store(false);
  if (reload) {
    reloads_.fetch_add(1);
    const std::uint64_t n = reload_(apply_);
    keys_.fetch_add(n);
  }
  Stream(*c);
}

void Follower::Stream(Connections& c) {
  const std::string start = "START_REPLICATION SLOT " + c.slot + " LOGICAL 0/0 (proto_version '1', publication_names '" +
                            kPublication + "')";
  {
    ResultPtr r(PQexec(c.repl.get(), start.c_str()));
    if (PQresultStatus(r.get()) != PGRES_COPY_BOTH) {
      throw FollowError("start replication: " + ErrorSummary(PQerrorMessage(c.repl.get())));
    }
  }
  connected_.store(true);
  {
    MutexLock lock(&mu_);
    error_.clear();
  }
  boost::json::object f{{"state", "up"}, {"slot", c.slot}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kInfo, "follower", std::move(f));

  StreamReader reader;
  StreamEvent ev;
  std::uint64_t progress = 0;  // everything at or before it is applied
  struct Probe {
    std::uint64_t lsn;
    std::int64_t taken_ns;
  };
  std::deque<Probe> probes;
  auto next_probe = std::chrono::steady_clock::now();
  const auto send = [&](const std::string& msg) {
    if (PQputCopyData(c.repl.get(), msg.data(), static_cast<int>(msg.size())) != 1 || PQflush(c.repl.get()) != 0) {
      throw FollowError("status update: " + ErrorSummary(PQerrorMessage(c.repl.get())));
    }
  };
  // Applies every complete message libpq holds; whether there was any.
  const auto read_buffered = [&] {
    bool any = false;
    for (;;) {
      char* buf = nullptr;
      const int n = PQgetCopyData(c.repl.get(), &buf, /*async=*/1);
      if (n == 0) return any;
      if (n < 0) throw FollowError("stream ended: " + ErrorSummary(PQerrorMessage(c.repl.get())));
      any = true;
      const std::string_view msg(buf, static_cast<std::size_t>(n));
      std::optional<std::string> bad = reader.Read(msg, ev);
      PQfreemem(buf);
      if (bad) throw FollowError("stream: " + *bad);
      if (ev.kind == StreamEvent::Kind::kCommit) {
        if (!ev.digests.empty()) {
          apply_(ev.digests);
          keys_.fetch_add(ev.digests.size());
        }
        transactions_.fetch_add(1);
        progress = std::max(progress, ev.lsn);
      } else if (ev.kind == StreamEvent::Kind::kKeepalive) {
        progress = std::max(progress, ev.lsn);
        if (ev.reply_requested) send(StandbyStatusUpdate(progress, UnixUs(), false));
      }
    }
  };
  while (!stop_.load() && !retarget_.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_probe) {
      // The server's flush position now: every commit acknowledged before `now` is at or before it.
      ResultPtr r(PQexec(c.probe.get(), "SELECT pg_current_wal_flush_lsn()"));
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
        throw FollowError("probe: " + ErrorSummary(PQerrorMessage(c.probe.get())));
      }
      const auto lsn = ParseLsn(PQgetvalue(r.get(), 0, 0));
      if (!lsn) throw FollowError("probe: malformed LSN");
      if (probes.size() < 64) probes.push_back({*lsn, SteadyNs(now)});
      send(StandbyStatusUpdate(progress, UnixUs(), /*reply=*/true));  // the server answers with its position
      next_probe = now + options_.probe_interval;
    }
    pollfd pfd{PQsocket(c.repl.get()), POLLIN, 0};
    const auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(next_probe - now), kPollSlice);
    if (::poll(&pfd, 1, static_cast<int>(std::max<std::int64_t>(wait.count(), 0))) < 0 && errno != EINTR) {
      throw FollowError("poll failed");
    }
    // Everything the socket holds is read before the gathering pause: one PQconsumeInput reads at most what
    // libpq's buffer takes, so it is called again while it yields messages (bounded: the probes go on).
    bool read_any = false;
    for (int round = 0; round < 64; ++round) {
      if (PQconsumeInput(c.repl.get()) != 1) throw FollowError("stream: " + ErrorSummary(PQerrorMessage(c.repl.get())));
      if (!read_buffered()) break;
      read_any = true;
    }
    while (!probes.empty() && progress >= probes.front().lsn) {
      // relaxed: the stamp is the datum; the filter's bits were set (seq_cst) before it.
      fresh_as_of_ns_.store(probes.front().taken_ns, std::memory_order_relaxed);
      probes.pop_front();
    }
    if (read_any) std::this_thread::sleep_for(kGather);
  }
  connected_.store(false);
  if (retarget_.load()) throw FollowError("the partition moved: reconnecting to its new server");
}

FollowerStats Follower::Stats() const {
  FollowerStats s;
  const auto now = std::chrono::steady_clock::now();
  s.connected = connected_.load();
  s.fresh = Fresh(now);
  const auto as_of = fresh_as_of_ns_.load(std::memory_order_relaxed);  // relaxed: a figure for a scrape
  s.lag_seconds = as_of == 0 ? -1 : static_cast<double>(SteadyNs(now) - as_of) * 1e-9;
  s.keys = keys_.load();
  s.transactions = transactions_.load();
  s.reconnects = reconnects_.load();
  s.reloads = reloads_.load();
  MutexLock lock(&mu_);
  s.error = error_;
  return s;
}

}  // namespace scangate::storage
