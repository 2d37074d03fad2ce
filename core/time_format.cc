#include "core/time_format.h"

#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace scangate {
namespace {

void Put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// Years outside 0000..9999 (never a scan's time; only a corrupt or hostile input could ask): the C library's
// conversion, whose %04d then prints the sign or the fifth digit as it always has.
TimeText SlowPath(std::int64_t secs, std::int64_t frac) {
  const auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(frac));
  return TimeText(std::string_view(buf));
}

}  // namespace

TimeText::TimeText(std::string_view text) {
  if (text.size() > kCapacity) throw std::length_error("TimeText: a timestamp longer than its capacity");
  text.copy(buf_.data(), text.size());
  len_ = static_cast<std::uint8_t>(text.size());
}

// Digits written in place (std::chrono's civil calendar for the date): every "duplicate" answer formats its
// first_seen, and gmtime_r + snprintf showed in the 50 %-repeat cell's profile (0.6 % of the server's CPU in
// __vfprintf_internal alone, issue 8). Measured 18.5 ns vs 156 ns per call
// (`bench/core/core_bench --benchmark_filter=Rfc3339`).
TimeText Rfc3339MicrosText(std::int64_t us_since_epoch) {
  // Floor division, so times before the epoch keep a non-negative fraction.
  std::int64_t secs = us_since_epoch / 1'000'000;
  std::int64_t frac = us_since_epoch % 1'000'000;
  if (frac < 0) {
    frac += 1'000'000;
    --secs;
  }
  std::int64_t days = secs / 86'400;
  std::int64_t sod = secs % 86'400;
  if (sod < 0) {
    sod += 86'400;
    --days;
  }
  // |days| <= 1.1e8 for any int64 of microseconds: fits the int of std::chrono::days.
  const std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{static_cast<int>(days)}}};
  const int year = static_cast<int>(ymd.year());
  if (year < 0 || year > 9999) return SlowPath(secs, frac);
  char out[27];  // YYYY-MM-DDTHH:MM:SS.ffffffZ
  char* p = out;
  Put2(p, static_cast<unsigned>(year / 100));
  Put2(p + 2, static_cast<unsigned>(year % 100));
  p[4] = '-';
  Put2(p + 5, static_cast<unsigned>(ymd.month()));
  p[7] = '-';
  Put2(p + 8, static_cast<unsigned>(ymd.day()));
  p[10] = 'T';
  Put2(p + 11, static_cast<unsigned>(sod / 3600));
  p[13] = ':';
  Put2(p + 14, static_cast<unsigned>(sod / 60 % 60));
  p[16] = ':';
  Put2(p + 17, static_cast<unsigned>(sod % 60));
  p[19] = '.';
  for (int i = 25; i >= 20; --i) {
    p[i] = static_cast<char>('0' + frac % 10);
    frac /= 10;
  }
  p[26] = 'Z';
  return TimeText(std::string_view(out, sizeof out));
}

std::string Rfc3339Micros(std::int64_t us_since_epoch) { return Rfc3339MicrosText(us_since_epoch).str(); }

std::string Rfc3339Micros(std::chrono::system_clock::time_point t) {
  return Rfc3339Micros(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

std::string IsoDate(std::int32_t days_since_epoch) {
  const std::chrono::year_month_day ymd{std::chrono::sys_days{std::chrono::days{days_since_epoch}}};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                static_cast<unsigned>(ymd.day()));
  return buf;
}

}  // namespace scangate
