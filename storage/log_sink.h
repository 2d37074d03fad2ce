// LogSink: how storage/ reports events (pg_state, dead_letter, commit_in_doubt, write_behind_lost) without
// owning a log format. The server implements it over server::Log, so the process has one log writer and
// one timestamp format; StoreOptions::log left empty means StderrLogSink (same JSON line format, for tests
// and tools). Invariant: storage passes only states, counts, digest hex and libpq's first error line —
// never a raw key or a secret. Implementations must be safe to call from any thread.
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

// One JSON object per line on stderr with an RFC 3339 UTC timestamp in microseconds, the format of
// server/log.h. Thread-safe (lines stay whole). The default when StoreOptions::log is empty.
std::shared_ptr<LogSink> StderrLogSink();

}  // namespace scangate::storage
