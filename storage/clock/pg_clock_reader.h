// PgClockReader: keeps one PgClock (pg_clock.h) fed — every interval, on a connection of its own, one
// `SELECT clock_timestamp()` timed against this host's monotonic clock, on a thread of its own until Stop(). Start()
// waits (2 s at most) for the first reading, so the instance's first answers already have bounds. A lost
// connection is retried every interval; meanwhile the bounds age (wider by PgClock::kRateError), never wrong.
// Retarget (a moved partition): the clock is forgotten at once and read at the new server.
// A step of the server's clock (PgClock::Record, issue 55) opens the database's next clock epoch (sql/016), is
// recorded with its size (sql/017: the horizon then ages rows by real time across it) and is logged (`pg_clock`
// state "stepped"); so is a step across a restart or a failover (the old server's clock against the new one's).
// Connection safety as the writers' (keepalives, tcp_user_timeout, connect_timeout) and a statement unanswered
// past kReadBound is given up (storage/pg/pg_exec.h); Stop() returns within a slice, or within connect_timeout
// per host address while a connection is being opened.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "storage/clock/pg_clock.h"
#include "storage/conn_target.h"
#include "storage/log_sink.h"
#include "storage/pg/conninfo.h"

namespace scangate::storage {

struct PgClockReaderOptions {
  std::string conninfo;
  std::string label;  // the partition's ("p0"), or "" for one database: in log lines
  ConnectionDefaults connection;  // application_name set inside
  std::chrono::milliseconds interval{1000};
  std::shared_ptr<LogSink> log;  // empty: StderrLogSink()
};

class PgClockReader {
 public:
  PgClockReader(PgClock& clock, PgClockReaderOptions options);
  ~PgClockReader();  // Stop()
  PgClockReader(const PgClockReader&) = delete;
  PgClockReader& operator=(const PgClockReader&) = delete;

  // Starts the thread and waits up to 2 s for its first reading (false when there was none: it goes on trying);
  // logs the server's offset from this host's clock. Call once.
  bool Start();
  void Stop();  // idempotent; any thread but the reader's
  void Retarget(std::string conninfo);  // any thread

 private:
  struct Session;
  bool ReadOnce(Session& s);  // one reading (connecting first when needed); false on failure (logged once)
  // PgClock::Record saw `step` in a reading of `epoch`: opens the next epoch (a step within one), records the
  // step's size for the epoch it led to (sql/017) and logs it.
  void OnStep(Session& s, const PgClockStep& step, std::int64_t epoch);
  void Run();

  PgClock& clock_;
  PgClockReaderOptions options_;
  ConnTarget<std::string> target_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<Session> session_;  // the reader's thread only
  std::string last_error_;            // the reader's thread only
  std::thread thread_;
};

}  // namespace scangate::storage
