#include "core/time_format.h"

#include <cstdio>
#include <ctime>

namespace scangate {

std::string Rfc3339Micros(std::int64_t us_since_epoch) {
  // Floor division, so times before the epoch keep a non-negative fraction.
  std::int64_t secs = us_since_epoch / 1'000'000;
  std::int64_t frac = us_since_epoch % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(frac));
  return buf;
}

std::optional<std::int64_t> ParseRfc3339Micros(std::string_view text) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (text.size() != kShape.size()) return std::nullopt;
  for (std::size_t i = 0; i < kShape.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) return std::nullopt;
  }
  const auto num = [text](std::size_t pos, std::size_t len) {
    int v = 0;
    for (std::size_t i = pos; i < pos + len; ++i) v = v * 10 + (text[i] - '0');
    return v;
  };
  const std::chrono::year_month_day date{std::chrono::year{num(0, 4)},
                                         std::chrono::month{static_cast<unsigned>(num(5, 2))},
                                         std::chrono::day{static_cast<unsigned>(num(8, 2))}};
  const int hh = num(11, 2), mm = num(14, 2), ss = num(17, 2);
  if (!date.ok() || hh > 23 || mm > 59 || ss > 59) return std::nullopt;
  const std::int64_t days = std::chrono::sys_days{date}.time_since_epoch().count();
  return ((days * 24 + hh) * 60 + mm) * 60'000'000LL + std::int64_t{ss} * 1'000'000 + num(20, 6);
}

std::string Rfc3339Micros(std::chrono::system_clock::time_point t) {
  return Rfc3339Micros(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

}  // namespace scangate
