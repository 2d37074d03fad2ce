// The value parsers every server/config/*.cc shares (config.h): integers in a range and durations with units,
// each failing with a ConfigError that names its option and echoes the value (never a secret: secrets are files).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "server/config/config.h"

namespace scangate::server {

std::uint64_t ParseInteger(std::string_view text, std::string_view option, std::uint64_t min, std::uint64_t max) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < min || v > max) {
    throw ConfigError("--" + std::string(option) + ": expected an integer in " + std::to_string(min) + ".." +
                      std::to_string(max) + ", got '" + std::string(text) + "'");
  }
  return v;
}

std::chrono::nanoseconds ParseDuration(std::string_view text, const std::vector<std::string_view>& units,
                                       std::string_view option) {
  auto fail = [&]() -> ConfigError {
    std::string list;
    for (std::string_view u : units) list += (list.empty() ? "" : ", ") + std::string(u);
    return ConfigError("--" + std::string(option) + ": expected a duration like 90s with unit one of " + list +
                       ", got '" + std::string(text) + "'");
  };
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits == text.size()) throw fail();
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc() || p != text.data() + digits) throw fail();
  const std::string_view unit = text.substr(digits);
  if (std::find(units.begin(), units.end(), unit) == units.end()) throw fail();
  std::uint64_t ns_per_unit = 0;
  if (unit == "us") ns_per_unit = 1'000;
  else if (unit == "ms") ns_per_unit = 1'000'000;
  else if (unit == "s") ns_per_unit = 1'000'000'000;
  else if (unit == "m") ns_per_unit = 60ull * 1'000'000'000;
  else if (unit == "h") ns_per_unit = 3600ull * 1'000'000'000;
  else if (unit == "d") ns_per_unit = 86400ull * 1'000'000'000;
  else throw fail();
  constexpr auto kMaxNs = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (n > kMaxNs / ns_per_unit) throw fail();
  return std::chrono::nanoseconds(static_cast<std::int64_t>(n * ns_per_unit));
}

}  // namespace scangate::server
