#include "server/http/origin.h"

#include <algorithm>
#include <cctype>

#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

namespace scangate::server {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Drops ":80" from http://… and ":443" from https://… (a serialized Origin never carries a default port).
std::string ElideDefaultPort(std::string s) {
  auto strip = [&s](std::string_view scheme, std::string_view port) {
    if (s.starts_with(scheme) && s.ends_with(port) && s.size() > scheme.size() + port.size()) {
      s.resize(s.size() - port.size());
    }
  };
  strip("http://", ":80");
  strip("https://", ":443");
  return s;
}

}  // namespace

std::string NormalizeOrigin(std::string_view origin) { return ElideDefaultPort(Lower(origin)); }

std::string_view HostPart(std::string_view host) {
  if (host.starts_with('[')) {
    const auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const auto colon = host.find(':');
  return host.substr(0, colon);
}

bool IsAddressOrLocalhost(std::string_view host) {
  std::string h = Lower(HostPart(host));
  if (h == "localhost") return true;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  boost::system::error_code ec;
  boost::asio::ip::make_address(h, ec);
  return !ec;
}

bool HostListed(std::string_view host, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  const std::string h = Lower(host);
  const std::string_view name = HostPart(h);
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return a == h || a == name; });
}

std::string OwnOrigin(std::string_view host, bool tls) {
  return ElideDefaultPort((tls ? "https://" : "http://") + Lower(host));
}

}  // namespace scangate::server
