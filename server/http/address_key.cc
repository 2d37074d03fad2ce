#include "server/http/address_key.h"

#include <algorithm>
#include <cstddef>

namespace scangate::server {

namespace {

// fe80::/10 (link-local: every host on the link shares fe80::/64) and fc00::/7 (unique local: a site's own
// prefix, shared by every host of the site).
bool SiteScoped(const boost::asio::ip::address_v6::bytes_type& b) {
  return (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || (b[0] & 0xfe) == 0xfc;
}

}  // namespace

std::string_view AddressKey(const boost::asio::ip::address& a, unsigned ipv6_prefix_bits, AddressKeyBuffer& buf) {
  boost::asio::ip::address_v4 v4;
  if (a.is_v4()) {
    v4 = a.to_v4();
  } else if (a.to_v6().is_v4_mapped()) {
    v4 = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  } else {
    const auto b = a.to_v6().to_bytes();
    const unsigned bits = SiteScoped(b) ? 128u : std::clamp(ipv6_prefix_bits, kMinIpv6PrefixBits, 128u);
    const std::size_t bytes = (bits + 7) / 8;
    buf[0] = '6';
    std::copy(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(bytes), buf.begin() + 1);
    if (bits % 8 != 0) buf[bytes] = static_cast<char>(b[bytes - 1] & (0xff << (8 - bits % 8)));
    return {buf.data(), 1 + bytes};
  }
  const auto b = v4.to_bytes();
  buf[0] = '4';
  std::copy(b.begin(), b.end(), buf.begin() + 1);
  return {buf.data(), 1 + b.size()};
}

}  // namespace scangate::server
