// RFC 3339 UTC timestamps with microseconds ("2026-11-29T21:43:09.123456Z"): the one time format of
// scangate's log lines, its answers' first_seen and its journal. Pure functions; safe to call from any
// thread. (Timestamps PostgreSQL renders itself come from its own to_char; this is the C++ side.)
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace scangate {

// `us_since_epoch` microseconds after 1970-01-01T00:00:00Z, as RFC 3339 UTC with six fraction digits.
std::string Rfc3339Micros(std::int64_t us_since_epoch);
std::string Rfc3339Micros(std::chrono::system_clock::time_point t);
// The inverse of Rfc3339Micros: exactly "YYYY-MM-DDTHH:MM:SS.ffffffZ" (the form scangate and its PostgreSQL
// statements write) -> µs since the epoch; nullopt for anything else (other shapes, out-of-range fields).
std::optional<std::int64_t> ParseRfc3339Micros(std::string_view text);

}  // namespace scangate
