// Follower (issue 32): keeps one instance's filter in step with every digest committed to one database's
// scan_keys by anyone — another instance, this instance's own write-behind, a restore, a batch. Two ways
// (FollowMethod), measured side by side in bench/RESULTS.md "Issue 32: logical decoding or polling":
//   logical — the pgoutput plugin over a replication connection, on a TEMPORARY slot (PostgreSQL drops it when the
//             connection ends: nothing to leak after a kill -9, nothing to carry through a failover), publication
//             scangate_follow (sql/009). Needs wal_level=logical and a role with REPLICATION.
//   poll    — every probe_interval one statement reads the rows whose commit_xid (sql/010: the inserting
//             transaction's top-level xid8) was not yet visible in the previous poll's snapshot but is in its
//             own, and returns that snapshot for the next poll: out-of-order commits are neither missed nor read
//             twice. Needs nothing of the operator but the migration.
// Invariant: Fresh(now) is true only while every transaction acknowledged to its client before now - max_lag has
// been applied: logical — every probe_interval the follower reads pg_current_wal_flush_lsn() (time t) on a second
// connection, and once the stream has passed that position the follower is fresh as of t; poll — a poll sent at
// t reads a snapshot taken after t, in which every commit acknowledged before t is visible. No gap: on every
// (re)connection the slot (or the first snapshot) is taken before the window is read again (`reload`), so what
// committed before it is in the reload's snapshot and what committed after it is followed (an overlap only sets
// bits twice).
// Never on a standby: a server in recovery (pg_is_in_recovery()) lists no running transactions in its snapshots, so
// a poll would skip the rows of transactions running at it and still call itself fresh; the follower refuses such a
// server at every connection (stays stale, names it, retries: a promotion or a map change may fix it).
// Connection safety as the writers': keepalives, tcp_user_timeout and connect_timeout (FollowerOptions::connection),
// and no statement waits for its answer longer than statement_timeout + kAnswerGrace (follower_connection.h): a
// network that drops packets silently, or a frozen server, ends the connection (reconnect) instead of holding the
// thread — and Stop() — for hours.
// Use: one per database (one per partition with --partitions), Start() once the Store is up and before the warm
// start reads the window; the verdict logic trusts the filter's "definitely new" only while Fresh().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/boot_clock.h"
#include "core/digest.h"
#include "core/mutex.h"
#include "storage/conn_target.h"
#include "storage/follow/follow_method.h"
#include "storage/follow/follower_stats.h"
#include "storage/log_sink.h"
#include "storage/pg/conninfo.h"

namespace scangate::storage {

struct FollowerOptions {
  FollowMethod method = FollowMethod::kLogical;
  std::string conninfo;  // the database's connection string (URL or key=value); logical adds replication=database
  std::string label;     // the partition's ("p0"), or "" for one database: in log lines and metrics
  // The staleness past which the filter is not trusted (--follow-max-lag): a key committed elsewhere more than
  // this long ago is in the filter, or the instance decides its new keys in PostgreSQL.
  std::chrono::milliseconds max_lag{1000};
  // logical: how often the server's flush position is read and the stream asked to report its own (one query and
  // one status update each). 50 ms → follower lag p99 0.05 s idle, 0.05 s under 56 k keys/s (bench/RESULTS.md
  // "Issue 32"). poll: the interval between polls' starts (one statement each).
  std::chrono::milliseconds probe_interval{50};
  std::chrono::milliseconds reconnect_delay{500};
  // What every connection of the follower gets where its string sets none (storage/pg/conninfo.h): keepalives,
  // tcp_user_timeout, connect_timeout — App passes the writers' values. application_name is the follower's own.
  ConnectionDefaults connection;
  // The server cancels a follower statement past this (poll, probe); the follower gives up on one that has not
  // answered kAnswerGrace later (a silent network, a frozen server) and reconnects.
  std::chrono::milliseconds statement_timeout{5000};
  std::shared_ptr<LogSink> log;  // empty: StderrLogSink()
  // poll only, optional (--ack=commit's recent set): called after `apply` with each poll's rows that carry
  // neither lot nor expiry (raw keys' rows) and their first_seen (µs since the epoch); follower's thread.
  std::function<void(std::span<const Digest>, std::span<const std::int64_t>)> learned;
  // Issue 42, optional: the peers' watermark rows (storage/peers/peer_sql.h PeersJsonSql: `peers_sql`) are read in
  // the statement whose snapshot gives the keys — the poll itself, or the logical probe whose flush position the
  // stream must pass — and handed to `peers` with the boot time (core/boot_clock.h) that statement was sent, once
  // those keys are applied (before the freshness stamp). Follower's thread.
  std::string peers_sql;
  std::function<void(std::string_view rows_json, std::int64_t sent_ns)> peers;
};


class Follower {
 public:
  // `apply` sets digests in the filter (called on the follower's thread, also by `reload`). `reload` reads the
  // window's digests of this database into `apply` and returns their count (Store::WarmLoad): it runs after
  // every (re)connection but the first, which App's warm start covers.
  using Apply = std::function<void(std::span<const Digest>)>;
  using Reload = std::function<std::uint64_t(const Apply&)>;
  Follower(FollowerOptions options, Apply apply, Reload reload);
  ~Follower();  // Stop()
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  // Starts the follower's thread, which connects and creates the slot (logical) or takes the first snapshot
  // (poll), and waits for that up to 2 s. Returns true when it is in place in time (commits from now on are
  // followed; the caller's warm start then leaves no gap); false otherwise: the thread goes on trying, and reloads
  // the window once it succeeds. Never throws. Call once.
  bool Start();
  // Ends the thread and the connections (the slot goes with them). Idempotent. Any thread but the follower's.
  // Returns within kStopSlice (follower_connection.h) while the thread follows, waits for an answer or sleeps; within
  // the reload's next chunk of rows while it reads the window again; while it opens a connection, within libpq's
  // connect_timeout per host address (a blocking connect: it keeps a multi-host URL's per-host timeouts).
  void Stop();
  // The database moved (--partitions' map): not fresh from now on; reconnect there (and reload). Any thread, also
  // before Start() (which then connects there). A move while a connection is being opened is not lost: each
  // connection remembers the generation of the string it opened (ConnTarget) and is dropped once it changed.
  void Retarget(std::string conninfo);

  // True while the filter holds every digest committed before now - max_lag (see the invariant); `now` on the boot
  // clock (core/boot_clock.h: a suspended host does not find an old stamp young). Lock-free; any thread (the I/O
  // threads ask it per definitely-new key, BEFORE probing the filter: issue 42).
  bool Fresh(BootClock::time_point now = BootClock::now()) const {
    // acquire: pairs with the stamp's release after the poll's (probe's) digests were applied, so a probe of the
    // filter after this call sees every digest the stamp vouches for. Read before the probe: a stale->fresh flip
    // between a probe and this read would otherwise vouch for a negative taken before those digests were set.
    const auto as_of = fresh_as_of_ns_.load(std::memory_order_acquire);
    return as_of != 0 && now.time_since_epoch().count() - as_of <= max_lag_ns_;
  }
  FollowerStats Stats() const;
  // After Start() returned false: the setting that stops the follower for good (wal_level below logical, a role
  // without REPLICATION, a schema without commit_xid), "" when the cause may pass (a connection, a slot still
  // waiting). Any thread.
  std::string SetupError() const {
    MutexLock lock(&mu_);
    return setup_error_;
  }
  const std::string& label() const { return options_.label; }

 private:
  struct Connections;
  // The thread: sessions until Stop(), `first` (Start()'s connection, or null) the first one's.
  void Run(std::unique_ptr<Connections> first, bool reload);
  // One connection's life: connect and create the slot (unless `c` has them), reload the window when asked,
  // stream until an error, a retarget or Stop(). Throws on errors.
  void Session(std::unique_ptr<Connections> c, bool reload);
  // Opens the method's connections: logical — both connections and the TEMPORARY slot (follower_logical.cc);
  // poll — one connection and its first snapshot (follower_poll.cc). Throws FollowError (retried) or, for an
  // operator's setting (wal_level, the role, a schema without sql/010), std::runtime_error naming it.
  void Connect(Connections& c);
  void ConnectLogical(Connections& c, const std::string& conninfo);
  void ConnectPoll(Connections& c, const std::string& conninfo);
  // Follows until an error (throws FollowError), a retarget or Stop() (returns; Session handles both).
  void Stream(Connections& c);
  void StreamLogical(Connections& c);
  void Poll(Connections& c);
  // True once the target moved on since `c` was opened (latched in `c`); the follower's thread.
  bool Moved(Connections& c);
  void Up(const std::string& what);  // connected: clears the error, logs the follower's state
  void Fail(const std::string& what);  // logs a new error once (not every retry of the same one)

  FollowerOptions options_;
  Apply apply_;
  Reload reload_;
  const std::int64_t max_lag_ns_;
  std::atomic<std::int64_t> fresh_as_of_ns_{0};  // boot clock ns of the last probe the stream passed; 0 = never
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> keys_{0}, transactions_{0}, reconnects_{0}, reloads_{0};
  ConnTarget<std::string> target_;  // the database's connection string (Retarget replaces it)
  mutable Mutex mu_;
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::string setup_error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
