// Origins and hosts as the Router compares them: a browser's Origin header normalised, scangate's own origin
// derived from a Host header, and the Host checks of --allowed-hosts (DNS rebinding). Invariant: comparisons are
// case-insensitive and ignore a default port exactly as a serialized Origin does. Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace scangate::server {

// The scheme://host[:port] of scangate itself as a browser would name it from a Host header; default
// ports (80 for http, 443 for https) are elided as in a serialized Origin. Lower case.
std::string OwnOrigin(std::string_view host, bool tls);
// `origin` (an Origin header value) with the default port elided and lower-cased, for comparison.
std::string NormalizeOrigin(std::string_view origin);
// The host of a Host header value without its port ("[v6]" kept bracketed).
std::string_view HostPart(std::string_view host);
// True when a Host value names an IP address or localhost: no DNS name an attacker could rebind.
bool IsAddressOrLocalhost(std::string_view host);
// True when `allowed` (--allowed-hosts) is empty or lists the Host value `host` as "host:port" or "host".
bool HostListed(std::string_view host, const std::vector<std::string>& allowed);

}  // namespace scangate::server
