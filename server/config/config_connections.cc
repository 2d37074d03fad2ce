// The per-address limits and the admin listener's connections (ParseConnectionLimits): how many connections one
// client address may hold on each listener, which IPv6 addresses count as one client, how long an admin connection
// may idle, and the request bodies all connections may hold. Kept apart from config.cc, which owns the option
// table (server/config/config.h).
#include <chrono>
#include <cstdint>
#include <string>

#include "server/config/config.h"
#include "server/http/address_key.h"

namespace scangate::server {
namespace {

constexpr std::uint64_t kMaxPerAddress = 1'000'000;
// --admin-idle-timeout bounds: below 100 ms a probe's own connection could close between its connect and its
// request; above 10 min the timeout protects nothing.
constexpr auto kMinAdminIdle = std::chrono::milliseconds(100);
constexpr auto kMaxAdminIdle = std::chrono::minutes(10);

}  // namespace

void ParseConnectionLimits(const ConnectionFlags& f, Config& c) {
  c.max_connections_per_address =
      static_cast<std::uint32_t>(ParseInteger(f.max_per_address, "max-connections-per-address", 0, kMaxPerAddress));
  c.ipv6_prefix_length =
      static_cast<unsigned>(ParseInteger(f.ipv6_prefix_length, "ipv6-prefix-length", kMinIpv6PrefixBits, 128));
  c.admin_max_connections_per_address = static_cast<std::uint32_t>(
      ParseInteger(f.admin_max_per_address, "admin-max-connections-per-address", 0, kMaxPerAddress));
  const auto idle = ParseDuration(f.admin_idle_timeout, {"ms", "s", "m"}, "admin-idle-timeout");
  if (idle < kMinAdminIdle || idle > kMaxAdminIdle) {
    throw ConfigError("--admin-idle-timeout: must be in 100ms..10m, got '" + f.admin_idle_timeout + "'");
  }
  c.admin_idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(idle);
  c.max_body_bytes_in_flight = ParseInteger(f.max_body_bytes, "max-body-bytes-in-flight", 0, std::uint64_t{1} << 40);
}

}  // namespace scangate::server
