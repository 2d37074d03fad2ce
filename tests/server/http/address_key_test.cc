// Tests server/http/address_key.h: IPv4 and IPv4-mapped IPv6 addresses are one key; a global IPv6 address is keyed
// by --ipv6-prefix-length's bits (128 by default: each address; 64: its /64; a prefix that is not a whole number of
// bytes masks the last one); link-local and unique local addresses are keyed whole whatever the setting (issue
// 43: one host of a SLAAC shop LAN must not share its key with every till).
#include "server/http/address_key.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::server {
namespace {

std::string Key(const char* a, unsigned bits = kDefaultIpv6PrefixBits) {
  AddressKeyBuffer buf{};
  return std::string(AddressKey(boost::asio::ip::make_address(a), bits, buf));
}

TEST(AddressKey, Ipv4AndMappedAreOneKey) {
  EXPECT_EQ(Key("::ffff:192.0.2.7"), Key("192.0.2.7"));
  EXPECT_NE(Key("192.0.2.7"), Key("192.0.2.8"));
  EXPECT_EQ(Key("192.0.2.7").size(), 5u);
}

TEST(AddressKey, ByDefaultEveryIpv6AddressIsItsOwnClient) {
  EXPECT_NE(Key("2001:db8:1:2::1"), Key("2001:db8:1:2::2")) << "two tills of one SLAAC /64";
  EXPECT_EQ(Key("2001:db8:1:2::1"), Key("2001:db8:1:2::1"));
  EXPECT_EQ(Key("2001:db8::1").size(), 17u);
  EXPECT_NE(Key("fe80::1"), Key("fe80::2"));
  EXPECT_NE(Key("fd00:1::1"), Key("fd00:1::2"));
}

TEST(AddressKey, APrefixGroupsGlobalAddressesOnly) {
  EXPECT_EQ(Key("2001:db8:1:2::1", 64), Key("2001:db8:1:2:ffff:ffff:ffff:fffe", 64));
  EXPECT_NE(Key("2001:db8:1:2::1", 64), Key("2001:db8:1:3::1", 64));
  EXPECT_EQ(Key("2001:db8::1", 64).size(), 9u);
  // A prefix in the middle of a byte: /60 groups 2001:db8:1:20::/60 (the fourth group's last 4 bits free).
  EXPECT_EQ(Key("2001:db8:1:20::1", 60), Key("2001:db8:1:2f::1", 60));
  EXPECT_NE(Key("2001:db8:1:20::1", 60), Key("2001:db8:1:30::1", 60));
  // Link-local (fe80::/10, including fe80::/64 and febf::) and unique local (fc00::/7) stay whole.
  EXPECT_NE(Key("fe80::1", 64), Key("fe80::2", 64));
  EXPECT_NE(Key("febf::1", 48), Key("febf::2", 48));
  EXPECT_NE(Key("fd12:3456:789a:1::1", 64), Key("fd12:3456:789a:1::2", 64));
  EXPECT_NE(Key("fc00::1", 64), Key("fc00::2", 64));
  // fec0:: (deprecated site-local) is neither: a prefix applies.
  EXPECT_EQ(Key("fec0::1", 64), Key("fec0::2", 64));
}

}  // namespace
}  // namespace scangate::server
