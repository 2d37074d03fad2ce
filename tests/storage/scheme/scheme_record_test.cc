// Tests storage/scheme/scheme_record.h's decision table (DecideScheme, pure): record, match, refuse with the
// component named, rotation start and end, a second rotation too early, the previous secret still needed; and that
// no detail holds a secret.
#include "storage/scheme/scheme_record.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace scangate::storage {
namespace {

constexpr std::int64_t kNow = 1'800'000'000'000'000;  // µs
constexpr std::int64_t kHour = 3'600'000'000;

DigestScheme Keyed(const std::string& secret, const char* keys = "raw") {
  return SchemeOf(Digester::HmacSha256(secret), keys);
}
DigestScheme Plain(const char* keys = "raw") { return SchemeOf(Digester::Sha256(), keys); }

RecordedScheme Recorded(DigestScheme current, std::optional<DigestScheme> previous = std::nullopt,
                        std::int64_t needed_until = 0) {
  RecordedScheme r;
  r.current = std::move(current);
  r.previous = std::move(previous);
  if (r.previous) r.rotation_started_us = kNow - kHour;
  r.previous_needed_until_us = needed_until;
  return r;
}

LocalScheme Local(DigestScheme current, std::optional<DigestScheme> previous = std::nullopt) {
  return LocalScheme{std::move(current), std::move(previous)};
}

void ExpectRefused(const SchemeDecision& d, const std::string& component) {
  EXPECT_EQ(d.action, SchemeAction::kRefuse);
  EXPECT_EQ(d.component, component);
  EXPECT_FALSE(d.detail.empty());
  for (const char* secret : {"s1-secret", "s2-secret", "s3-secret"}) {
    EXPECT_EQ(d.detail.find(secret), std::string::npos) << d.detail;
  }
}

TEST(SchemeRecord, FirstInstanceRecords) {
  EXPECT_EQ(DecideScheme(std::nullopt, Local(Keyed("s1-secret")), kNow).action, SchemeAction::kRecord);
}

TEST(SchemeRecord, SameSchemeMatches) {
  const SchemeDecision d = DecideScheme(Recorded(Keyed("s1-secret")), Local(Keyed("s1-secret")), kNow);
  EXPECT_EQ(d.action, SchemeAction::kMatch);
  EXPECT_FALSE(d.previous_unneeded);
}

// The three-restart case and its siblings: each refused with the component that differs.
TEST(SchemeRecord, AnotherSchemeIsRefusedByComponent) {
  ExpectRefused(DecideScheme(Recorded(Keyed("s1-secret")), Local(Keyed("s2-secret")), kNow), "secret");
  ExpectRefused(DecideScheme(Recorded(Keyed("s1-secret")), Local(Plain()), kNow), "secret_presence");
  ExpectRefused(DecideScheme(Recorded(Plain()), Local(Keyed("s1-secret")), kNow), "secret_presence");
  ExpectRefused(DecideScheme(Recorded(Keyed("s1-secret", "raw")), Local(Keyed("s1-secret", "gs1")), kNow), "keys");
  DigestScheme other_stored = Keyed("s1-secret");
  other_stored.stored = "full32";
  ExpectRefused(DecideScheme(Recorded(other_stored), Local(Keyed("s1-secret")), kNow), "stored");
  // A previous secret does not rotate --keys.
  ExpectRefused(DecideScheme(Recorded(Keyed("s1-secret", "raw")),
                             Local(Keyed("s2-secret", "gs1"), Keyed("s1-secret", "gs1")), kNow),
                "keys");
}

TEST(SchemeRecord, RotationStartsWhenThePreviousIsTheDatabases) {
  EXPECT_EQ(DecideScheme(Recorded(Keyed("s1-secret")), Local(Keyed("s2-secret"), Keyed("s1-secret")), kNow).action,
            SchemeAction::kStartRotation);
  // From no secret to one.
  EXPECT_EQ(DecideScheme(Recorded(Plain()), Local(Keyed("s2-secret"), Plain()), kNow).action,
            SchemeAction::kStartRotation);
  // A previous secret that is not the database's current one: refused.
  ExpectRefused(DecideScheme(Recorded(Keyed("s1-secret")), Local(Keyed("s2-secret"), Keyed("s3-secret")), kNow),
                "secret");
}

TEST(SchemeRecord, DuringARotation) {
  const RecordedScheme r = Recorded(Keyed("s2-secret"), Keyed("s1-secret"), kNow + kHour);
  // Another instance with the same pair: matches.
  EXPECT_EQ(DecideScheme(r, Local(Keyed("s2-secret"), Keyed("s1-secret")), kNow).action, SchemeAction::kMatch);
  // The new secret alone: the keys recorded under s1 would be new to it.
  ExpectRefused(DecideScheme(r, Local(Keyed("s2-secret")), kNow), "previous_secret_missing");
  // The old secret alone: refused, and told which way the database rotated.
  const SchemeDecision old = DecideScheme(r, Local(Keyed("s1-secret")), kNow);
  ExpectRefused(old, "secret");
  EXPECT_NE(old.detail.find("rotated from this instance's digest secret"), std::string::npos) << old.detail;
  // Another previous secret: refused.
  ExpectRefused(DecideScheme(r, Local(Keyed("s2-secret"), Keyed("s3-secret")), kNow), "previous_secret");
  // A second rotation before the first's horizon passed.
  ExpectRefused(DecideScheme(r, Local(Keyed("s3-secret"), Keyed("s2-secret")), kNow), "rotation_in_progress");
}

TEST(SchemeRecord, RotationEndsOnceTheHorizonPassed) {
  const RecordedScheme r = Recorded(Keyed("s2-secret"), Keyed("s1-secret"), kNow - 1);
  EXPECT_EQ(DecideScheme(r, Local(Keyed("s2-secret")), kNow).action, SchemeAction::kEndRotation);
  EXPECT_EQ(DecideScheme(r, Local(Keyed("s3-secret"), Keyed("s2-secret")), kNow).action,
            SchemeAction::kStartRotation);
  // --retention=off: never.
  const RecordedScheme forever =
      Recorded(Keyed("s2-secret"), Keyed("s1-secret"), std::numeric_limits<std::int64_t>::max());
  ExpectRefused(DecideScheme(forever, Local(Keyed("s2-secret")), kNow), "previous_secret_missing");
  // A previous secret the database no longer needs: matches, and says so.
  const SchemeDecision d = DecideScheme(Recorded(Keyed("s2-secret")), Local(Keyed("s2-secret"), Keyed("s1-secret")),
                                        kNow);
  EXPECT_EQ(d.action, SchemeAction::kMatch);
  EXPECT_TRUE(d.previous_unneeded);
}

}  // namespace
}  // namespace scangate::storage
