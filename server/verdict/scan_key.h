// ScanKey and KeyReader: what the verdict logic decides on for one observed key string. In --keys=raw (the
// default) that is the digest of the string as sent. In --keys=gs1 the string is a GS1 element string or
// Digital Link (core/gs1.h): the pack's identity (GTIN-14 + serial) is digested, and its lot and expiry are
// attributes recorded with it — the lot as a digest, the expiry as a date that also sets the row's own
// de-duplication horizon (end of the expiry month + --expiry-grace, never shorter than --retention).
// Invariant: nothing raw leaves this unit — the key and the lot only as digests (SHA-256, or HMAC-SHA256 with
// the digest secret), and a key that is not a valid pack yields a 400 problem that names the AI, never the
// key's text. Use one KeyReader per Service; Read() is called on the I/O threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>
#include <variant>

#include "core/digest.h"
#include "server/config/config.h"
#include "server/http/answer_body.h"
#include "server/http/request.h"
#include "storage/outcome.h"

namespace scangate::server {

struct ScanKey {
  Digest digest{};           // the identity's digest: the filter's, PostgreSQL's primary key, the logs'
  storage::PackAttrs attrs;  // --keys=gs1: lot digest, expiry, the pack's horizon; empty otherwise
  // The recent set's key (core/recent_set.h): `digest` when there are no attributes, else a digest of
  // (digest, lot, expiry), so a hit means "recorded with exactly these attributes" — no mismatch possible.
  Digest recent_digest{};
};

class KeyReader {
 public:
  using NowUs = std::function<std::int64_t()>;  // µs since the epoch; tests inject a fake clock

  // `grace` (--expiry-grace) is added to the end of a pack's expiry month. `horizons` (--retention is on): a
  // pack gets its own horizon; off, every record is kept for ever, packs included (keep_until_us stays 0).
  // Threading: construct once.
  KeyReader(Digester digester, KeysMode mode, std::chrono::seconds grace, bool horizons = true,
            NowUs now_us = SystemNowUs);

  // The key's digest and attributes, or (gs1) a 400 invalid-gs1 problem naming the AI. Thread-safe. Throws
  // only on digest failure (-> 500).
  std::variant<ScanKey, Problem> Read(std::string_view key) const;

  // The recent-set key of `identity` recorded with `recorded`'s lot and expiry (ScanKey::recent_digest).
  // Thread-safe.
  Digest RecentDigest(const Digest& identity, const storage::PackAttrs& recorded) const;

  // Idempotency-Key (issue 34): the idempotency record (storage::RequestId, sql/008) of a request of caller
  // `scope` (its terminal, else its source, else its client address) carrying `idempotency_key`: the first 16
  // bytes of the keys' Digester (HMAC-SHA256 with the digest secret) over a domain tag and the two strings, each
  // length-prefixed, so no other pair spells the same input. Neither string leaves the process. Thread-safe.
  storage::RequestId RequestIdOf(std::string_view scope, std::string_view idempotency_key) const;

  // MismatchBits of a scan's attributes against the recorded ones: a field differs only when both carry it
  // (a scan without a lot does not contradict a recorded lot). Pure.
  static std::uint8_t Mismatch(const storage::PackAttrs& scan, const storage::PackAttrs& recorded);

  KeysMode mode() const { return mode_; }
  // The system clock in µs since the epoch: the verdict logic's one clock read (the first_seen of records this
  // instance makes, the horizons' edges, AI 17's century). Thread-safe.
  static std::int64_t SystemNowUs();

 private:
  Digester digester_;
  Digester plain_;  // SHA-256: the recent-set key only mixes digests, no secret needed
  KeysMode mode_;
  std::int64_t grace_us_;
  bool horizons_;
  NowUs now_us_;
};

}  // namespace scangate::server
