// The polling follower (--follow=poll; storage/follow/follower.h): one ordinary connection and, every
// probe_interval, one statement that returns the digests committed since the previous poll's snapshot and its own
// snapshot. No replication connection, slot, wal_level=logical or REPLICATION role: only sql/010's commit_xid
// (the inserting — or taking-over — transaction's top-level xid8) and its index. Across the epochs' switches
// (sql/019): each poll also reads the epochs switched since its previous snapshot (scangate_follow_switched).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "storage/follow/follower.h"
#include "storage/follow/follower_connection.h"
#include "storage/pg/error_summary.h"
#include "storage/pg/pg_binary.h"
#include "storage/pg/table_layout.h"

namespace scangate::storage {
namespace {

using follow_detail::Exec;
using follow_detail::FollowError;
using follow_detail::kAnswerGrace;
using follow_detail::kStopSlice;
using follow_detail::Open;
using follow_detail::RefuseStandby;
using follow_detail::ResultPtr;
using follow_detail::BootNs;

// SET statement_timeout = <FollowerOptions::statement_timeout>, in ms.
std::string SessionSql(std::chrono::milliseconds statement_timeout) {
  return "SET statement_timeout = " + std::to_string(statement_timeout.count());
}
// The first snapshot, that the schema has the column (sql/010; a database scangate did not migrate may not), and
// whether it has the epochs' switch (sql/019; a database an older scangate migrated has not: no epoch switches there).
constexpr const char* kStartSql =
    "SELECT pg_current_snapshot()::text, EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'scan_keys'::regclass "
    "AND attname = 'commit_xid' AND NOT attisdropped), "
    "to_regprocedure('scangate_follow_switched(pg_snapshot,boolean,anyelement)') IS NOT NULL";

// One poll. $1 = the previous poll's snapshot P; the statement's own snapshot S (pg_current_snapshot() is the
// statement's active snapshot, the one its scans read with) is returned in the row whose digest is NULL. A row
// is returned when its transaction was not visible in P — its xid is at or past P's xmax, or in P's list of
// running ones — and is visible in S (the scans see only what S sees). Every transaction is visible in exactly
// one poll's S and not in the one before it, whatever order transactions commit in: none missed, none read
// twice. xids at or past S's xmax cannot be visible in S; the bound keeps rows stamped with a foreign cluster's
// xids (a restore that carried the column) from being read at every poll. Each branch is an index range (or
// point) scan of sql/010's partial index; unprepared, so each poll is planned with its own bounds.
// The third column ({SEEN}): with FollowerOptions::learned, the row's first_seen when it carries neither lot nor
// expiry (a raw key's row, whose recent-set key is its digest: server/verdict/scan_key.h RecentDigest), else NULL;
// in binary a timestamptz is int8 µs since 2000-01-01 (no conversion on the server). Without `learned`, NULL.
// The digest column's type is the table's (bytea, or sql/013's uuid: 16 bytes in binary), so the snapshot row's
// NULL is left untyped and takes it.
// The fourth column ({PEERS}, issue 42): with FollowerOptions::peers, the peers' watermark rows as JSON text in the
// snapshot row (storage/peers/peer_sql.h) — the same snapshot as the digests — else NULL.
// {SWITCHED} (sql/019): the rows of each epoch switched between P and S that P did not see. scan_keys above is the
// open epoch of S: a switch holds scan_keys' lock until it commits, and the name is resolved before S is taken. The
// rows written into the epoch a switch closed were all committed before the switch (the write order), so they are
// visible in every S that sees the switch: read once, in the first poll whose S does.
constexpr const char* kPollSql = R"sql(
SELECT pg_current_snapshot()::text, NULL, NULL::timestamptz, {PEERS}
UNION ALL
SELECT NULL, digest, {SEEN}, NULL FROM scan_keys
 WHERE commit_xid >= pg_snapshot_xmax($1::pg_snapshot) AND commit_xid < pg_snapshot_xmax(pg_current_snapshot())
UNION ALL
SELECT NULL, digest, {SEEN}, NULL FROM scan_keys
 WHERE commit_xid = ANY (ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))){SWITCHED}
)sql";
constexpr const char* kSwitchedSql = R"sql(
UNION ALL
SELECT NULL, s.digest, s.first_seen, NULL
  FROM scangate_follow_switched($1::pg_snapshot, {LEARNED}, (SELECT digest FROM scan_keys LIMIT 0)) AS s)sql";
constexpr const char* kSeen = "CASE WHEN lot IS NULL AND expiry IS NULL THEN first_seen END";
constexpr const char* kNoSeen = "NULL::timestamptz";

std::string PollSql(bool seen, bool switched, const std::string& peers_sql) {
  std::string sql = kPollSql;
  std::string switched_sql = switched ? kSwitchedSql : "";
  if (switched) switched_sql.replace(switched_sql.find("{LEARNED}"), 9, seen ? "true" : "false");
  sql.replace(sql.find("{SWITCHED}"), 10, switched_sql);
  for (std::size_t at; (at = sql.find("{SEEN}")) != std::string::npos;) sql.replace(at, 6, seen ? kSeen : kNoSeen);
  sql.replace(sql.find("{PEERS}"), 7, peers_sql.empty() ? std::string("NULL::text") : peers_sql);
  return sql;
}

// A snapshot's text as PostgreSQL prints it: xmin:xmax:xip,xip,... (digits, colons and commas only).
bool WellFormedSnapshot(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789:,") == std::string_view::npos &&
         s.find(':') != std::string_view::npos;
}

}  // namespace

// Every (re)connection starts from a new snapshot, never the last one (the window is reloaded after it): behind
// a failover the server may be a promoted standby that reuses the xids of transactions the old primary lost,
// which the old snapshot would count as visible — and their rows would never be read.
void Follower::ConnectPoll(Connections& c, const std::string& conninfo) {
  c.poll = Open(conninfo, options_.connection, "scangate-follower", /*replication=*/false, "follower connection");
  // A poll that hangs (a lock, a stuck server) ends with an error, and the follower reconnects; meanwhile it is
  // stale past --follow-max-lag and PostgreSQL decides new keys. One that gets no answer at all (a silent network)
  // is given up kAnswerGrace later.
  const auto within = options_.statement_timeout + kAnswerGrace;
  ResultPtr set = Exec(c.poll.get(), SessionSql(options_.statement_timeout).c_str(), {}, false, within, stop_,
                       "follower connection");
  if (PQresultStatus(set.get()) != PGRES_COMMAND_OK) {
    throw FollowError("follower connection: " + ErrorSummary(PQerrorMessage(c.poll.get())));
  }
  RefuseStandby(c.poll.get(), within, stop_);
  ResultPtr r = Exec(c.poll.get(), kStartSql, {}, false, within, stop_, "first snapshot");
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    throw FollowError("first snapshot: " + ErrorSummary(PQerrorMessage(c.poll.get())));
  }
  if (std::string_view(PQgetvalue(r.get(), 0, 1)) != "t") {
    throw std::runtime_error(
        "cannot follow: scan_keys has no commit_xid column (sql/010_scan_keys_commit_xid.sql; scangate applies it "
        "at start to every database it writes to); --follow=logical does not need it, --follow=off turns following "
        "off");
  }
  c.switched_epochs = std::string_view(PQgetvalue(r.get(), 0, 2)) == "t";
  c.snapshot = PQgetvalue(r.get(), 0, 0);
  if (!WellFormedSnapshot(c.snapshot)) throw FollowError("first snapshot: malformed '" + c.snapshot + "'");
}

void Follower::Poll(Connections& c) {
  Up("poll");
  const bool peers = options_.peers && !options_.peers_sql.empty();
  const std::string sql =
      PollSql(static_cast<bool>(options_.learned), c.switched_epochs, peers ? options_.peers_sql : std::string());
  std::vector<Digest> digests, learned;
  std::vector<std::int64_t> learned_us;
  const auto within = options_.statement_timeout + kAnswerGrace;
  std::string peer_rows;
  while (!stop_.load() && !Moved(c)) {
    const auto sent = BootClock::now();
    const char* params[] = {c.snapshot.c_str()};
    ResultPtr r = Exec(c.poll.get(), sql.c_str(), params, /*binary=*/true, within, stop_, "poll");
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      throw FollowError("poll: " + ErrorSummary(PQerrorMessage(c.poll.get())));
    }
    digests.clear();
    learned.clear();
    learned_us.clear();
    std::string next;
    const int rows = PQntuples(r.get());
    digests.reserve(static_cast<std::size_t>(rows));
    for (int i = 0; i < rows; ++i) {
      if (!PQgetisnull(r.get(), i, 0)) {  // binary text: the snapshot's characters
        next.assign(PQgetvalue(r.get(), i, 0), static_cast<std::size_t>(PQgetlength(r.get(), i, 0)));
        if (peers && !PQgetisnull(r.get(), i, 3)) {
          peer_rows.assign(PQgetvalue(r.get(), i, 3), static_cast<std::size_t>(PQgetlength(r.get(), i, 3)));
        }
        continue;
      }
      Digest& d = digests.emplace_back();
      if (PQgetisnull(r.get(), i, 1) ||
          !StoredDigestFromBytes({PQgetvalue(r.get(), i, 1), static_cast<std::size_t>(PQgetlength(r.get(), i, 1))}, d)) {
        throw FollowError("poll: a row whose digest is neither 32 nor 16 bytes");  // sql/001's CHECK, sql/013's uuid
      }
      if (options_.learned && !PQgetisnull(r.get(), i, 2) && PQgetlength(r.get(), i, 2) == 8) {
        learned.push_back(d);
        learned_us.push_back(static_cast<std::int64_t>(LoadBe64(PQgetvalue(r.get(), i, 2))) + kPgEpochUs);
      }
    }
    if (!WellFormedSnapshot(next)) throw FollowError("poll: no well-formed snapshot in its answer");
    r.reset();
    if (!digests.empty()) {
      apply_(digests);
      keys_.fetch_add(digests.size());
    }
    if (!learned.empty()) options_.learned(learned, learned_us);
    transactions_.fetch_add(1);  // with --follow=poll: polls
    c.snapshot = std::move(next);
    // A move while this poll ran: its answer came from the server left behind, so neither its stamp nor its peers'
    // rows may say fresh (Session drops the stamp and connects to the new one).
    if (Moved(c)) return;
    // Issue 42: the peers' rows of this same snapshot, now that its digests are in the filter.
    if (peers) options_.peers(peer_rows, BootNs(sent));
    // release: after the digests were applied, so a Fresh() that reads this stamp (acquire) and then probes the
    // filter sees them (issue 42). Every commit acknowledged before `sent` is visible in the snapshot this poll read.
    fresh_as_of_ns_.store(BootNs(sent), std::memory_order_release);
    const auto next_poll = sent + options_.probe_interval;
    while (!stop_.load() && !Moved(c) && BootClock::now() < next_poll) {
      std::this_thread::sleep_for(std::min<BootClock::duration>(kStopSlice, next_poll - BootClock::now()));
    }
  }
}

}  // namespace scangate::storage
