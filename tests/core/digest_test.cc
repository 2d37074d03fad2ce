// Tests core/digest.h: SHA-256 and RFC 4231 HMAC-SHA256 known answers, agreement with OpenSSL one-shot
// SHA256/HMAC() over many key and message lengths, concurrent use, hex round trips, argument checks.
#include "core/digest.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdint>
#include <random>

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

// Reference digests straight from OpenSSL's one-shot APIs, independent of Digester's precomputed states.
Digest ReferenceHmac(std::string_view secret, std::string_view msg) {
  Digest out{};
  unsigned int len = 0;
  const unsigned char* r = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  EXPECT_NE(r, nullptr);
  EXPECT_EQ(len, out.size());
  return out;
}

Digest ReferenceSha256(std::string_view msg) {
  Digest out{};
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(msg.data(), msg.size(), out.data(), &len, EVP_sha256(), nullptr), 1);
  EXPECT_EQ(len, out.size());
  return out;
}

std::string RandomBytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Every key length 1..200 (covers < block, = 64-byte block, > block => hashed first) against messages of
// every length 0..300 (covers empty, one block, block boundaries 55/56/64, multi-block); random bytes incl. NUL.
TEST(Digest, HmacMatchesOpenSslOneShot) {
  std::mt19937_64 rng(20261129);
  constexpr std::size_t kMaxKeyBytes = 200;
  constexpr std::size_t kMaxMessageBytes = 300;
  std::size_t compared = 0;
  for (std::size_t key_len = 1; key_len <= kMaxKeyBytes; ++key_len) {
    const std::string secret = RandomBytes(rng, key_len);
    const Digester mac = Digester::HmacSha256(secret);
    // Each key sees 16 message lengths, and every message length 0..300 is seen by many keys.
    for (std::size_t j = 0; j < 16; ++j) {
      const std::size_t msg_len = (key_len * 16 + j * 19) % (kMaxMessageBytes + 1);
      const std::string msg = RandomBytes(rng, msg_len);
      ASSERT_EQ(ToHex(mac(msg)), ToHex(ReferenceHmac(secret, msg))) << "key_len " << key_len << " msg_len " << msg_len;
      ++compared;
    }
  }
  // Every message length 0..300 with keys straddling the block size.
  for (std::size_t key_len : {1u, 32u, 63u, 64u, 65u, 131u, 200u}) {
    const std::string secret = RandomBytes(rng, key_len);
    const Digester mac = Digester::HmacSha256(secret);
    for (std::size_t msg_len = 0; msg_len <= kMaxMessageBytes; ++msg_len) {
      const std::string msg = RandomBytes(rng, msg_len);
      ASSERT_EQ(ToHex(mac(msg)), ToHex(ReferenceHmac(secret, msg))) << "key_len " << key_len << " msg_len " << msg_len;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 200u * 16 + 7u * 301);
}

// Plain SHA-256 against OpenSSL's one-shot EVP_Digest for every message length 0..300.
TEST(Digest, Sha256MatchesOpenSslOneShot) {
  std::mt19937_64 rng(42);
  const Digester sha = Digester::Sha256();
  for (std::size_t msg_len = 0; msg_len <= 300; ++msg_len) {
    const std::string msg = RandomBytes(rng, msg_len);
    ASSERT_EQ(ToHex(sha(msg)), ToHex(ReferenceSha256(msg))) << "msg_len " << msg_len;
  }
}

// Several threads share one HMAC Digester (and one SHA-256 Digester and a copy of the HMAC one, so a thread's
// scratch context alternates between them); every result must equal the serially computed reference.
TEST(Digest, ConcurrentUseIsConsistent) {
  const std::string secret = "a shared secret that is used by every thread";
  const Digester mac = Digester::HmacSha256(secret);
  const Digester sha = Digester::Sha256();
  constexpr int kThreads = 6;
  constexpr int kMessages = 256;
  constexpr int kRounds = 8;
  std::mt19937_64 rng(7);
  std::vector<std::string> msgs;
  std::vector<Digest> want_mac, want_sha;
  for (int i = 0; i < kMessages; ++i) {
    msgs.push_back(RandomBytes(rng, rng() % 200));
    want_mac.push_back(ReferenceHmac(secret, msgs.back()));
    want_sha.push_back(ReferenceSha256(msgs.back()));
  }
  std::vector<int> mismatches(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Digester mac_copy = mac;  // copies share the precomputed states
      int bad = 0;
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kMessages; ++i) {
          const int m = (i * 7 + t * 31 + r) % kMessages;  // threads walk the messages in different orders
          bad += mac(msgs[m]) != want_mac[m];
          bad += sha(msgs[m]) != want_sha[m];
          bad += mac_copy(msgs[m]) != want_mac[m];
        }
      }
      mismatches[t] = bad;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// Moved-from-and-reassigned and copied Digesters keep working (server/ copies and moves them).
TEST(Digest, CopyAndMoveKeepState) {
  Digester a = Digester::HmacSha256("Jefe");
  Digester moved = std::move(a);
  a = Digester::Sha256();
  EXPECT_EQ(ToHex(moved("what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(moved.keyed());
  EXPECT_FALSE(a.keyed());
  EXPECT_EQ(ToHex(a("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Digester c = Digester::Sha256();
  c = moved;
  EXPECT_EQ(c("x"), moved("x"));
}

// The stored form keeps the first 16 bytes and zeroes the rest; it is idempotent (issue 45).
TEST(Digest, StoredFormKeepsTheFirst16Bytes) {
  const Digest d = Digester::Sha256()("abc");
  const Digest s = StoredDigest(d);
  EXPECT_EQ(ToHex(s), ToHex(d).substr(0, 32) + std::string(32, '0'));
  EXPECT_EQ(StoredDigest(s), s);
  static_assert(kStoredDigestBytes == 16);
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
