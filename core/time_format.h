// RFC 3339 UTC timestamps with microseconds ("2026-11-29T21:43:09.123456Z"): the one time format of
// scangate's log lines, its answers' first_seen and its journal. Pure functions; safe to call from any
// thread. (Timestamps PostgreSQL renders itself come from its own to_char; this is the C++ side.)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace scangate {

// `us_since_epoch` microseconds after 1970-01-01T00:00:00Z, as RFC 3339 UTC with six fraction digits.
std::string Rfc3339Micros(std::int64_t us_since_epoch);
std::string Rfc3339Micros(std::chrono::system_clock::time_point t);

}  // namespace scangate
