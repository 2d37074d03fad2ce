// RFC 3339 UTC timestamps with microseconds ("2026-11-29T21:43:09.123456Z"), and ISO 8601 dates: the one time
// format of scangate's log lines, its answers' first_seen and its journal, as a std::string or inline (TimeText).
// Pure functions; safe to call from any thread. (Timestamps PostgreSQL renders itself come from its own to_char;
// this is the C++ side.)
#pragma once

#include <array>
#include <compare>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace scangate {

// One RFC 3339 timestamp as a value: the text inline (no allocation), for results that cross threads by copy
// (storage::Result::first_seen — a heap string there cost two allocations per stored key, issue 44). Reads as a
// std::string_view; empty = no time. Holds up to kCapacity bytes (the format is 27; a year outside 0000..9999
// takes a few more); a longer text throws std::length_error.
class TimeText {
 public:
  static constexpr std::size_t kCapacity = 39;
  TimeText() = default;
  TimeText(std::string_view text);  // NOLINT(google-explicit-constructor): a string's stand-in
  TimeText(const char* text) : TimeText(std::string_view(text)) {}  // NOLINT(google-explicit-constructor)
  TimeText(const std::string& text) : TimeText(std::string_view(text)) {}  // NOLINT(google-explicit-constructor)

  std::string_view view() const { return {buf_.data(), len_}; }
  operator std::string_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  std::string str() const { return std::string(view()); }
  bool empty() const { return len_ == 0; }
  std::size_t size() const { return len_; }

  friend bool operator==(const TimeText& a, const TimeText& b) { return a.view() == b.view(); }
  friend bool operator==(const TimeText& a, std::string_view b) { return a.view() == b; }
  friend bool operator==(const TimeText& a, const std::string& b) { return a.view() == b; }
  friend bool operator==(const TimeText& a, const char* b) { return a.view() == b; }
  friend auto operator<=>(const TimeText& a, const TimeText& b) { return a.view() <=> b.view(); }
  friend auto operator<=>(const TimeText& a, std::string_view b) { return a.view() <=> b; }
  friend auto operator<=>(const TimeText& a, const std::string& b) { return a.view() <=> std::string_view(b); }
  friend auto operator<=>(const TimeText& a, const char* b) { return a.view() <=> std::string_view(b); }
  friend std::ostream& operator<<(std::ostream& os, const TimeText& t) { return os << t.view(); }

 private:
  std::array<char, kCapacity> buf_{};
  std::uint8_t len_ = 0;
};

// `us_since_epoch` microseconds after 1970-01-01T00:00:00Z, as RFC 3339 UTC with six fraction digits.
std::string Rfc3339Micros(std::int64_t us_since_epoch);
// The same text, inline.
TimeText Rfc3339MicrosText(std::int64_t us_since_epoch);
std::string Rfc3339Micros(std::chrono::system_clock::time_point t);
// The calendar date `days_since_epoch` days after 1970-01-01, as "YYYY-MM-DD" (a GS1 pack's expiry date).
std::string IsoDate(std::int32_t days_since_epoch);

}  // namespace scangate
