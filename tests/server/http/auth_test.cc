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
  auto r = ParseTokenHashes(text);
  ASSERT_TRUE(std::holds_alternative<std::vector<TokenHash>>(r)) << std::get<TokenFileError>(r).message;
  EXPECT_EQ(std::get<std::vector<TokenHash>>(r).size(), 2u);
}

TEST(Auth, RejectsMalformedLinesNamingThem) {
  auto line_of = [](const std::string& text) {
    auto r = ParseTokenHashes(text);
    return std::holds_alternative<TokenFileError>(r) ? std::get<TokenFileError>(r).line : 0;
  };
  EXPECT_EQ(line_of("# c\n" + HashHex("a") + "\nnope\n"), 3u);
  EXPECT_EQ(line_of(HashHex("a").substr(1) + "\n"), 1u);                    // 63 chars
  std::string upper = HashHex("a");
  upper[10] = 'A';
  EXPECT_EQ(line_of("\n" + upper), 2u);                                     // upper case
  EXPECT_EQ(line_of(""), 1u);                                               // no hash at all
  EXPECT_EQ(line_of("# only a comment\n\n"), 2u);
}

TEST(Auth, VerifiesOnlyListedTokens) {
  auto r = ParseTokenHashes(HashHex("first") + "\n" + HashHex("second") + "\n");
  TokenVerifier v(std::get<std::vector<TokenHash>>(r));
  EXPECT_TRUE(v.enabled());
  EXPECT_TRUE(v.Verify("first"));
  EXPECT_TRUE(v.Verify("second"));
  EXPECT_FALSE(v.Verify("third"));
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
