// The JSON bodies of the service's successful answers: a verdict (POST /observe), a batch's verdicts in request
// order (POST /observe/batch) and a lookup (POST /lookup). Problems (4xx/5xx) have theirs in request.h. Pure, no
// I/O, safe from any thread. Invariant: a verdict body is byte for byte what Boost.JSON serializes for the same
// object (the hot path writes it by hand); tested in tests/server/http/answer_body_test.cc.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace scangate::server {

// One answer about one key.
struct Verdict {
  bool is_new = false;
  bool via_filter = false;      // "via": "filter" | "exact"
  std::string digest_hex;       // 64 lowercase hex chars
  std::string first_seen;       // RFC 3339; set for duplicates only
};
// 201/200 body of POST /observe.
std::string VerdictBody(const Verdict& v);
// 200 body of POST /observe/batch: {"results": [...]} in request order.
std::string BatchBody(std::span<const Verdict> verdicts);
// 200 body of POST /lookup: {"digest", "first_seen", "source"} (source null when none was recorded).
std::string LookupBody(std::string_view digest_hex, std::string_view first_seen, const std::optional<std::string>& source);

}  // namespace scangate::server
