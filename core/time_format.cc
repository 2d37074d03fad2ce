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

std::string Rfc3339Micros(std::chrono::system_clock::time_point t) {
  return Rfc3339Micros(std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count());
}

}  // namespace scangate
