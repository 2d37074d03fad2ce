// ASCII helpers for HTTP tokens. EqualsIgnoringAsciiCase: equality of two views ignoring ASCII case, as HTTP
// compares its case-insensitive tokens (media types, the Bearer scheme, transfer codings, Expect), reading no byte
// outside either view. TrimOws: a view without its leading and trailing optional whitespace (RFC 9110 OWS: space,
// tab).
// Use it instead of beast::iequals: Boost 1.81's loop reads one byte past both views when they differ in case
// only (fuzz_request found it under ASan: tests/fuzz/regressions/content_type_case_at_buffer_end).
// Pure function, thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace scangate::server {

inline bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

inline std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace scangate::server
