// The JSON bodies of the service's successful answers: a verdict (POST /observe), a batch's verdicts in request
// order (POST /observe/batch) and a lookup (POST /lookup). Problems (4xx/5xx) have theirs in request.h. Pure, no
// I/O, safe from any thread. Invariant: a verdict body is byte for byte what Boost.JSON serializes for the same
// object (the hot path writes it by hand); tested in tests/server/http/answer_body_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace scangate::server {

// --keys=gs1: how a pack's scan differs from its recorded first scan (one bit per field).
enum MismatchBits : std::uint8_t { kMismatchLot = 1, kMismatchExpiry = 2 };

// One answer about one key.
struct Verdict {
  bool is_new = false;
  bool via_filter = false;      // "via": "filter" | "exact"
  std::string digest_hex;       // 64 lowercase hex chars
  std::string first_seen;       // RFC 3339; set for duplicates only
  // --keys=gs1, duplicates only: MismatchBits (server/verdict/scan_key.h) of this scan against the pack's
  // recorded first scan: "mismatch": ["lot", "expiry"] (absent when 0).
  std::uint8_t mismatch = 0;
  // Idempotency-Key (issue 34): a retry of the request that recorded the key, answered its first verdict (new)
  // again: "replayed": true in the body (and, on /observe, the Idempotent-Replayed: true header).
  bool replayed = false;
};
// 201/200 body of POST /observe.
std::string VerdictBody(const Verdict& v);
// 200 body of POST /observe/batch: {"results": [...]} in request order.
std::string BatchBody(std::span<const Verdict> verdicts);
// The names of a mismatch bit set, in a fixed order: "lot", then "expiry".
std::vector<std::string_view> MismatchNames(std::uint8_t mismatch);
// 200 body of POST /lookup: {"digest", "first_seen", "source"} (source null when none was recorded). With
// `source_hidden` (a token without the audit right looking up another terminal's record) "source" is null and
// "source_hidden": true.
std::string LookupBody(std::string_view digest_hex, std::string_view first_seen, const std::optional<std::string>& source,
                       bool source_hidden = false);
// --keys=gs1: the pack's record as well — "expiry" (YYYY-MM-DD, or null), "lot_recorded" (bool: a lot digest is
// held; the lot itself never is), "keep_until" (RFC 3339, or null: --retention) and, when the looked-up scan
// contradicts the record, "mismatch".
struct PackRecord {
  std::optional<std::string> expiry;
  bool lot_recorded = false;
  std::optional<std::string> keep_until;
  std::uint8_t mismatch = 0;
};
std::string LookupBody(std::string_view digest_hex, std::string_view first_seen, const std::optional<std::string>& source,
                       const PackRecord& pack, bool source_hidden = false);

}  // namespace scangate::server
