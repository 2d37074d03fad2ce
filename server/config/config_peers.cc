// The peers' settings (issue 42, server/config/config.h ParsePeers): how long a key waits for the other instances'
// commit watermark to cover it (--peer-wait), and the one-shot retirement of an instance gone for good
// (--retire-instance).
#include <chrono>
#include <string>
#include <string_view>

#include "server/config/config.h"

namespace scangate::server {
namespace {
constexpr auto kMaxPeerWait = std::chrono::minutes(10);

bool WellFormedUuid(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    const char ch = id[i];
    if (dash != (ch == '-')) return false;
    if (!dash && !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'))) return false;
  }
  return true;
}
}  // namespace

void ParsePeers(std::string_view peer_wait, std::string_view retire_instance, Config& c) {
  // "0" alone (no unit) is the documented "503 at once", as --max-commit-lag's 0.
  const auto wait = peer_wait == "0" ? std::chrono::milliseconds(0)
                                     : ParseDuration(peer_wait, {"ms", "s", "m"}, "peer-wait");
  if (wait > kMaxPeerWait) throw ConfigError("--peer-wait: must be in 0..10m, got '" + std::string(peer_wait) + "'");
  c.peer_wait = std::chrono::duration_cast<std::chrono::milliseconds>(wait);
  if (!retire_instance.empty() && !WellFormedUuid(retire_instance)) {
    throw ConfigError("--retire-instance: expected an instance id (a UUID, as /stats \"peers\" and the log name it), "
                      "got '" + std::string(retire_instance) + "'");
  }
  c.retire_instance = std::string(retire_instance);
}

}  // namespace scangate::server
