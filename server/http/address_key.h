// Which client addresses count as one client for the per-address limits (connections per address, the rate limit
// with tokens off, failed authentication): an IPv4 address (or an IPv4-mapped IPv6 one) by its 4 bytes; a global
// IPv6 address by its first --ipv6-prefix-length bits (128 by default: each address is its own client); a
// link-local (fe80::/10) or unique local (fc00::/7) address always whole, whatever the setting. Why: on a shop LAN
// every till's SLAAC address shares one /64 and every link-local address shares fe80::/64, so a prefix key there
// would let one host's failures or connections lock out every till (issue 43); a prefix fits clients that reach
// scangate across the internet, where one end site holds (and may rotate through) a whole /64 or /56. No
// allocation. Pure; any thread. Use: server/http/http_server.cc (accept), session.cc (PROXY clients), router.cc.
#pragma once

#include <array>
#include <string_view>

#include <boost/asio/ip/address.hpp>

namespace scangate::server {

// --ipv6-prefix-length: its default and its range.
inline constexpr unsigned kDefaultIpv6PrefixBits = 128;
inline constexpr unsigned kMinIpv6PrefixBits = 32;

// A key's bytes: a family tag and up to 16 address bytes.
using AddressKeyBuffer = std::array<char, 17>;

// The key of `a` in `buf` (the view points into it). `ipv6_prefix_bits`: kMinIpv6PrefixBits..128.
std::string_view AddressKey(const boost::asio::ip::address& a, unsigned ipv6_prefix_bits, AddressKeyBuffer& buf);

}  // namespace scangate::server
