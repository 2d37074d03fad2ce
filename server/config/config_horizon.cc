// --window and --retention: the filter's memory and the de-duplication horizon, parsed together because
// each defaults to the other and one bounds the other (server/config/config.h, ParseHorizon); --keys with
// --expiry-grace, a GS1 pack's own horizon (ParseKeys); and --epoch-max-age, the exact store's epochs' age bound.
#include <chrono>
#include <string>
#include <string_view>

#include "server/config/config.h"

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
  if (d < min) {
    throw ConfigError("--" + std::string(option) + ": must be at least " + std::to_string(min.count()) + "s, got '" +
                      std::string(text) + "'");
  }
  if (d > kMaxHorizon) {
    throw ConfigError("--" + std::string(option) + ": at most 36525d, got '" + std::string(text) + "'");
  }
  return std::chrono::duration_cast<std::chrono::seconds>(d);
}

// --expiry-grace's cap: 6 years, the record keeping of the US DSCSA (the longest of the rules packs are kept
// for); a longer grace only grows the table.
constexpr auto kMaxExpiryGrace = std::chrono::hours(24 * 2192);

}  // namespace

void ParseKeys(std::string_view keys, std::string_view grace, Config& c) {
  if (keys == "raw") c.keys = KeysMode::kRaw;
  else if (keys == "gs1") c.keys = KeysMode::kGs1;
  else throw ConfigError("--keys: expected raw or gs1, got '" + std::string(keys) + "'");
  const auto g = ParseDuration(grace, {"s", "m", "h", "d"}, "expiry-grace");
  if (g > kMaxExpiryGrace) {
    throw ConfigError("--expiry-grace: at most 2192d (6 years), got '" + std::string(grace) + "'");
  }
  c.expiry_grace = std::chrono::duration_cast<std::chrono::seconds>(g);
}

void ParseEpochMaxAge(std::string_view max_age, Config& c) {
  if (max_age == "off") {
    c.epoch_max_age = std::chrono::seconds(0);
    return;
  }
  // A minute at least: every switch is a catalog change every writer re-reads, and every epoch one more table.
  c.epoch_max_age = ParseSeconds(max_age, "epoch-max-age", std::chrono::minutes(1));
}

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
