// Tests server/http/answer_body.h: the JSON bodies of verdicts, batches and lookups.
#include "server/http/answer_body.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace scangate::server {
namespace {
namespace json = boost::json;

// Verdict bodies carry the contract's fields; first_seen only for duplicates.
TEST(AnswerBody, VerdictBodies) {
  Verdict n{true, true, std::string(64, 'a'), ""};
  json::value v = json::parse(VerdictBody(n));
  EXPECT_EQ(v.at("verdict").as_string(), "new");
  EXPECT_EQ(v.at("via").as_string(), "filter");
  EXPECT_EQ(v.at("digest").as_string(), std::string(64, 'a'));
  EXPECT_EQ(v.as_object().if_contains("first_seen"), nullptr);
  Verdict d{false, false, std::string(64, 'b'), "2026-11-29T21:43:09.123456Z"};
  v = json::parse(VerdictBody(d));
  EXPECT_EQ(v.at("verdict").as_string(), "duplicate");
  EXPECT_EQ(v.at("via").as_string(), "exact");
  EXPECT_EQ(v.at("first_seen").as_string(), "2026-11-29T21:43:09.123456Z");
  const Verdict both[] = {n, d};
  v = json::parse(BatchBody(both));
  ASSERT_EQ(v.at("results").as_array().size(), 2u);
  EXPECT_EQ(v.at("results").as_array()[1].at("verdict").as_string(), "duplicate");
}

// The hand-written /observe body is byte-for-byte what Boost.JSON serializes for the same object (field
// order included), for every verdict/via combination, and text needing escapes is escaped.
TEST(AnswerBody, VerdictBodyMatchesBoostJson) {
  const auto expected = [](const Verdict& v) {
    json::object o;
    o["verdict"] = v.is_new ? "new" : "duplicate";
    o["digest"] = v.digest_hex;
    o["via"] = v.via_filter ? "filter" : "exact";
    if (!v.is_new) o["first_seen"] = v.first_seen;
    if (!v.is_new && v.mismatch != 0) {
      json::array m;
      if ((v.mismatch & kMismatchLot) != 0) m.emplace_back("lot");
      if ((v.mismatch & kMismatchExpiry) != 0) m.emplace_back("expiry");
      o["mismatch"] = std::move(m);
    }
    return json::serialize(o);
  };
  for (const bool is_new : {true, false}) {
    for (const bool via_filter : {true, false}) {
      for (const std::string& first_seen : {std::string("2026-11-29T21:43:09.123456Z"), std::string("a\"b\\c\n")}) {
        const Verdict v{is_new, via_filter, std::string(64, 'c'), is_new ? "" : first_seen};
        EXPECT_EQ(VerdictBody(v), expected(v)) << is_new << via_filter << first_seen;
      }
    }
  }
  // --keys=gs1 duplicates carry "mismatch" after first_seen; a `new` never does.
  for (const std::uint8_t m : {std::uint8_t{kMismatchLot}, std::uint8_t{kMismatchExpiry},
                               std::uint8_t{kMismatchLot | kMismatchExpiry}}) {
    const Verdict dup{false, false, std::string(64, 'd'), "2026-11-29T21:43:09.123456Z", m};
    EXPECT_EQ(VerdictBody(dup), expected(dup)) << int{m};
    EXPECT_NE(VerdictBody(dup).find("\"mismatch\":["), std::string::npos);
    const Verdict fresh{true, false, std::string(64, 'd'), "", m};
    EXPECT_EQ(VerdictBody(fresh).find("mismatch"), std::string::npos);
  }
  const Verdict odd{true, false, "x\"y\x01\xc3\xa9", ""};
  EXPECT_EQ(VerdictBody(odd), expected(odd));
  EXPECT_EQ(json::parse(VerdictBody(odd)).at("digest").as_string(), "x\"y\x01\xc3\xa9");
}

// A lookup body names the digest, its first_seen and its source (null when none was recorded).
TEST(AnswerBody, LookupBody) {
  const json::object o = json::parse(LookupBody("ab", "2026-11-30T10:00:00.000000Z", std::nullopt)).as_object();
  EXPECT_EQ(o.at("digest"), "ab");
  EXPECT_EQ(o.at("first_seen"), "2026-11-30T10:00:00.000000Z");
  EXPECT_TRUE(o.at("source").is_null());
  EXPECT_EQ(json::parse(LookupBody("ab", "t", std::string("s"))).at("source"), "s");
}

// --keys=gs1: the pack's record (expiry, whether a lot is held, its horizon) and the looked-up scan's mismatch.
TEST(AnswerBody, LookupBodyOfAPack) {
  PackRecord p{.expiry = "2027-12-31", .lot_recorded = true, .keep_until = "2029-01-01T00:00:00.000000Z",
               .mismatch = kMismatchExpiry};
  json::object o = json::parse(LookupBody("ab", "t", std::nullopt, p)).as_object();
  EXPECT_EQ(o.at("expiry"), "2027-12-31");
  EXPECT_EQ(o.at("lot_recorded"), true);
  EXPECT_EQ(o.at("keep_until"), "2029-01-01T00:00:00.000000Z");
  EXPECT_EQ(json::serialize(o.at("mismatch")), R"(["expiry"])");
  o = json::parse(LookupBody("ab", "t", std::nullopt, PackRecord{})).as_object();
  EXPECT_TRUE(o.at("expiry").is_null());
  EXPECT_EQ(o.at("lot_recorded"), false);
  EXPECT_TRUE(o.at("keep_until").is_null());
  EXPECT_FALSE(o.contains("mismatch"));
}

}  // namespace
}  // namespace scangate::server
