// Structured logging: one JSON object per line on stderr, {"ts","level","event",...fields}, built with
// Boost.JSON so every value is escaped — written by storage::WriteLogLine (storage/log_sink.h), the process's
// one line writer, which storage's own events use too. Invariant: callers pass only digests, counts and
// configuration — never a raw key or a secret (no function here accepts a request body). Safe to call from
// any thread; lines from different threads stay whole.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include <boost/json/object.hpp>

#include "storage/log_sink.h"

namespace scangate::server {

using LogLevel = storage::LogSeverity;  // kInfo, kWarn, kError

inline void Log(LogLevel level, std::string_view event, boost::json::object fields = {}) {
  storage::WriteLogLine(level, event, std::move(fields));
}

// storage/'s events (pg_state, commit_in_doubt, dead_letter, ...) into the same stream: pass as StoreOptions::log.
inline std::shared_ptr<storage::LogSink> StorageLogSink() { return storage::StderrLogSink(); }

}  // namespace scangate::server
