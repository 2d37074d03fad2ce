// EpochSummary: the membership summary of one closed epoch of the exact store — a cache-line-blocked Bloom filter
// over the stored digests (core/digest.h kStoredDigestBytes) of the epoch's rows, built once when the epoch closes,
// kept in PostgreSQL as bytes (Serialize / Parse) and loaded by every instance. Invariant: no false negatives — every
// digest Add()ed before Serialize() answers MayContain() true in every summary parsed from those bytes, and bytes
// that are not exactly such a summary (truncated, a flipped bit, another version) do not parse. So a key that every
// closed epoch's summary calls absent needs no read of a closed epoch; a "maybe" probes that one epoch.
// Unlike the live filter (core/filter.h), a summary never forgets and never changes once built.
//
// Layout (RocksDB's FastLocalBloom, util/bloom_impl.h): one 64-byte line per query, chosen by digest bytes 8..15;
// `probes` bits in it, 9 bits each from a 32-bit hash (digest bytes 0..3) stepped by multiplication. Those bytes are
// uniform in every database: partitions are chosen by bytes 4..7 (sql/007), which the summary leaves alone, so a
// partition's keys spread over all lines. A client who chooses keys (no HMAC secret) can aim them at few lines and
// raise the false-positive rate: that costs reads of closed epochs, never a wrong answer.
// Tested in tests/core/epoch_summary_test.cc; figures (FP by bits per key, costs) in bench/RESULTS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest.h"

namespace scangate {

// 16 bits per key: 0.085 % false positives measured at design load (10 probes; bench/core/epoch_summary_bench.cc,
// bench/RESULTS.md "Epoch summaries"), under the 0.1 % a closed epoch's summary must meet, in 2 bytes per key.
// 15 bits per key measured 0.123 % (over); 17, 0.058 %. A summary is sized at its epoch's close, for the keys it
// then holds, so it is always at design load.
inline constexpr double kEpochSummaryBitsPerKey = 16.0;
inline constexpr std::uint64_t kEpochSummaryMaxBytes = std::uint64_t{1} << 30;  // 1 GiB (PostgreSQL's bytea limit)
inline constexpr int kEpochSummaryMaxProbes = 24;

class EpochSummary {
 public:
  static constexpr std::size_t kLineBytes = 64;
  static constexpr std::size_t kHeaderBytes = 56;  // magic, version, probes, keys, lines, SHA-256 of all the rest

  struct Geometry {
    std::uint64_t lines = 1;  // 64-byte lines, at least 1
    int probes = 1;           // bits set per key, 1..kEpochSummaryMaxProbes
  };
  // The geometry for `expected_keys` at `bits_per_key` (> 0): lines rounded up, probes the count that minimises the
  // false-positive rate of a blocked filter at that load (measured table in the .cc). Throws std::invalid_argument
  // when the summary would exceed kEpochSummaryMaxBytes or bits_per_key is not positive. Threading: pure function.
  static Geometry GeometryFor(std::uint64_t expected_keys, double bits_per_key = kEpochSummaryBitsPerKey);

  // An empty summary of geometry `g` (throws std::invalid_argument outside the limits above).
  explicit EpochSummary(Geometry g);
  // An empty summary sized for `expected_keys` (GeometryFor).
  static EpochSummary ForKeys(std::uint64_t expected_keys, double bits_per_key = kEpochSummaryBitsPerKey) {
    return EpochSummary(GeometryFor(expected_keys, bits_per_key));
  }

  // Adds a digest (its first 16 bytes: a full digest and its StoredDigest() are the same key). More keys than the
  // geometry was sized for raise the false-positive rate, never cause a false negative. Threading: not safe
  // concurrently with any other call on this object (the builder is one thread: the epoch's close).
  void Add(const Digest& d);
  // False only if `d` was never added. Threading: safe to call concurrently once no Add() runs (const, no state).
  bool MayContain(const Digest& d) const;

  // The digests added (as counted by Add: a digest added twice counts twice).
  std::uint64_t keys() const { return keys_; }
  std::uint64_t lines() const { return words_.size() / kWordsPerLine; }
  int probes() const { return probes_; }
  // Bytes of Serialize()'s output: what the summary costs in PostgreSQL and in each instance's memory.
  std::uint64_t bytes() const { return kHeaderBytes + words_.size() * sizeof(std::uint64_t); }
  // The false-positive rate a uniform digest that was never added meets: the mean over lines of (bits set /
  // 512)^probes, exact for this summary's bits up to the multiplicative hash's probe collisions (within 3 % of the
  // measured rate at design load, tests/core/epoch_summary_test.cc). O(bytes): for start-up and the dashboard, not
  // per request. Threading: as MayContain.
  double EstimatedFpRate() const;

  // The summary as bytes for PostgreSQL (little-endian; kHeaderBytes + 64 per line). Threading: as MayContain.
  std::string Serialize() const;
  // A summary from Serialize()'s bytes; nullopt (and the reason in *why when given) for anything else — another
  // format version, a length that does not match the header, a header or lines whose SHA-256 does not match.
  // Threading: pure.
  static std::optional<EpochSummary> Parse(std::string_view bytes, std::string* why = nullptr);

 private:
  static constexpr std::size_t kWordsPerLine = kLineBytes / sizeof(std::uint64_t);
  EpochSummary() = default;

  std::vector<std::uint64_t> words_;  // lines() x 8 words; bit b of a line is word b / 64, bit b % 64
  int probes_ = 1;
  std::uint64_t keys_ = 0;
};

}  // namespace scangate
