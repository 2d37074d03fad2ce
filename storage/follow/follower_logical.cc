// The logical-decoding follower (--follow=logical; storage/follow/follower.h): a replication connection with a
// TEMPORARY pgoutput slot on publication scangate_follow (sql/009), and a probe connection that reads the server's
// flush position every probe_interval, so freshness is "the stream has passed the position read at t".
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <string>

#include "storage/follow/follower.h"
#include "storage/follow/follower_connection.h"
#include "storage/follow/pgoutput.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace {

using follow_detail::Exec;
using follow_detail::FollowError;
using follow_detail::kAnswerGrace;
using follow_detail::kNoAnswerBound;
using follow_detail::kStopSlice;
using follow_detail::Open;
using follow_detail::RefuseStandby;
using follow_detail::ResultPtr;
using follow_detail::BootNs;

constexpr const char* kPublication = "scangate_follow";  // sql/009
// After a round that read messages, the stream is left to gather for this long before the next read: the walsender
// sends one message per change, and a reader woken for each pays a poll + recv + wakeup per key (measured: the
// idle peer's follower took ~2 µs of CPU per key at 55 k keys/s; bench/RESULTS.md "Issue 32"). Adds at most this
// to the lag.
constexpr auto kGather = std::chrono::milliseconds(5);

std::int64_t UnixUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string SlotName() {
  static std::atomic<unsigned> next{0};
  return "scangate_follow_" + std::to_string(::getpid()) + "_" + std::to_string(next.fetch_add(1));
}

}  // namespace

void Follower::ConnectLogical(Connections& c, const std::string& conninfo) {
  // The replication connection gets no statement_timeout: creating the slot waits for the transactions running
  // anywhere on the cluster. The probe connection's statements are bounded like the poll's.
  ConnectionDefaults repl_defaults = options_.connection;
  repl_defaults.statement_timeout = std::chrono::milliseconds(0);
  ConnectionDefaults probe_defaults = options_.connection;
  probe_defaults.statement_timeout = options_.statement_timeout;
  c.repl = Open(conninfo, repl_defaults, "scangate-follower", /*replication=*/true, "replication connection");
  c.probe = Open(conninfo, probe_defaults, "scangate-follower-probe", /*replication=*/false, "probe connection");
  RefuseStandby(c.probe.get(), options_.statement_timeout + kAnswerGrace, stop_);
  c.slot = SlotName();
  // TEMPORARY: dropped by PostgreSQL with this connection. NOEXPORT_SNAPSHOT: the reload reads its own snapshot,
  // taken after this point, so nothing committed in between is missed.
  const std::string sql = "CREATE_REPLICATION_SLOT " + c.slot + " TEMPORARY LOGICAL pgoutput NOEXPORT_SNAPSHOT";
  ResultPtr r = Exec(c.repl.get(), sql.c_str(), {}, false, kNoAnswerBound, stop_, "create slot");
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const std::string what = ErrorSummary(PQerrorMessage(c.repl.get()));
    // wal_level below logical (55000) or a role without REPLICATION (42501): an operator's setting, named.
    if (state != nullptr && (std::string_view(state) == "55000" || std::string_view(state) == "42501")) {
      throw std::runtime_error("cannot follow: " + what +
                               " (the follower needs wal_level=logical, a free replication slot and wal sender, and a "
                               "role with REPLICATION; docs/operations.md 'PostgreSQL settings'; --follow=poll needs "
                               "none of them, --follow=off turns following off)");
    }
    throw FollowError("create slot: " + what);
  }
}

void Follower::StreamLogical(Connections& c) {
  const std::string start = "START_REPLICATION SLOT " + c.slot + " LOGICAL 0/0 (proto_version '1', publication_names '" +
                            kPublication + "')";
  const auto within = options_.statement_timeout + kAnswerGrace;
  {
    ResultPtr r = Exec(c.repl.get(), start.c_str(), {}, false, within, stop_, "start replication");
    if (PQresultStatus(r.get()) != PGRES_COPY_BOTH) {
      throw FollowError("start replication: " + ErrorSummary(PQerrorMessage(c.repl.get())));
    }
  }
  Up(c.slot);

  StreamReader reader;
  StreamEvent ev;
  std::uint64_t progress = 0;  // everything at or before it is applied
  struct Probe {
    std::uint64_t lsn;
    std::int64_t taken_ns;
    std::string peer_rows;  // issue 42: the peers' rows in the probe's snapshot (FollowerOptions::peers)
  };
  const bool peers = options_.peers && !options_.peers_sql.empty();
  const std::string probe_sql =
      std::string("SELECT pg_current_wal_flush_lsn()") + (peers ? ", " + options_.peers_sql : std::string());
  std::deque<Probe> probes;
  auto next_probe = BootClock::now();
  // Every probe asks the server for a reply (a keepalive), so a live stream is never silent for long; one silent
  // past `within` is a network that drops packets, or a frozen walsender: the connection is given up.
  auto last_message = next_probe;
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
      last_message = BootClock::now();
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
  while (!stop_.load() && !Moved(c)) {
    const auto now = BootClock::now();
    if (now - last_message > within) {
      throw FollowError("stream: no message within " + std::to_string(within.count()) +
                        " ms (a network dropping packets, or a frozen server): the connection is given up");
    }
    if (now >= next_probe) {
      // The server's flush position now: every commit acknowledged before `now` is at or before it — and every
      // commit the peers' rows of this snapshot cover (issue 42: visible, so flushed, before the position is read).
      ResultPtr r = Exec(c.probe.get(), probe_sql.c_str(), {}, false, within, stop_, "probe");
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
        throw FollowError("probe: " + ErrorSummary(PQerrorMessage(c.probe.get())));
      }
      const auto lsn = ParseLsn(PQgetvalue(r.get(), 0, 0));
      if (!lsn) throw FollowError("probe: malformed LSN");
      if (probes.size() < 64) {
        probes.push_back({*lsn, BootNs(now), peers && !PQgetisnull(r.get(), 0, 1) ? PQgetvalue(r.get(), 0, 1) : ""});
      }
      send(StandbyStatusUpdate(progress, UnixUs(), /*reply=*/true));  // the server answers with its position
      next_probe = now + options_.probe_interval;
    }
    pollfd pfd{PQsocket(c.repl.get()), POLLIN, 0};
    const auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(next_probe - now), kStopSlice);
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
    if (Moved(c)) return;  // a move meanwhile: no stamp from the server left behind (as the poll)
    while (!probes.empty() && progress >= probes.front().lsn) {
      if (peers) options_.peers(probes.front().peer_rows, probes.front().taken_ns);  // its snapshot's keys applied
      // release: after the digests were applied (as the poll's stamp; issue 42).
      fresh_as_of_ns_.store(probes.front().taken_ns, std::memory_order_release);
      probes.pop_front();
    }
    if (read_any) std::this_thread::sleep_for(kGather);
  }
}

}  // namespace scangate::storage
