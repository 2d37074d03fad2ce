// RFC 3339 UTC timestamps with microseconds, and ISO 8601 dates, ("2026-11-29T21:43:09.123456Z"): the one time format of
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
// The calendar date `days_since_epoch` days after 1970-01-01, as "YYYY-MM-DD" (a GS1 pack's expiry date).
std::string IsoDate(std::int32_t days_since_epoch);

}  // namespace scangate
