// Tests core/digest.h: SHA-256 and RFC 4231 HMAC-SHA256 known answers, hex round trips, argument checks.
#include "core/digest.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace scangate {
namespace {

std::string Hex(std::string_view bytes) {
  std::string s;
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    s += kHex[c >> 4];
    s += kHex[c & 0xf];
  }
  return s;
}

// FIPS 180-2 / NIST examples.
TEST(Digest, Sha256KnownAnswers) {
  const Digester sha = Digester::Sha256();
  EXPECT_FALSE(sha.keyed());
  EXPECT_EQ(ToHex(sha("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ToHex(sha("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(ToHex(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

// RFC 4231 test cases 1-4, 6, 7 (case 5 tests truncated output, which Digester never produces).
TEST(Digest, HmacSha256Rfc4231) {
  struct Case {
    std::string key, data, mac;
  };
  const std::vector<Case> cases = {
      {std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17"
                   "\x18\x19"),
       std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {std::string(131, '\xaa'),
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
       "hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Digester mac = Digester::HmacSha256(cases[i].key);
    EXPECT_TRUE(mac.keyed());
    EXPECT_EQ(ToHex(mac(cases[i].data)), cases[i].mac) << "RFC 4231 case index " << i << " key " << Hex(cases[i].key);
  }
}

// A secret changes the digest; the same secret gives the same digest; copies share state correctly.
TEST(Digest, HmacDiffersFromShaAndIsDeterministic) {
  const Digester sha = Digester::Sha256();
  const Digester a = Digester::HmacSha256("secret-a");
  const Digester b = Digester::HmacSha256("secret-b");
  const Digester a_copy = a;
  EXPECT_NE(sha("key"), a("key"));
  EXPECT_NE(a("key"), b("key"));
  EXPECT_EQ(a("key"), a_copy("key"));
  EXPECT_EQ(a("key"), Digester::HmacSha256("secret-a")("key"));
}

TEST(Digest, EmptySecretRejected) { EXPECT_THROW(Digester::HmacSha256(""), std::invalid_argument); }

// Concurrent use of one Digester gives the same answers as serial use.
TEST(Digest, ConcurrentUseIsConsistent) {
  const Digester mac = Digester::HmacSha256("k");
  const Digest want = mac("payload");
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      int good = 0;
      for (int i = 0; i < 200; ++i) good += mac("payload") == want;
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 200);
}

TEST(Digest, HexRoundTrip) {
  const Digest d = Digester::Sha256()("abc");
  const std::string hex = ToHex(d);
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(DigestFromHex(hex), d);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(DigestFromHex(upper), d);
}

TEST(Digest, HexRejectsMalformed) {
  const std::string hex = ToHex(Digester::Sha256()("abc"));
  EXPECT_FALSE(DigestFromHex(""));
  EXPECT_FALSE(DigestFromHex(hex.substr(0, 63)));
  EXPECT_FALSE(DigestFromHex(hex + "0"));
  std::string bad = hex;
  bad[10] = 'g';
  EXPECT_FALSE(DigestFromHex(bad));
  bad = hex;
  bad[0] = ' ';
  EXPECT_FALSE(DigestFromHex(bad));
}

}  // namespace
}  // namespace scangate
