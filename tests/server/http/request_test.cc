// Tests server/http/request.h: /observe and /observe/batch validation (every 4xx case of
// the HTTP contract). Routes: route_test.cc; media types: content_type_test.cc; problem bodies: problem_test.cc; answer bodies: answer_body_test.cc.
#include "server/http/request.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace scangate::server {
namespace {
namespace json = boost::json;

// The problem of a rejected /observe body; fails the test if the body was accepted.
Problem ObserveProblem(std::string_view body) {
  auto r = ParseObserve(body);
  EXPECT_TRUE(std::holds_alternative<Problem>(r)) << "accepted: " << body;
  return std::holds_alternative<Problem>(r) ? std::get<Problem>(r) : Problem{};
}
Problem BatchProblem(std::string_view body) {
  auto r = ParseBatch(body);
  EXPECT_TRUE(std::holds_alternative<Problem>(r)) << "accepted: " << body;
  return std::holds_alternative<Problem>(r) ? std::get<Problem>(r) : Problem{};
}
Observation ObserveOk(std::string_view body) {
  auto r = ParseObserve(body);
  EXPECT_TRUE(std::holds_alternative<Observation>(r))
      << body << " -> " << (std::holds_alternative<Problem>(r) ? std::get<Problem>(r).detail : "");
  return std::holds_alternative<Observation>(r) ? std::get<Observation>(r) : Observation{};
}


// A valid body yields the key and source; unknown members are ignored; source is optional or null.
TEST(Request, ObserveValid) {
  Observation o = ObserveOk(R"({"key":"abc","source":"t9","extra":{"x":[1,2]}})");
  EXPECT_EQ(o.key, "abc");
  EXPECT_EQ(o.source, "t9");
  EXPECT_EQ(ObserveOk(R"({"key":"abc"})").source, "");
  EXPECT_EQ(ObserveOk(R"({"key":"abc","source":null})").source, "");
  EXPECT_EQ(ObserveOk(R"({"key":"caf\u00e9"})").key, "caf\xc3\xa9");
  EXPECT_EQ(ObserveOk("{\"key\":\"\xf0\x9f\x98\x80\"}").key, "\xf0\x9f\x98\x80");  // 4-byte UTF-8 is fine
  EXPECT_EQ(ObserveOk(" \n{\"key\" : \"k\"}\n").key, "k");
}

// Syntax errors, empty bodies, trailing garbage, comments and invalid UTF-8 are malformed-json.
TEST(Request, ObserveMalformedJson) {
  for (std::string_view body : {std::string_view(""), std::string_view("{"), std::string_view(R"({"key":)"),
                                std::string_view(R"({"key":"a"} x)"), std::string_view(R"({"key":"a",})"),
                                std::string_view("{\"key\":\"a\"} // c"), std::string_view("nul"),
                                std::string_view("{\"key\":\"\xff\"}"),          // invalid byte
                                std::string_view("{\"key\":\"\xc3\"}"),          // truncated sequence
                                std::string_view("{\"key\":\"\xc0\xaf\"}"),      // overlong encoding
                                std::string_view("{\"key\":\"\xed\xa0\x80\"}"),  // UTF-16 surrogate in UTF-8
                                std::string_view(R"({"key":"\ud800"})")}) {      // lone surrogate escape
    Problem p = ObserveProblem(body);
    EXPECT_EQ(p.status, 400u) << body;
    EXPECT_EQ(p.slug, "malformed-json") << body;
  }
}

// Nesting deeper than kMaxJsonDepth is rejected; depth 8 is accepted.
TEST(Request, ObserveDepthLimit) {
  std::string ok = R"({"key":"k","x":)" + std::string(7, '[') + "1" + std::string(7, ']') + "}";  // depth 8
  EXPECT_EQ(ObserveOk(ok).key, "k");
  std::string deep = R"({"key":"k","x":)" + std::string(8, '[') + "1" + std::string(8, ']') + "}";  // depth 9
  Problem p = ObserveProblem(deep);
  EXPECT_EQ(p.slug, "malformed-json");
  EXPECT_NE(p.detail.find("deeper"), std::string::npos);
  EXPECT_EQ(ObserveProblem(std::string(10000, '[')).slug, "malformed-json");
}

// Missing, mistyped, empty, over-long and NUL-containing keys are invalid-key.
TEST(Request, ObserveInvalidKey) {
  for (std::string_view body : {R"({})", R"({"source":"t"})", R"({"key":1})", R"({"key":null})",
                                R"({"key":["a"]})", R"({"key":{"k":"a"}})", R"({"key":true})", R"({"key":""})",
                                R"({"key":"a\u0000b"})", R"([])", R"("key")", R"(42)", R"(null)"}) {
    Problem p = ObserveProblem(body);
    EXPECT_EQ(p.status, 400u) << body;
    EXPECT_EQ(p.slug, "invalid-key") << body;
  }
  const std::string max_key(kMaxKeyBytes, 'k');
  EXPECT_EQ(ObserveOk(R"({"key":")" + max_key + "\"}").key, max_key);
  EXPECT_EQ(ObserveProblem(R"({"key":")" + max_key + "k\"}").slug, "invalid-key");
  // The limit is in bytes: 171 three-byte characters = 513 bytes.
  std::string wide;
  for (int i = 0; i < 171; ++i) wide += "\xe2\x82\xac";
  EXPECT_EQ(ObserveProblem(R"({"key":")" + wide + "\"}").slug, "invalid-key");
}

// Issue 33: a key not in Unicode NFC is invalid-key (one text, one key), in JSON, batch and form bodies; the
// composed spelling of the same text is accepted as it is (never rewritten).
TEST(Request, KeyMustBeNfc) {
  Problem p = ObserveProblem("{\"key\":\"cafe\xCC\x81\"}");  // e + U+0301
  EXPECT_EQ(p.slug, "invalid-key");
  EXPECT_NE(p.detail.find("NFC"), std::string::npos) << p.detail;
  EXPECT_EQ(ObserveProblem(R"({"key":"cafe\u0301"})").slug, "invalid-key") << "the same as a JSON escape";
  EXPECT_EQ(ObserveOk("{\"key\":\"caf\xC3\xA9\"}").key, "caf\xC3\xA9");
  auto batch = ParseBatch(R"({"keys":["ok-1","cafe\u0301"]})");
  ASSERT_TRUE(std::holds_alternative<Problem>(batch));
  EXPECT_EQ(std::get<Problem>(batch).slug, "invalid-key");
  EXPECT_NE(std::get<Problem>(batch).detail.find("keys[1]"), std::string::npos) << std::get<Problem>(batch).detail;
  auto form = ParseObservation("key=cafe%CC%81", "application/x-www-form-urlencoded");
  ASSERT_TRUE(std::holds_alternative<Problem>(form));
  EXPECT_EQ(std::get<Problem>(form).slug, "invalid-key");
}

// Mistyped, over-long (in characters) and NUL-containing sources are invalid-source.
TEST(Request, ObserveInvalidSource) {
  for (std::string_view body : {R"({"key":"k","source":1})", R"({"key":"k","source":["t"]})",
                                R"({"key":"k","source":{}})", R"({"key":"k","source":"a\u0000"})"}) {
    Problem p = ObserveProblem(body);
    EXPECT_EQ(p.slug, "invalid-source") << body;
  }
  const std::string max_src(kMaxSourceChars, 's');
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":")" + max_src + "\"}").source, max_src);
  EXPECT_EQ(ObserveProblem(R"({"key":"k","source":")" + max_src + "s\"}").slug, "invalid-source");
  // Characters, not bytes: 64 two-byte characters are fine, 65 are not.
  std::string wide;
  for (std::size_t i = 0; i < kMaxSourceChars; ++i) wide += "\xc3\xa9";
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":")" + wide + "\"}").source, wide);
  EXPECT_EQ(ObserveProblem(R"({"key":"k","source":")" + wide + "\xc3\xa9\"}").slug, "invalid-source");
}

// A batch mixes strings and objects, keeps order and repeated keys.
TEST(Request, BatchValid) {
  auto r = ParseBatch(R"({"keys":["a",{"key":"b","source":"t9"},"a",{"key":"c","zzz":1}],"other":0})");
  ASSERT_TRUE(std::holds_alternative<BatchRequest>(r));
  const auto& e = std::get<BatchRequest>(r).entries;
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].key, "a");
  EXPECT_EQ(e[1].key, "b");
  EXPECT_EQ(e[1].source, "t9");
  EXPECT_EQ(e[2].key, "a");
  EXPECT_EQ(e[3].key, "c");
  EXPECT_EQ(e[3].source, "");
}

// Batch size limits: 1..kMaxBatchEntries.
TEST(Request, BatchLimits) {
  auto make = [](std::size_t n) {
    std::string body = R"({"keys":[)";
    for (std::size_t i = 0; i < n; ++i) body += (i ? ",\"k" : "\"k") + std::to_string(i) + "\"";
    return body + "]}";
  };
  EXPECT_TRUE(std::holds_alternative<BatchRequest>(ParseBatch(make(1))));
  EXPECT_TRUE(std::holds_alternative<BatchRequest>(ParseBatch(make(kMaxBatchEntries))));
  EXPECT_EQ(BatchProblem(make(0)).slug, "invalid-batch");
  EXPECT_EQ(BatchProblem(make(kMaxBatchEntries + 1)).slug, "invalid-batch");
}

// Structural errors are invalid-batch; a bad entry rejects the batch and the detail names its index.
TEST(Request, BatchInvalid) {
  for (std::string_view body : {R"({})", R"({"keys":"a"})", R"({"keys":{"key":"a"}})", R"(["a"])",
                                R"({"keys":null})"}) {
    EXPECT_EQ(BatchProblem(body).slug, "invalid-batch") << body;
  }
  Problem p = BatchProblem(R"({"keys":["a","b",3]})");
  EXPECT_EQ(p.slug, "invalid-batch");
  EXPECT_NE(p.detail.find("keys[2]"), std::string::npos) << p.detail;
  p = BatchProblem(R"({"keys":["a",""]})");
  EXPECT_EQ(p.slug, "invalid-key");
  EXPECT_NE(p.detail.find("keys[1]"), std::string::npos) << p.detail;
  p = BatchProblem(R"({"keys":["a",{"source":"x"}]})");
  EXPECT_EQ(p.slug, "invalid-key");
  p = BatchProblem(R"({"keys":[{"key":"a","source":7}]})");
  EXPECT_EQ(p.slug, "invalid-source");
  EXPECT_NE(p.detail.find("keys[0]"), std::string::npos) << p.detail;
  EXPECT_EQ(BatchProblem(R"({"keys":["a\u0000"]})").slug, "invalid-key");
  EXPECT_EQ(BatchProblem(R"({"keys":[[[[[[[[["a"]]]]]]]]]})").slug, "malformed-json");
  EXPECT_EQ(BatchProblem("{\"keys\":[\"\xff\"]}").slug, "malformed-json");
}


}  // namespace
}  // namespace scangate::server

namespace scangate::server {
namespace {

Observation FormOk(std::string_view body) {
  auto r = ParseObserveForm(body);
  EXPECT_TRUE(std::holds_alternative<Observation>(r))
      << body << " -> " << (std::holds_alternative<Problem>(r) ? std::get<Problem>(r).detail : "");
  return std::holds_alternative<Observation>(r) ? std::get<Observation>(r) : Observation{};
}
std::string FormSlug(std::string_view body) {
  auto r = ParseObserveForm(body);
  EXPECT_TRUE(std::holds_alternative<Problem>(r)) << "accepted: " << body;
  return std::holds_alternative<Problem>(r) ? std::get<Problem>(r).slug : "";
}


// application/x-www-form-urlencoded: '+' is a space, %XX decoded, other names ignored.
TEST(Request, FormValid) {
  Observation o = FormOk("key=a+b%21%2B%26%3D&source=lane+3");
  EXPECT_EQ(o.key, "a b!+&=");
  EXPECT_EQ(o.source, "lane 3");
  o = FormOk("other=1&&key=%C3%A9t%C3%A9&");
  EXPECT_EQ(o.key, "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(o.source, "");
  o = FormOk("source=&key=x");
  EXPECT_EQ(o.key, "x");
  EXPECT_EQ(o.source, "");
  EXPECT_EQ(FormOk("key=" + std::string(kMaxKeyBytes, 'k')).key.size(), kMaxKeyBytes);
}

TEST(Request, FormInvalid) {
  EXPECT_EQ(FormSlug(""), "invalid-key");
  EXPECT_EQ(FormSlug("source=x"), "invalid-key");
  EXPECT_EQ(FormSlug("key="), "invalid-key");
  EXPECT_EQ(FormSlug("key"), "invalid-key");
  EXPECT_EQ(FormSlug("key=%00"), "invalid-key");
  EXPECT_EQ(FormSlug("key=" + std::string(kMaxKeyBytes + 1, 'k')), "invalid-key");
  EXPECT_EQ(FormSlug("key=a&source=" + std::string(kMaxSourceChars + 1, 's')), "invalid-source");
  EXPECT_EQ(FormSlug("key=%4"), "malformed-form");
  EXPECT_EQ(FormSlug("key=%"), "malformed-form");
  EXPECT_EQ(FormSlug("key=%zz"), "malformed-form");
  EXPECT_EQ(FormSlug("key=a&key=b"), "malformed-form");
  EXPECT_EQ(FormSlug("key=%FF"), "malformed-form");         // not UTF-8
  EXPECT_EQ(FormSlug("key=%C0%AF"), "malformed-form");      // overlong
  EXPECT_EQ(FormSlug("key=%ED%A0%80"), "malformed-form");   // surrogate
  EXPECT_EQ(FormSlug("key=%E2%82"), "malformed-form");      // truncated
}

// Under the form type a body starting with '{' (after whitespace) is JSON; under JSON types always JSON.
TEST(Request, ObservationByContentType) {
  constexpr std::string_view kForm = "application/x-www-form-urlencoded; charset=UTF-8";
  auto r = ParseObservation(" \n{\"key\":\"j\"}", kForm);
  ASSERT_TRUE(std::holds_alternative<Observation>(r));
  EXPECT_EQ(std::get<Observation>(r).key, "j");
  r = ParseObservation("key=f", kForm);
  ASSERT_TRUE(std::holds_alternative<Observation>(r));
  EXPECT_EQ(std::get<Observation>(r).key, "f");
  r = ParseObservation("key=f", "application/json");
  ASSERT_TRUE(std::holds_alternative<Problem>(r));
  EXPECT_EQ(std::get<Problem>(r).slug, "malformed-json");
  r = ParseObservation("key=f", "");
  ASSERT_TRUE(std::holds_alternative<Problem>(r));
}


// Issue 33: a source is shown to operators (/lookup, the dashboard, terminals): control characters (C0, DEL,
// C1: terminal escape sequences) and bidirectional formatting characters (Trojan Source) are refused, in JSON
// and form bodies alike; other non-ASCII text passes. The detail names the code point, never the source.
TEST(Request, SourceControlAndBidiRefused) {
  for (std::string_view body :
       {R"({"key":"k","source":"lane\u001b[31m3"})", R"({"key":"k","source":"a\u0009b"})", R"({"key":"k","source":"a\u000ab"})",
        R"({"key":"k","source":"a\u007fb"})", R"({"key":"k","source":"a\u0085b"})", R"({"key":"k","source":"a\u202eb"})",
        R"({"key":"k","source":"\u2066x"})", R"({"key":"k","source":"x\u200f"})", R"({"key":"k","source":"x\u061c"})"}) {
    const Problem p = ObserveProblem(body);
    EXPECT_EQ(p.slug, "invalid-source") << body;
    EXPECT_NE(p.detail.find("U+"), std::string::npos) << p.detail;
  }
  EXPECT_EQ(ObserveProblem(R"({"key":"k","source":"lane\u001b[31m3"})").detail.find("lane"), std::string::npos);
  EXPECT_EQ(FormSlug("key=k&source=a%1Bb"), "invalid-source");
  EXPECT_EQ(FormSlug("key=k&source=a%E2%80%AEb"), "invalid-source");
  EXPECT_EQ(BatchProblem(R"({"keys":[{"key":"k","source":"a\u202eb"}]})").slug, "invalid-source");
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":"Kasse 3 – Zürich ✓"})").source, "Kasse 3 – Zürich ✓");
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":"\u05e7\u05d5\u05e4\u05d4"})").source, "\u05e7\u05d5\u05e4\u05d4");
}

// Issue 43: the line and paragraph separators, zero-width and other invisible characters are refused like the
// controls and bidi formatting characters (format characters, Cf, and default-ignorable code points), the detail
// naming the code point; visible text and combining marks pass.
TEST(Request, SourceInvisibleCharactersRefused) {
  for (const char* cp : {"2028", "2029", "200b", "200c", "200d", "2060", "feff", "00ad", "180e", "3164", "fe0f",
                         "115f"}) {
    const Problem p = ObserveProblem(std::string(R"({"key":"k","source":"till)") + "\\u" + cp + "7\"}");
    EXPECT_EQ(p.slug, "invalid-source") << cp;
    std::string upper = cp;
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_NE(p.detail.find("U+" + upper), std::string::npos) << p.detail;
  }
  EXPECT_EQ(FormSlug("key=k&source=a%E2%80%A8b"), "invalid-source");
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":"Caf\u0065\u0301 1"})").source, "Cafe\u0301 1") << "a combining mark";
  EXPECT_EQ(ObserveOk(R"({"key":"k","source":"Kasse\u00a03"})").source, "Kasse\u00a03") << "a no-break space";
}

// Issue 33: a keyboard-wedge scanner's Enter (trailing CR, LF, CR LF) is not part of the key, in every body
// form; inner ones and other trailing whitespace are kept; a key of newlines only is empty.
TEST(Request, ScannerNewlineTrimmed) {
  EXPECT_EQ(ObserveOk(R"({"key":"0100361414030008\r\n"})").key, "0100361414030008");
  EXPECT_EQ(ObserveOk(R"({"key":"0100361414030008\n"})").key, "0100361414030008");
  EXPECT_EQ(ObserveOk(R"({"key":"0100361414030008\r"})").key, "0100361414030008");
  EXPECT_EQ(ObserveOk(R"({"key":"a\r\nb"})").key, "a\r\nb");
  EXPECT_EQ(ObserveOk(R"({"key":"a "})").key, "a ");
  EXPECT_EQ(ObserveProblem(R"({"key":"\r\n"})").slug, "invalid-key");
  EXPECT_EQ(FormOk("key=abc%0D%0A").key, "abc");
  auto r = ParseBatch(R"({"keys":["abc\n",{"key":"def\r\n"}]})");
  ASSERT_TRUE(std::holds_alternative<BatchRequest>(r));
  EXPECT_EQ(std::get<BatchRequest>(r).entries[0].key, "abc");
  EXPECT_EQ(std::get<BatchRequest>(r).entries[1].key, "def");
}

// Issue 33: a member named twice is refused (Boost.JSON would keep the last, HAProxy's json_query the first),
// at the top, in a batch entry, and after unescaping.
TEST(Request, DuplicateMembersRefused) {
  Problem p = ObserveProblem(R"({"key":"A","key":"B"})");
  EXPECT_EQ(p.slug, "duplicate-member");
  EXPECT_NE(p.detail.find("\"key\""), std::string::npos) << p.detail;
  EXPECT_EQ(ObserveProblem(R"({"key":"A","\u006bey":"B"})").slug, "duplicate-member");
  EXPECT_EQ(ObserveProblem(R"({"key":"A","source":"s","source":"t"})").slug, "duplicate-member");
  p = BatchProblem(R"({"keys":["a",{"key":"b","key":"c"}]})");
  EXPECT_EQ(p.slug, "duplicate-member");
  EXPECT_NE(p.detail.find("/keys/1"), std::string::npos) << p.detail;
  EXPECT_EQ(BatchProblem(R"({"keys":["a"],"keys":["b"]})").slug, "duplicate-member");
  auto r = ParseObservation(R"({"key":"A","key":"B"})", "application/x-www-form-urlencoded");
  ASSERT_TRUE(std::holds_alternative<Problem>(r));
  EXPECT_EQ(std::get<Problem>(r).slug, "duplicate-member");
  // Syntax errors keep their own problem.
  EXPECT_EQ(ObserveProblem(R"({"key":"A","key":})").slug, "malformed-json");
}

// Idempotency-Key (issue 34): 1..255 visible ASCII characters, bare or as the IETF draft's sf-string (spaces
// allowed inside the quotes); a batch entry's "request_id" is the same key, a string or null; a single
// observation's body member "request_id" is not read (the header is the single route's).
TEST(Request, IdempotencyKeys) {
  const auto ok = [](std::string_view h) {
    auto r = ParseIdempotencyKey(h);
    return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string("<refused>");
  };
  EXPECT_EQ(ok("8e03978e-40d5-43e8-bc93-6894a57f9324"), "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(ok("\"till 7 scan 42\""), "till 7 scan 42");
  EXPECT_EQ(ok(std::string(255, 'k')), std::string(255, 'k'));
  for (const std::string& bad : {std::string(), std::string("\"\""), std::string(256, 'k'), std::string("a b"),
                                 std::string("caf\xc3\xa9"), std::string("a\"b"), std::string("\"a\\b\""),
                                 std::string("tab\there")}) {
    auto r = ParseIdempotencyKey(bad);
    ASSERT_TRUE(std::holds_alternative<Problem>(r)) << bad;
    EXPECT_EQ(std::get<Problem>(r).slug, "invalid-idempotency-key") << bad;
    EXPECT_EQ(std::get<Problem>(r).status, 400u);
  }
  auto batch = ParseBatch(R"({"keys":[{"key":"a","request_id":"r-1"},{"key":"b","request_id":null},"c"]})");
  ASSERT_TRUE(std::holds_alternative<BatchRequest>(batch));
  EXPECT_EQ(std::get<BatchRequest>(batch).entries[0].idempotency_key, "r-1");
  EXPECT_EQ(std::get<BatchRequest>(batch).entries[1].idempotency_key, "");
  EXPECT_EQ(std::get<BatchRequest>(batch).entries[2].idempotency_key, "");
  Problem p = BatchProblem(R"({"keys":[{"key":"a","request_id":5}]})");
  EXPECT_EQ(p.slug, "invalid-idempotency-key");
  EXPECT_NE(p.detail.find("keys[0]"), std::string::npos) << p.detail;
  EXPECT_EQ(BatchProblem(R"({"keys":[{"key":"a","request_id":"x y"}]})").slug, "invalid-idempotency-key");
  EXPECT_EQ(BatchProblem(R"({"keys":[{"key":"a","request_id":"x","request_id":"y"}]})").slug, "duplicate-member");
  auto single = ParseObserve(R"({"key":"a","request_id":"r-1"})");
  ASSERT_TRUE(std::holds_alternative<Observation>(single));
  EXPECT_EQ(std::get<Observation>(single).idempotency_key, "");
}

}  // namespace
}  // namespace scangate::server
