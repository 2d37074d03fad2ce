// Unit tests of server/http/auth.h (tokens file parsing, constant-time verification) and the bearer-credential
// helpers of server/http/request.h. No sockets; the end-to-end behaviour is in tests/hardening/hardening_security_test.cc.
#include "server/http/auth.h"

#include <gtest/gtest.h>

#include "core/digest.h"
#include "server/http/request.h"

namespace scangate::server {
namespace {

std::string HashHex(std::string_view token) { return ToHex(Digester::Sha256()(token)); }

TEST(Auth, ParsesHashesCommentsAndBlankLines) {
  const std::string text = "# clients\n\n  " + HashHex("a") + "  \r\n" + HashHex("b") + "  -\n#end";
  auto r = ParseTokensFile(text);
  ASSERT_TRUE(std::holds_alternative<std::vector<Terminal>>(r)) << std::get<TokenFileError>(r).message;
  const auto& t = std::get<std::vector<Terminal>>(r);
  ASSERT_EQ(t.size(), 2u);
  // A hash-only line (the old format, or sha256sum's "<hash>  -"): the terminal id is the hash's first 12 chars.
  EXPECT_EQ(t[0].id, HashHex("a").substr(0, 12));
  EXPECT_EQ(t[1].id, HashHex("b").substr(0, 12));
  EXPECT_EQ(t[0].routes, kRouteBitObserve) << "least privilege: observe only by default (issue 33)";
}

// The new format: "<hash> <terminal-id> [routes]", blanks or tabs between fields.
TEST(Auth, ParsesTerminalsAndRoutes) {
  const std::string text = HashHex("a") + " till-01\n" + HashHex("b") + "\tPOS_2.east\tobserve,batch \n" +
                           HashHex("c") + " audit lookup\n" + HashHex("d") + " till-01 observe\n" + HashHex("e") +
                           " office audit,observe\n";
  auto r = ParseTokensFile(text);
  ASSERT_TRUE(std::holds_alternative<std::vector<Terminal>>(r)) << std::get<TokenFileError>(r).message;
  const auto& t = std::get<std::vector<Terminal>>(r);
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].id, "till-01");
  EXPECT_EQ(t[0].routes, kRouteBitObserve);
  EXPECT_EQ(t[1].id, "POS_2.east");
  EXPECT_EQ(t[1].routes, kRouteBitObserve | kRouteBitBatch);
  EXPECT_EQ(t[2].id, "audit");
  EXPECT_EQ(t[2].routes, kRouteBitLookup);
  EXPECT_EQ(t[3].id, "till-01");  // two tokens may name one terminal (rotation)
  EXPECT_EQ(t[4].routes, kRouteBitObserve | kRouteBitLookup | kRouteBitAudit) << "audit implies lookup";
  EXPECT_EQ(RouteBit(Route::kObserve), kRouteBitObserve);
  EXPECT_EQ(RouteBit(Route::kLookup), kRouteBitLookup);
  EXPECT_EQ(RouteBit(Route::kMetrics), 0);
}

TEST(Auth, RejectsMalformedLinesNamingThem) {
  auto line_of = [](const std::string& text) {
    auto r = ParseTokensFile(text);
    return std::holds_alternative<TokenFileError>(r) ? std::get<TokenFileError>(r).line : 0;
  };
  EXPECT_EQ(line_of("# c\n" + HashHex("a") + "\nnope\n"), 3u);
  EXPECT_EQ(line_of(HashHex("a").substr(1) + "\n"), 1u);                    // 63 chars
  std::string upper = HashHex("a");
  upper[10] = 'A';
  EXPECT_EQ(line_of("\n" + upper), 2u);                                     // upper case
  EXPECT_EQ(line_of(""), 1u);                                               // no hash at all
  EXPECT_EQ(line_of("# only a comment\n\n"), 2u);
  EXPECT_EQ(line_of(HashHex("a") + " till/1\n"), 1u);                       // bad id character
  EXPECT_EQ(line_of(HashHex("a") + " " + std::string(65, 'x') + "\n"), 1u);  // id too long
  EXPECT_EQ(line_of(HashHex("a") + " " + std::string(64, 'x') + "\n"), 0u);  // 64 is fine
  EXPECT_EQ(line_of(HashHex("a") + " t1 observe,admin\n"), 1u);             // unknown route
  EXPECT_EQ(line_of(HashHex("a") + " t1 observe,\n"), 1u);                  // empty route name
  EXPECT_EQ(line_of(HashHex("a") + " t1 observe extra\n"), 1u);             // a fourth field
  EXPECT_EQ(line_of(HashHex("a") + " t1\n" + HashHex("a") + " t2\n"), 2u);  // a hash twice: ambiguous
}

// Error messages never quote a hash (they end up in logs).
TEST(Auth, ErrorsNeverQuoteTheHash) {
  const std::string hex = HashHex("a");
  for (const std::string& text : {hex + " bad/id", hex + " t1 nope", hex + "\n" + hex, hex + " t1 observe x"}) {
    auto r = ParseTokensFile(text);
    ASSERT_TRUE(std::holds_alternative<TokenFileError>(r)) << text;
    const std::string& m = std::get<TokenFileError>(r).message;
    EXPECT_EQ(m.find(hex.substr(0, 12)), std::string::npos) << m;
  }
}

TEST(Auth, VerifiesOnlyListedTokensAndNamesTheTerminal) {
  auto r = ParseTokensFile(HashHex("first") + " t-first\n" + HashHex("second") + " t-second\n" + HashHex("third"));
  ASSERT_TRUE(std::holds_alternative<std::vector<Terminal>>(r));
  TokenVerifier v(std::get<std::vector<Terminal>>(r));
  EXPECT_TRUE(v.enabled());
  ASSERT_EQ(v.Verify("first"), std::optional<std::size_t>(0));
  ASSERT_EQ(v.Verify("second"), std::optional<std::size_t>(1));
  ASSERT_EQ(v.Verify("third"), std::optional<std::size_t>(2));
  EXPECT_EQ(v.terminal(*v.Verify("second")).id, "t-second");
  EXPECT_EQ(v.terminal(*v.Verify("third")).id, HashHex("third").substr(0, 12));
  EXPECT_FALSE(v.Verify("fourth"));
  EXPECT_FALSE(v.Verify(""));
  EXPECT_FALSE(v.Verify(HashHex("first")));  // the hash itself is not a token
  EXPECT_FALSE(TokenVerifier().enabled());
}

TEST(Auth, BearerCredentials) {
  EXPECT_EQ(BearerToken("Bearer abc"), std::optional<std::string_view>("abc"));
  EXPECT_EQ(BearerToken("bearer   a.b-c_d~e+f/g=="), std::optional<std::string_view>("a.b-c_d~e+f/g=="));
  EXPECT_FALSE(BearerToken(""));
  EXPECT_FALSE(BearerToken("Bearer"));
  EXPECT_FALSE(BearerToken("Bearer "));
  EXPECT_FALSE(BearerToken("Bearerabc"));
  EXPECT_FALSE(BearerToken("Basic dXNlcjpwYXNz"));
  EXPECT_FALSE(BearerToken("Bearer a b"));
  EXPECT_FALSE(BearerToken("Bearer =abc"));
  EXPECT_FALSE(BearerToken("Bearer " + std::string(kMaxBearerTokenBytes + 1, 'a')));
  EXPECT_EQ(WwwAuthenticate(false), R"(Bearer realm="scangate")");
  EXPECT_EQ(WwwAuthenticate(true), R"(Bearer realm="scangate", error="invalid_token")");
  const Problem p = Problem::Unauthorized(true);
  EXPECT_EQ(p.status, 401u);
  EXPECT_EQ(p.slug, "unauthorized");
}

}  // namespace
}  // namespace scangate::server
