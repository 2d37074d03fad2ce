// EpochSwitcher: switches the exact store's open epoch for the next (sql/019; issue 54) when the open one reaches its
// size bound (keys) or its age bound, and closes the epochs it switched (sql/020, storage/epochs/closer.h), from a
// thread and connection of its own. Every pass: the next epoch is prepared ahead of time (scangate_epoch_prepare(),
// outside the write order: its DDL never holds up a writer); when a bound is reached, the switch flips names and the
// catalog in one short transaction under the write order's exclusive side, with a short lock_timeout, retried a few
// times and then at the next pass; then the oldest closing epoch, if any, is closed (one per pass); then every closed
// epoch wholly past the horizon is dropped (sql/020: no DELETE, no dead rows); then, past max_closed_epochs, two
// adjacent closed epochs are merged into one of only their rows that may still be live (pins). Every instance runs
// one: without a bound it only closes, drops and merges what the others switched.
// Invariant: it never changes a verdict. Every writer orders its transaction against the switch and checks the
// closed epochs (storage/epochs/catalog.h), every reader reads them; a switch that cannot get its locks in time
// changes nothing (the open epoch only grows past its bound). Writers wait for a switch at most its lock_timeout per
// attempt. Instances beside each other may all run one: a switch names the epoch it closes (`expected`), so a bound
// reached by both closes one epoch, not two.
// The size is PostgreSQL's own count of the open table's live rows (pg_stat_user_tables.n_live_tup), counted at
// every writer's commit and published by each backend at most once a second while it works (within 10 s once it
// idles): a bound is seen a little late, never early.
// Use: one per database (partition) when a bound is set; Start() after Store::Start() (the migrations), Shutdown()
// before exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/background_loop.h"
#include "storage/clock/pg_clock.h"
#include "storage/conn_target.h"
#include "storage/log_sink.h"

namespace scangate::storage {

// Closed epochs a database keeps before the switcher merges two (issue 54: at most 16 a key may have to be checked
// against). Merges rewrite live rows: at 12 with 12 M live keys in 1 M-key epochs every switch cost a 2 M-row merge,
// and ack=filter's cell with one in it fell from 0.76x to 0.63x of the empty store's rate (bench/RESULTS.md "The
// cliff, in epochs").
inline constexpr std::size_t kDefaultMaxClosedEpochs = 16;

struct EpochSwitcherOptions {
  std::string conninfo;  // libpq connection string, connection defaults already applied (conninfo.h)
  // Switch when the open epoch holds this many live rows; 0: no size bound.
  std::int64_t max_keys = 0;
  // Switch when the open epoch is this old (since its switch opened it); 0: no age bound.
  std::chrono::seconds max_age{0};
  // The horizon (--retention; 0 = off: closed epochs are dropped only when empty).
  std::chrono::seconds retention{0};
  // This instance's bounds of the database's clock (must outlive the switcher), or none: nothing is dropped while
  // PostgreSQL's now() is past PgClock::GuardUs (a forward step not recorded yet: storage/horizon/expiry.h).
  const PgClock* clock = nullptr;
  // More closed epochs than this: two adjacent ones are merged (one merge per pass). Each closed epoch is one more
  // look-up for a key its summary cannot rule out, and its summary in every writer's memory.
  std::size_t max_closed_epochs = kDefaultMaxClosedEpochs;
  std::chrono::milliseconds interval{1000};  // between passes
  // Each attempt's lock_timeout: the longest a writer waits behind it (writers take the order's shared side).
  std::chrono::milliseconds lock_timeout{100};
  int attempts = 5;  // attempts a pass makes when the locks do not come, 20 ms apart
  std::shared_ptr<LogSink> log;  // empty = StderrLogSink()
};

struct EpochSwitcherStats {
  std::uint64_t passes = 0;        // passes that completed
  std::uint64_t failures = 0;      // passes that failed (connection, any error)
  std::uint64_t switches = 0;      // epochs this instance closed
  std::uint64_t lock_timeouts = 0; // switch attempts that gave up at their lock_timeout
  std::uint64_t closes = 0;        // epochs this instance closed (compact, summarized)
  std::uint64_t closes_postponed = 0;  // closes whose swap did not get its locks (retried at a later pass)
  std::uint64_t merges = 0;            // merges of two closed epochs into one this instance made
  std::uint64_t merges_postponed = 0;  // merges whose swap did not get its locks (or lost to another instance's)
  std::uint64_t drops = 0;             // closed epochs this instance dropped, wholly past the horizon
  std::uint64_t dropped_keys = 0;      // the rows they held
  // The last completed pass's view (-1 before the first): the open epoch's live rows and age, the epochs not open.
  std::int64_t open_keys = -1;
  double open_age_seconds = -1;
  std::int64_t closed_epochs = -1;
  double last_switch_seconds = 0;  // the last switch's transaction, lock waits included
  double last_close_seconds = 0;   // the last close, all its steps
};

class EpochSwitcher {
 public:
  explicit EpochSwitcher(EpochSwitcherOptions options);
  ~EpochSwitcher();  // calls Shutdown()
  EpochSwitcher(const EpochSwitcher&) = delete;
  EpochSwitcher& operator=(const EpochSwitcher&) = delete;

  // Starts the thread; its first pass runs at once. Call once.
  void Start();
  // One pass now, on the calling thread (tests; the thread calls it): prepares the next epoch, switches when a bound
  // is reached; true when it switched. Throws pqxx errors (the connection is reopened on the next call). Not
  // concurrently with itself (call it only when not Start()ed).
  bool RunOnce();
  // Stops and joins the thread (a pass in progress finishes first). Idempotent.
  void Shutdown();
  // Connects to `conninfo` from the next pass on (a partition moved). Thread-safe.
  void Retarget(std::string conninfo) { target_.Set(std::move(conninfo)); }
  // Counters and the last view. Thread-safe.
  EpochSwitcherStats Stats() const;

 private:
  void Pass();
  // One switch of epoch `open_id`, retried up to options_.attempts times at a lock timeout; true when it switched.
  bool Switch(std::int64_t open_id, const char* reason);
  // The oldest closing epoch closed (storage/epochs/closer.h), logged and counted.
  void CloseOne();
  // The closed epochs wholly past the horizon dropped, logged and counted; a lock timeout waits for the next pass.
  void DropExpired();
  // Past max_closed_epochs, two adjacent closed epochs merged (storage/epochs/closer.h), logged and counted.
  void MergeTwo();

  const EpochSwitcherOptions options_;
  const std::shared_ptr<LogSink> log_;
  ConnTarget<std::string> target_;
  std::uint64_t target_seen_ = 0;  // as conn_
  struct Conn;                     // the connection (storage/ keeps pqxx out of its headers)
  std::unique_ptr<Conn> conn_;     // touched by one thread at a time (the thread, or RunOnce's caller)
  bool failing_ = false;           // as conn_

  mutable Mutex mu_;
  EpochSwitcherStats stats_ ABSL_GUARDED_BY(mu_);
  BackgroundLoop loop_;  // last: stopped (joined) before the members its passes use go away
};

}  // namespace scangate::storage
