// LogSink: how storage/ reports events (pg_state, dead_letter, commit_in_doubt, write_behind_lost) without
// owning a log destination; WriteLogLine: the process's one JSON log line writer, which server::Log
// (server/log.h) and StderrLogSink both use, so every line has one format and one timestamp form.
// StoreOptions::log left empty means StderrLogSink (for tests and tools). Invariant: storage passes only
// states, counts, digest hex and libpq's first error line — never a raw key or a secret. Implementations
// must be safe to call from any thread.
#pragma once

#include <memory>
#include <string_view>

#include <boost/json/object.hpp>

namespace scangate::storage {

enum class LogSeverity { kInfo, kWarn, kError };

class LogSink {
 public:
  virtual ~LogSink() = default;
  // One event: {"ts", "level", "event", ...fields}. Called from writer threads; must not block for long.
  virtual void Write(LogSeverity severity, std::string_view event, boost::json::object fields) = 0;
};

// Writes {"ts", "level", "event", ...fields} as one JSON object on one line of stderr; ts is RFC 3339 UTC with
// microseconds, level "info" / "warn" / "error". Safe to call from any thread: a process-wide mutex around
// write(2) keeps lines whole even when a write is short.
void WriteLogLine(LogSeverity severity, std::string_view event, boost::json::object fields);

// A LogSink over WriteLogLine. Thread-safe. The default when StoreOptions::log is empty.
std::shared_ptr<LogSink> StderrLogSink();

}  // namespace scangate::storage
