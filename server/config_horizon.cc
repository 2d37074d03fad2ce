// --window and --retention: the filter's memory and the de-duplication horizon, parsed together because
// each defaults to the other and one bounds the other (server/config.h, ParseHorizon).
#include <chrono>
#include <string>
#include <string_view>

#include "server/config.h"

namespace scangate::server {
namespace {

constexpr auto kMinWindow = std::chrono::seconds(1);
// A horizon below a second cannot be kept: PostgreSQL's and the hosts' clocks, the expiry's pass and the
// journal's times are all coarser than that in practice.
constexpr auto kMinRetention = std::chrono::seconds(1);
// 100 years: far past any use, and far from the µs overflow of the SQL that takes the horizon.
constexpr auto kMaxHorizon = std::chrono::hours(24 * 36525);

std::chrono::seconds ParseSeconds(std::string_view text, const char* option, std::chrono::seconds min) {
  const auto d = ParseDuration(text, {"s", "m", "h", "d"}, option);
  if (d < min) throw ConfigError("--" + std::string(option) + ": must be at least 1s, got '" + std::string(text) + "'");
  if (d > kMaxHorizon) {
    throw ConfigError("--" + std::string(option) + ": at most 36525d, got '" + std::string(text) + "'");
  }
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

}  // namespace

void ParseHorizon(std::string_view window, bool window_given, std::string_view retention, Config& c) {
  c.window = ParseSeconds(window, "window", kMinWindow);
  if (retention == "off") {
    c.retention = std::chrono::seconds(0);
    return;
  }
  if (retention == "window") {  // the default: the horizon is the filter's window
    c.retention = c.window;
    return;
  }
  c.retention = ParseSeconds(retention, "retention", kMinRetention);
  if (!window_given) {
    c.window = c.retention;
    return;
  }
  if (c.window < c.retention) {
    throw ConfigError("--window=" + std::string(window) + " is shorter than --retention=" + std::string(retention) +
                      ": the filter would forget keys PostgreSQL still counts as seen (with --ack=filter they would "
                      "be answered new again); set --window to at least the retention, or leave it out (it then "
                      "follows --retention)");
  }
}

}  // namespace scangate::server
