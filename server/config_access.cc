// --tokens-file, --rate-limit and --rate-burst: who may call the client routes and how often (server/config.h,
// ParseAccess). Kept apart from config.cc, which owns the option table.
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/config.h"
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

}  // namespace scangate::server
