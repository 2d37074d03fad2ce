// Structured logging: one JSON object per line on stderr, {"ts","level","event",...fields}, built with
// Boost.JSON so every value is escaped. Invariant: callers pass only digests, counts and configuration —
// never a raw key or a secret (no function here accepts a request body). Safe to call from any thread;
// a process-wide mutex around the write(2) keeps lines from different threads whole.
#pragma once

#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include "storage/log_sink.h"

namespace scangate::server {

enum class LogLevel { kInfo, kWarn, kError };

void Log(LogLevel level, std::string_view event, boost::json::object fields = {});

// storage/'s events (pg_state, commit_in_doubt, dead_letter, ...) through Log: pass as StoreOptions::log.
std::shared_ptr<storage::LogSink> StorageLogSink();

// RFC 3339 UTC timestamp with microseconds of the current wall-clock time.
std::string NowRfc3339();

}  // namespace scangate::server
