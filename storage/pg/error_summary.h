// ErrorSummary: the one-line, bounded form of a libpq/pqxx error message that storage/ puts into logs,
// StoreStats errors and exceptions (the writers, warm_load.cc). Invariant: only the first line is
// kept — DETAIL lines can quote row values, and a raw key or digest must never reach a log.
// Internal to storage/; not part of its API.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace scangate::storage {

inline constexpr std::size_t kMaxErrorChars = 300;  // pg_state log lines keep only the first line, truncated

// First line of a libpq/pqxx message, at most kMaxErrorChars characters.
inline std::string ErrorSummary(std::string_view what) {
  what = what.substr(0, what.find('\n'));
  if (what.size() > kMaxErrorChars) what = what.substr(0, kMaxErrorChars);
  return std::string(what);
}

}  // namespace scangate::storage
