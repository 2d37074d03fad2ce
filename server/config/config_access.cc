// --tokens-file, --rate-limit and --rate-burst: who may call the client routes and how often (ParseAccess);
// --cors-origins, --allowed-hosts and protected mode (--listen=auto, --insecure): from where (ParseCorsOrigins,
// ParseAllowedHosts, ResolveListen). Kept apart from config.cc, which owns the option table (server/config/config.h).
#include <charconv>
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "server/config/config.h"
#include "server/http/proxy_protocol.h"
#include "server/http/token_store.h"

namespace scangate::server {
namespace {

// Above this a per-terminal limit protects nothing a single instance could serve anyway.
constexpr std::uint32_t kMaxRateLimit = 1'000'000;

std::uint32_t ParseRate(std::string_view text, const char* option, std::uint32_t min) {
  std::uint32_t v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < min || v > kMaxRateLimit) {
    throw ConfigError("--" + std::string(option) + ": expected an integer in " + std::to_string(min) + ".." +
                      std::to_string(kMaxRateLimit) + ", got '" + std::string(text) + "'");
  }
  return v;
}

// A comma-separated list option: its entries with surrounding blanks removed, lower-cased, empty ones dropped.
std::vector<std::string> LowerCaseList(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string e = list.substr(start, end - start);
    start = end + 1;
    e.erase(0, e.find_first_not_of(" \t"));
    e.erase(e.find_last_not_of(" \t") + 1);
    if (e.empty()) continue;
    for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.push_back(std::move(e));
  }
  return out;
}

bool IsLoopback(const std::string& address) {
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address(address, ec);
  return !ec && a.is_loopback();
}

}  // namespace

void ParseAccess(const std::string& tokens_file, std::string_view rate_limit, std::string_view rate_burst, Config& c) {
  c.tokens_file = tokens_file;
  if (!c.tokens_file.empty()) {
    try {
      c.terminals = LoadTokensFile(c.tokens_file);
    } catch (const std::runtime_error& e) {
      throw ConfigError(std::string("--tokens-file: ") + e.what());
    }
  }
  c.rate_limit = ParseRate(rate_limit, "rate-limit", 0);
  if (rate_burst == "rate") {
    c.rate_burst = c.rate_limit == 0 ? 0 : c.rate_limit;
  } else {
    c.rate_burst = ParseRate(rate_burst, "rate-burst", 1);
    if (c.rate_limit == 0) throw ConfigError("--rate-burst: needs --rate-limit (a rate above 0)");
  }
}

// --cors-origins: each entry an exact serialized origin "http(s)://host[:port]" (no path, no '*').
std::vector<std::string> ParseCorsOrigins(const std::string& list) {
  std::vector<std::string> out = LowerCaseList(list);
  for (const std::string& o : out) {
    const bool scheme_ok = o.rfind("http://", 0) == 0 || o.rfind("https://", 0) == 0;
    const std::size_t host = o.find("://") + 3;
    if (!scheme_ok || host >= o.size() || o.find_first_of("/?#*@ ", host) != std::string::npos) {
      throw ConfigError("--cors-origins: expected origins like https://pos.example.com or http://127.0.0.1:3000 "
                        "(scheme://host[:port], no path, no '*'), got '" + o + "'");
    }
  }
  return out;
}

// --allowed-hosts: each entry a host name or address as a Host header names it, optionally with ":port"
// ("pos-gw.shop.lan", "10.0.0.5:8080", "[fd00::5]"); lower-cased; no scheme, path, '*' or userinfo.
std::vector<std::string> ParseAllowedHosts(const std::string& list) {
  std::vector<std::string> out = LowerCaseList(list);
  for (const std::string& h : out) {
    if (h.find_first_of("/?#*@ \t") != std::string::npos || h.front() == ':') {
      throw ConfigError("--allowed-hosts: expected host names or addresses as a Host header names them, like "
                        "pos-gw.shop.lan or 10.0.0.5:8080 (no scheme, no path, no '*'), got '" + h + "'");
    }
  }
  return out;
}

// --proxy-protocol-from: each entry an IP address or a CIDR network (checked here: the server parses it again).
std::vector<std::string> ParseProxyProtocolFrom(const std::string& list) {
  std::vector<std::string> out = LowerCaseList(list);
  try {
    ParseProxySources(out);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("--proxy-protocol-from: expected IP addresses or CIDR networks of load balancers "
                                  "(e.g. 127.0.0.1,10.0.0.0/24): ") + e.what());
  }
  return out;
}

// Protected mode. Without both access control (--tokens-file, or client certificates: --tls-client-ca) and
// keyed digests (--digest-secret-file) anyone who reaches the port may record keys, read /lookup, /stats and
// /metrics, and brute-force short keys from their unkeyed SHA-256 digests: such a service stays on loopback
// unless --insecure says otherwise.
void ResolveListen(Config& c) {
  const bool authenticated = !c.tokens_file.empty() || c.mtls();
  const bool guarded = authenticated && !c.digest_secret_file.empty();
  c.listen_auto = c.listen == "auto";
  if (c.listen_auto) {
    c.listen = guarded || c.insecure ? "0.0.0.0" : "127.0.0.1";
  } else if (!guarded && !c.insecure && !IsLoopback(c.listen)) {
    std::string missing = authenticated ? "" : "--tokens-file (or --tls-client-ca)";
    if (c.digest_secret_file.empty()) missing += std::string(missing.empty() ? "" : " and ") + "--digest-secret-file";
    throw ConfigError("--listen=" + c.listen + ": refusing to serve a non-loopback address without " + missing +
                      " (protected mode: anyone on the network could record and look up keys). Set " + missing +
                      ", or --listen=127.0.0.1, or --insecure to accept that (docs/security.md 'Threat model')");
  }
  c.protected_mode = !guarded && !c.insecure && IsLoopback(c.listen);
}

}  // namespace scangate::server
