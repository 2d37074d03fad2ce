// The follower's settings (issue 32, server/config/config.h ParseFollow): whether and how it follows, how stale a
// follower may be before its filter's definitely-new stops being a verdict (--follow-max-lag), and how long a key
// this instance answered `new` may wait for its commit — the time other instances cannot know it — before new
// keys are decided in PostgreSQL (--max-commit-lag).
#include <chrono>
#include <string>
#include <string_view>

#include "server/config/config.h"

namespace scangate::server {
namespace {
constexpr auto kMinLag = std::chrono::milliseconds(10);
constexpr auto kMaxLag = std::chrono::seconds(60);

std::chrono::milliseconds ParseLag(std::string_view text, const char* option, bool zero_allowed) {
  if (zero_allowed && text == "0") return std::chrono::milliseconds(0);
  const auto d = ParseDuration(text, {"ms", "s"}, option);
  if ((d == std::chrono::nanoseconds(0) && zero_allowed) || (d >= kMinLag && d <= kMaxLag)) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d);
  }
  throw ConfigError("--" + std::string(option) + ": must be in " + (zero_allowed ? "0 or " : "") + "10ms..60s, got '" +
                    std::string(text) + "'");
}
}  // namespace

void ParseFollow(std::string_view follow, std::string_view max_lag, std::string_view max_commit_lag, Config& c) {
  c.follow = follow != "off";
  if (follow == "poll" || follow == "on") {  // on: polling, the cheaper of the two (bench/RESULTS.md "Issue 32")
    c.follow_method = storage::FollowMethod::kPoll;
  } else if (follow == "logical") {
    c.follow_method = storage::FollowMethod::kLogical;
  } else if (follow != "off") {
    throw ConfigError("--follow: expected on, off, logical or poll, got '" + std::string(follow) + "'");
  }
  // --ack=commit follows only when named (`on`, the default, leaves it off there: it pays behind round robin only).
  c.follow_commit = c.ack == AckMode::kCommit && follow == "poll";
  if (c.ack == AckMode::kCommit && follow == "logical") {
    // The recent set needs each key's first_seen, which the publication (the digest column) does not carry.
    throw ConfigError("--follow: with --ack=commit only poll follows (the recent set needs first_seen)");
  }
  c.follow_max_lag = ParseLag(max_lag, "follow-max-lag", false);
  c.max_commit_lag = ParseLag(max_commit_lag, "max-commit-lag", true);
}

}  // namespace scangate::server
