// Unit tests of server/http/proxy_protocol.h: PROXY v2 headers as HAProxy's send-proxy-v2 writes them (TCP over
// IPv4 and IPv6, with TLVs after the addresses), LOCAL (health checks), refusals (no signature, version 1 text,
// other versions, commands, transports, truncated addresses, oversize lengths), and the --proxy-protocol-from
// networks.
#include "server/http/proxy_protocol.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace scangate::server {
namespace {

namespace ip = boost::asio::ip;

const std::string kSig("\r\n\r\n\0\r\nQUIT\n", 12);

// A v2 header: version/command byte, family/transport byte, then `rest` (its length is written big-endian).
std::string Header(unsigned char ver_cmd, unsigned char fam, const std::string& rest) {
  std::string h = kSig;
  h += static_cast<char>(ver_cmd);
  h += static_cast<char>(fam);
  h += static_cast<char>(rest.size() >> 8);
  h += static_cast<char>(rest.size() & 0xFF);
  return h + rest;
}

std::string Inet(const char* src, const char* dst) {
  const auto s = ip::make_address_v4(src).to_bytes(), d = ip::make_address_v4(dst).to_bytes();
  return std::string(s.begin(), s.end()) + std::string(d.begin(), d.end()) + std::string("\xC3\x50\x1F\x90", 4);
}

std::optional<ip::address> Client(const std::string& header) {
  const auto length = ProxyV2Length(header.substr(0, kProxyV2FixedBytes));
  EXPECT_TRUE(std::holds_alternative<std::size_t>(length));
  const auto r = ParseProxyV2(header);
  EXPECT_TRUE((std::holds_alternative<std::optional<ip::address>>(r))) << std::get<std::string>(r);
  return std::holds_alternative<std::string>(r) ? std::nullopt : std::get<std::optional<ip::address>>(r);
}

std::string Refusal(const std::string& header) {
  if (header.size() >= kProxyV2FixedBytes) {
    const auto length = ProxyV2Length(header.substr(0, kProxyV2FixedBytes));
    if (const auto* e = std::get_if<std::string>(&length)) return *e;
  }
  const auto r = ParseProxyV2(header);
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : "";
}

TEST(ProxyProtocol, TcpOverIpv4AndIpv6) {
  const std::string v4 = Header(0x21, 0x11, Inet("192.0.2.7", "10.0.0.1"));
  EXPECT_EQ(std::get<std::size_t>(ProxyV2Length(v4.substr(0, 16))), 12u);
  EXPECT_EQ(Client(v4), std::optional<ip::address>(ip::make_address("192.0.2.7")));
  const auto s6 = ip::make_address_v6("2001:db8::42").to_bytes(), d6 = ip::make_address_v6("2001:db8::1").to_bytes();
  const std::string v6 = Header(0x21, 0x21, std::string(s6.begin(), s6.end()) + std::string(d6.begin(), d6.end()) +
                                                std::string("\x01\xbb\x1f\x90", 4));
  EXPECT_EQ(Client(v6), std::optional<ip::address>(ip::make_address("2001:db8::42")));
  // TLVs after the addresses (HAProxy's unique-id, SSL facts...) are skipped.
  const std::string tlv = Header(0x21, 0x11, Inet("198.51.100.9", "10.0.0.1") + std::string("\x05\x00\x03" "abc", 6));
  EXPECT_EQ(Client(tlv), std::optional<ip::address>(ip::make_address("198.51.100.9")));
}

// LOCAL: the proxy's own connection (a health check); UNSPEC and UNIX families: keep the connection's address.
TEST(ProxyProtocol, LocalAndUnspecifiedKeepTheConnectionsAddress) {
  EXPECT_EQ(Client(Header(0x20, 0x00, "")), std::nullopt);
  EXPECT_EQ(Client(Header(0x20, 0x11, Inet("192.0.2.7", "10.0.0.1"))), std::nullopt) << "LOCAL ignores addresses";
  EXPECT_EQ(Client(Header(0x21, 0x00, "")), std::nullopt);
  EXPECT_EQ(Client(Header(0x21, 0x31, std::string(216, 'u'))), std::nullopt);
}

TEST(ProxyProtocol, RefusesWhatIsNotAV2TcpHeader) {
  EXPECT_NE(Refusal("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "");           // plain HTTP: no signature
  EXPECT_NE(Refusal("PROXY TCP4 192.0.2.7 10.0.0.1 50000 8080\r\n"), "");  // version 1 (text)
  EXPECT_NE(Refusal(Header(0x11, 0x11, Inet("192.0.2.7", "10.0.0.1"))), "");  // version 1 in a v2 frame
  EXPECT_NE(Refusal(Header(0x22, 0x11, Inet("192.0.2.7", "10.0.0.1"))), "");  // unknown command
  EXPECT_NE(Refusal(Header(0x21, 0x12, Inet("192.0.2.7", "10.0.0.1"))), "");  // UDP
  EXPECT_NE(Refusal(Header(0x21, 0x11, "\x01\x02\x03")), "");                // IPv4 addresses truncated
  EXPECT_NE(Refusal(Header(0x21, 0x21, std::string(20, '\0'))), "");        // IPv6 addresses truncated
  EXPECT_NE(Refusal(Header(0x21, 0x41, std::string(12, '\0'))), "");        // unknown family
  EXPECT_NE(Refusal(Header(0x21, 0x11, std::string(kProxyV2MaxRestBytes + 1, '\0'))), "");  // too long
  std::string mismatch = Header(0x21, 0x11, Inet("192.0.2.7", "10.0.0.1"));
  mismatch.pop_back();
  EXPECT_NE(Refusal(mismatch), "") << "a length that does not match the bytes";
  // A refusal never quotes the bytes it was sent.
  EXPECT_EQ(Refusal("GET /secret-key HTTP/1.1\r\n\r\n").find("secret"), std::string::npos);
}

TEST(ProxyProtocol, SourcesAreAddressesAndNetworks) {
  const ProxySources s = ParseProxySources({"127.0.0.1", "10.0.0.0/8", "fd00::/16", "::1"});
  EXPECT_TRUE(s.Contains(ip::make_address("127.0.0.1")));
  EXPECT_FALSE(s.Contains(ip::make_address("127.0.0.2")));
  EXPECT_TRUE(s.Contains(ip::make_address("10.20.30.40")));
  EXPECT_FALSE(s.Contains(ip::make_address("11.0.0.1")));
  EXPECT_TRUE(s.Contains(ip::make_address("::ffff:10.1.2.3"))) << "IPv4-mapped counts as IPv4";
  EXPECT_TRUE(s.Contains(ip::make_address("fd00:1234::5")));
  EXPECT_FALSE(s.Contains(ip::make_address("fd01::5")));
  EXPECT_TRUE(s.Contains(ip::make_address("::1")));
  EXPECT_FALSE(s.Contains(ip::make_address("::2")));
  EXPECT_TRUE(ParseProxySources({}).empty());
  EXPECT_TRUE(ParseProxySources({"10.1.2.3/8"}).Contains(ip::make_address("10.200.0.1"))) << "host bits dropped";
  EXPECT_THROW(ParseProxySources({"haproxy.lan"}), std::invalid_argument);
  EXPECT_THROW(ParseProxySources({"10.0.0.0/33"}), std::invalid_argument);
}

}  // namespace
}  // namespace scangate::server
