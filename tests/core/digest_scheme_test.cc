// Tests core/digest_scheme.h: the fingerprint is HMAC-SHA256(secret, tag) (SHA-256 of the tag without a secret),
// computed independently with OpenSSL's one-shot HMAC(); it never contains the secret; each component changes it;
// CompareSchemes names the first component that differs.
#include "core/digest_scheme.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <string>

namespace scangate {
namespace {

Digest OneShotHmac(std::string_view key, std::string_view msg) {
  Digest out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out.data(), &len);
  EXPECT_EQ(len, 32u);
  return out;
}

// The tag is fixed text: a fingerprint recorded by one build is read by the next.
TEST(DigestScheme, TagIsItsDocumentedBytes) {
  EXPECT_EQ(SchemeTag("raw", "prefix16"), "scangate digest scheme v1|keys=raw|stored=prefix16");
  EXPECT_EQ(SchemeTag("gs1", kStoredForm), "scangate digest scheme v1|keys=gs1|stored=prefix16");
}

// Keyed: HMAC-SHA256(secret, tag); unkeyed: SHA-256(tag).
TEST(DigestScheme, FingerprintIsHmacOfTheTag) {
  const DigestScheme k = SchemeOf(Digester::HmacSha256("s1-secret"), "raw");
  EXPECT_TRUE(k.keyed);
  EXPECT_EQ(k.keys, "raw");
  EXPECT_EQ(k.stored, kStoredForm);
  EXPECT_EQ(k.fingerprint, OneShotHmac("s1-secret", SchemeTag("raw", kStoredForm)));
  const DigestScheme u = SchemeOf(Digester::Sha256(), "gs1");
  EXPECT_FALSE(u.keyed);
  const std::string tag = SchemeTag("gs1", kStoredForm);
  Digest sha{};
  SHA256(reinterpret_cast<const unsigned char*>(tag.data()), tag.size(), sha.data());
  EXPECT_EQ(u.fingerprint, sha);
}

// The secret's bytes appear nowhere in the fingerprint (nor its hex).
TEST(DigestScheme, FingerprintDoesNotHoldTheSecret) {
  const std::string secret = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
  const DigestScheme s = SchemeOf(Digester::HmacSha256(secret), "raw");
  const std::string bytes(s.fingerprint.begin(), s.fingerprint.end());
  EXPECT_EQ(bytes.find("AAAA"), std::string::npos);
  EXPECT_EQ(ToHex(s.fingerprint).find("4141"), std::string::npos);
}

// Each component changes the comparison's answer, in the documented order.
TEST(DigestScheme, CompareNamesTheComponent) {
  const DigestScheme s1 = SchemeOf(Digester::HmacSha256("s1"), "raw");
  const DigestScheme s2 = SchemeOf(Digester::HmacSha256("s2"), "raw");
  const DigestScheme none = SchemeOf(Digester::Sha256(), "raw");
  const DigestScheme gs1 = SchemeOf(Digester::HmacSha256("s1"), "gs1");
  DigestScheme other_stored = s1;
  other_stored.stored = "full32";
  EXPECT_EQ(CompareSchemes(s1, SchemeOf(Digester::HmacSha256("s1"), "raw")), SchemeDiff::kSame);
  EXPECT_EQ(CompareSchemes(s1, s2), SchemeDiff::kSecret);
  EXPECT_NE(s1.fingerprint, s2.fingerprint);
  EXPECT_EQ(CompareSchemes(s1, none), SchemeDiff::kSecretPresence);
  EXPECT_EQ(CompareSchemes(none, s1), SchemeDiff::kSecretPresence);
  EXPECT_EQ(CompareSchemes(s1, gs1), SchemeDiff::kKeys);
  EXPECT_NE(s1.fingerprint, gs1.fingerprint);
  EXPECT_EQ(CompareSchemes(s1, other_stored), SchemeDiff::kStored);
  EXPECT_EQ(SchemeDiffName(SchemeDiff::kSecret), "secret");
  EXPECT_EQ(SchemeDiffName(SchemeDiff::kKeys), "keys");
  EXPECT_EQ(SchemeDiffName(SchemeDiff::kStored), "stored");
  EXPECT_EQ(SchemeDiffName(SchemeDiff::kSecretPresence), "secret_presence");
}

// The fingerprint is not the digest of any key that could be observed under the raw scheme with the same tag bytes
// missing: a key's digest is the Digester of the key itself, the fingerprint that of the tag; equal only when a
// client sends the tag as its key, which reveals the fingerprint (public) and nothing of the secret.
TEST(DigestScheme, FingerprintIsTheDigesterOfTheTag) {
  const Digester d = Digester::HmacSha256("s1");
  EXPECT_EQ(SchemeOf(d, "raw").fingerprint, d(SchemeTag("raw", kStoredForm)));
  EXPECT_NE(SchemeOf(d, "raw").fingerprint, d("raw"));
}

}  // namespace
}  // namespace scangate
