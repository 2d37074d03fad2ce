// core/time_format.h: RFC 3339 UTC with six fraction digits, for known instants, before the epoch, and
// against the system clock's round trip.
#include "core/time_format.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <random>
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

// An independent oracle from the C library: gmtime_r, the year zero-padded to four digits as RFC 3339
// wants (strftime's %Y does not pad), strftime for the rest, and the fraction appended.
std::string Reference(std::int64_t us) {
  const std::int64_t frac = ((us % 1'000'000) + 1'000'000) % 1'000'000;  // floor: never negative
  const auto t = static_cast<std::time_t>((us - frac) / 1'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char year[16];
  std::snprintf(year, sizeof year, "%04d", tm.tm_year + 1900);
  char rest[32];
  std::strftime(rest, sizeof rest, "-%m-%dT%H:%M:%S.", &tm);
  return std::string(year) + rest + std::to_string(1'000'000 + frac).substr(1) + "Z";
}

// Every instant from year 0001 to 9999 formats as gmtime_r + snprintf do: 200 000 random ones, and each side
// of the days where calendars go wrong (month ends, leap days of 1900 / 2000 / 2100, year ends).
TEST(TimeFormat, AgreesWithTheCLibrary) {
  constexpr std::int64_t kFirst = -62'135'596'800'000'000;  // 0001-01-01T00:00:00Z
  constexpr std::int64_t kLast = 253'402'300'799'999'999;   // 9999-12-31T23:59:59.999999Z
  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<std::int64_t> any(kFirst, kLast);
  for (int i = 0; i < 200'000; ++i) {
    const std::int64_t us = any(rng);
    ASSERT_EQ(Rfc3339Micros(us), Reference(us)) << us;
  }
  for (std::int64_t day = -719'162; day <= 2'932'896; day += 1) {  // 0001-01-01 .. 9999-12-31, every day
    const std::int64_t us = day * 86'400'000'000;
    if (day % 97 != 0 && day % 365 > 2 && day % 365 < 362 && (day + 1) % 30 > 2) continue;  // a sample
    ASSERT_EQ(Rfc3339Micros(us - 1), Reference(us - 1)) << us;
    ASSERT_EQ(Rfc3339Micros(us), Reference(us)) << us;
  }
  for (const char* want : {"1900-02-28T23:59:59.999999Z", "2000-02-29T12:00:00.000001Z", "2100-03-01T00:00:00.000000Z"}) {
    std::tm tm{};
    ASSERT_NE(strptime(want, "%Y-%m-%dT%H:%M:%S", &tm), nullptr);
    const std::int64_t secs = timegm(&tm);
    const std::int64_t us = secs * 1'000'000 + std::stoll(std::string(want + 20, 6));
    EXPECT_EQ(Rfc3339Micros(us), want);
  }
  // Outside 0000..9999 the C library's form is kept.
  EXPECT_EQ(Rfc3339Micros(kLast + 1), Reference(kLast + 1));
}

// The time_point overload agrees with the microsecond one and has the log line's shape.
TEST(TimeFormat, TimePointOverload) {
  const auto now = std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  EXPECT_EQ(Rfc3339Micros(now), Rfc3339Micros(us));
  EXPECT_TRUE(std::regex_match(Rfc3339Micros(now), std::regex(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$)")));
}

// TimeText: the same text inline, whatever the instant (the C library's form of any int64 fits its capacity); it
// compares and prints as its text; a longer text is refused rather than cut.
TEST(TimeFormat, TimeTextHoldsEveryInstantsText) {
  for (const std::int64_t us : {std::int64_t{0}, std::int64_t{1798761599999999}, std::int64_t{-1},
                                std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
    const TimeText t = Rfc3339MicrosText(us);
    EXPECT_EQ(t.view(), Rfc3339Micros(us)) << us;
    EXPECT_LE(t.size(), TimeText::kCapacity) << us;
    EXPECT_FALSE(t.empty());
  }
  const TimeText empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty, "");
  EXPECT_EQ(TimeText("2026-12-31T23:59:59.999999Z"), std::string("2026-12-31T23:59:59.999999Z"));
  EXPECT_FALSE(TimeText("2026-12-31T23:59:59.999999Z") == TimeText("2026-12-31T23:59:59.999998Z"));
  std::ostringstream os;
  os << TimeText("1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(os.str(), "1970-01-01T00:00:00.000000Z");
  EXPECT_THROW(TimeText(std::string(TimeText::kCapacity + 1, '9')), std::length_error);
  EXPECT_EQ(TimeText(std::string(TimeText::kCapacity, '9')).size(), TimeText::kCapacity);
}

}  // namespace
}  // namespace scangate
