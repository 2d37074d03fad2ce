// PROXY protocol version 2 (HAProxy's `send-proxy-v2`; the specification is haproxy.org's proxy-protocol.txt):
// the binary header a load balancer sends first on each connection to say which client it carries, so that
// scangate's per-address limits (connections, rate limit, failed authentication) see the till, not the proxy.
// Invariant: only peers listed in --proxy-protocol-from are asked for the header (a connection from one of them
// without a valid header is closed, never served as the proxy's own); any other peer cannot claim an address
// (its PROXY bytes are just bad HTTP: 400). Version 1 (text) is not accepted. Pure functions; any thread.
// Use: server/http/session.cc reads kProxyV2FixedBytes, asks ProxyV2Length, reads the rest, asks ParseProxyV2.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>

namespace scangate::server {

// The signature, version/command, family and length: what must be read before the length is known.
inline constexpr std::size_t kProxyV2FixedBytes = 16;
// The longest address block + TLVs accepted after it (HAProxy sends 12 or 36 bytes of addresses and, with
// options such as unique-id or SSL facts, a few hundred bytes of TLVs).
inline constexpr std::size_t kProxyV2MaxRestBytes = 1024;

// The bytes that follow the fixed part `fixed` (exactly kProxyV2FixedBytes), or why it is not a header this
// server accepts (a message for the log: never the bytes themselves).
std::variant<std::size_t, std::string> ProxyV2Length(std::string_view fixed);

// The client's address from a whole header (fixed part + the ProxyV2Length bytes): an address for a PROXY
// command over TCP/IPv4 or TCP/IPv6; nullopt for LOCAL (the proxy's own health check) or an unspecified/UNIX
// family (keep the connection's own address); or why the header is refused.
std::variant<std::optional<boost::asio::ip::address>, std::string> ParseProxyV2(std::string_view header);

// --proxy-protocol-from: the peers that must send the header, as networks (an address is its /32 or /128).
struct ProxySources {
  std::vector<boost::asio::ip::network_v4> v4;
  std::vector<boost::asio::ip::network_v6> v6;
  bool empty() const { return v4.empty() && v6.empty(); }
  // True when `peer` (an IPv4-mapped IPv6 address counts as its IPv4 one) is in one of the networks.
  bool Contains(const boost::asio::ip::address& peer) const;
  // The entries wider than one address ("10.0.0.0/24"): every host in them may name any client, so each is worth a
  // warning at start-up (list only the load balancers' own addresses).
  std::vector<std::string> Networks() const;
};

// Parses a comma-separated list of addresses and CIDR networks ("127.0.0.1,10.0.0.0/8,::1"); throws
// std::invalid_argument naming the entry that is neither.
ProxySources ParseProxySources(const std::vector<std::string>& entries);

}  // namespace scangate::server
