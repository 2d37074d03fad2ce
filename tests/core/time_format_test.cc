// core/time_format.h: RFC 3339 UTC with six fraction digits, for known instants, before the epoch, and
// against the system clock's round trip.
#include "core/time_format.h"

#include <chrono>
#include <regex>

#include <gtest/gtest.h>

namespace scangate {
namespace {

// Known instants: the epoch, a date with a leap day, the last microsecond of a year.
TEST(TimeFormat, KnownInstants) {
  EXPECT_EQ(Rfc3339Micros(std::int64_t{0}), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(Rfc3339Micros(std::int64_t{951782400123456}), "2000-02-29T00:00:00.123456Z");
  EXPECT_EQ(Rfc3339Micros(std::int64_t{1798761599999999}), "2026-12-31T23:59:59.999999Z");
}

// Before the epoch the fraction stays non-negative (floor division), so the string still sorts by time.
TEST(TimeFormat, BeforeTheEpoch) {
  EXPECT_EQ(Rfc3339Micros(std::int64_t{-1}), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(Rfc3339Micros(std::int64_t{-1'000'000}), "1969-12-31T23:59:59.000000Z");
}

// The time_point overload agrees with the microsecond one and has the log line's shape.
TEST(TimeFormat, TimePointOverload) {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  EXPECT_EQ(Rfc3339Micros(now), Rfc3339Micros(us));
  EXPECT_TRUE(std::regex_match(Rfc3339Micros(now), std::regex(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$)")));
}

}  // namespace
}  // namespace scangate
