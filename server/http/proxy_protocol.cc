#include "server/http/proxy_protocol.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

namespace scangate::server {

namespace {

namespace ip = boost::asio::ip;

constexpr char kSignature[12] = {'\r', '\n', '\r', '\n', '\0', '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};
constexpr unsigned kVersion2 = 0x2;
constexpr unsigned kCommandLocal = 0x0, kCommandProxy = 0x1;
constexpr unsigned kFamilyUnspec = 0x0, kFamilyInet = 0x1, kFamilyInet6 = 0x2, kFamilyUnix = 0x3;
constexpr unsigned kTransportStream = 0x1;
constexpr std::size_t kInetAddressBytes = 4 + 4 + 2 + 2;     // source, destination, source port, destination port
constexpr std::size_t kInet6AddressBytes = 16 + 16 + 2 + 2;

unsigned Byte(std::string_view s, std::size_t i) { return static_cast<unsigned char>(s[i]); }

}  // namespace

std::variant<std::size_t, std::string> ProxyV2Length(std::string_view fixed) {
  if (fixed.size() != kProxyV2FixedBytes) return std::string("PROXY v2 header: short read");
  if (std::memcmp(fixed.data(), kSignature, sizeof kSignature) != 0) {
    return std::string("no PROXY protocol v2 signature (the peer is listed in --proxy-protocol-from: its proxy "
                       "must send send-proxy-v2)");
  }
  if ((Byte(fixed, 12) >> 4) != kVersion2) return std::string("PROXY protocol: version is not 2");
  const std::size_t rest = (static_cast<std::size_t>(Byte(fixed, 14)) << 8) | Byte(fixed, 15);
  if (rest > kProxyV2MaxRestBytes) return std::string("PROXY v2 header: longer than this server accepts");
  return rest;
}

std::variant<std::optional<ip::address>, std::string> ParseProxyV2(std::string_view header) {
  if (header.size() < kProxyV2FixedBytes) return std::string("PROXY v2 header: short read");
  const auto length = ProxyV2Length(header.substr(0, kProxyV2FixedBytes));
  if (const auto* e = std::get_if<std::string>(&length)) return *e;
  if (header.size() != kProxyV2FixedBytes + std::get<std::size_t>(length)) {
    return std::string("PROXY v2 header: length does not match");
  }
  const unsigned command = Byte(header, 12) & 0x0F;
  const unsigned family = Byte(header, 13) >> 4;
  const unsigned transport = Byte(header, 13) & 0x0F;
  const std::string_view rest = header.substr(kProxyV2FixedBytes);
  if (command == kCommandLocal) return std::optional<ip::address>();  // the proxy's own connection (health check)
  if (command != kCommandProxy) return std::string("PROXY v2 header: unknown command");
  if (family == kFamilyUnspec || family == kFamilyUnix) return std::optional<ip::address>();
  if (transport != kTransportStream) return std::string("PROXY v2 header: not a TCP connection");
  if (family == kFamilyInet) {
    if (rest.size() < kInetAddressBytes) return std::string("PROXY v2 header: IPv4 addresses truncated");
    ip::address_v4::bytes_type b;
    std::copy_n(reinterpret_cast<const unsigned char*>(rest.data()), b.size(), b.begin());
    return std::optional<ip::address>(ip::address_v4(b));
  }
  if (family == kFamilyInet6) {
    if (rest.size() < kInet6AddressBytes) return std::string("PROXY v2 header: IPv6 addresses truncated");
    ip::address_v6::bytes_type b;
    std::copy_n(reinterpret_cast<const unsigned char*>(rest.data()), b.size(), b.begin());
    return std::optional<ip::address>(ip::address_v6(b));
  }
  return std::string("PROXY v2 header: unknown address family");
}

bool ProxySources::Contains(const ip::address& peer) const {
  ip::address a = peer;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = ip::make_address_v4(ip::v4_mapped, a.to_v6());
  if (a.is_v4()) {
    const ip::address_v4 v = a.to_v4();
    return std::any_of(v4.begin(), v4.end(), [&](const ip::network_v4& n) {
      return (v.to_uint() & n.netmask().to_uint()) == n.network().to_uint();
    });
  }
  const ip::address_v6 v = a.to_v6();
  return std::any_of(v6.begin(), v6.end(), [&](const ip::network_v6& n) {
    const auto bytes = v.to_bytes();
    const auto net = n.network().to_bytes();
    unsigned bits = n.prefix_length();
    for (std::size_t i = 0; i < bytes.size() && bits > 0; ++i, bits = bits >= 8 ? bits - 8 : 0) {
      const unsigned mask = bits >= 8 ? 0xFFu : (0xFFu << (8 - bits)) & 0xFFu;
      if ((bytes[i] & mask) != (net[i] & mask)) return false;
    }
    return true;
  });
}

std::vector<std::string> ProxySources::Networks() const {
  std::vector<std::string> out;
  for (const ip::network_v4& n : v4) {
    if (n.prefix_length() < 32) out.push_back(n.to_string());
  }
  for (const ip::network_v6& n : v6) {
    if (n.prefix_length() < 128) out.push_back(n.to_string());
  }
  return out;
}

ProxySources ParseProxySources(const std::vector<std::string>& entries) {
  ProxySources out;
  for (const std::string& e : entries) {
    boost::system::error_code ec;
    if (e.find('/') == std::string::npos) {
      const ip::address a = ip::make_address(e, ec);
      if (!ec && a.is_v4()) {
        out.v4.emplace_back(a.to_v4(), 32);
        continue;
      }
      if (!ec) {
        out.v6.emplace_back(a.to_v6(), 128);
        continue;
      }
    } else {
      const ip::network_v4 n4 = ip::make_network_v4(e, ec);
      if (!ec) {
        out.v4.push_back(n4.canonical());
        continue;
      }
      ec.clear();
      const ip::network_v6 n6 = ip::make_network_v6(e, ec);
      if (!ec) {
        out.v6.push_back(n6.canonical());
        continue;
      }
    }
    throw std::invalid_argument("'" + e + "' is not an IP address or a CIDR network");
  }
  return out;
}

}  // namespace scangate::server
