// The outcome types storage/ hands to its submitters: what became of one observation (Outcome, Result), how it
// is delivered (Completion, WriteBehindSink for the journal drain's groups) and what a submitter attaches to an
// item (Ticket, Expect). Shared by the ExactStore interface (storage/exact_store.h), the PostgreSQL store
// (storage/store.h) and the server's verdict logic. Invariant: kInserted/kDuplicate are only ever delivered
// for a committed decision; kUnavailable means nothing was recorded, kUnknown that it may have been.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <absl/functional/any_invocable.h>

#include "core/digest.h"
#include "core/time_format.h"

namespace scangate::storage {

// kUnavailable: nothing was recorded by this attempt (definite). kUnknown: the attempt MAY have recorded
// the digest — its COMMIT was sent, the answer lost, and PostgreSQL could not say (txid_status NULL or
// error, or not settled within kInDoubtResolveFor); a retry may then get kDuplicate.
enum class Outcome : std::uint8_t { kInserted, kDuplicate, kUnavailable, kUnknown };

// The idempotency record of the request that recorded a row (issue 34, Idempotency-Key): 16 bytes of the keys'
// Digester over the caller's scope and its idempotency key (server/verdict/scan_key.h RequestIdOf), never the
// header itself. Only ever compared with a retry's for the same row, so 128 bits leave no room for a false replay.
using RequestId = std::array<std::uint8_t, 16>;

// What a row holds beside its identity digest, first_seen and source. --keys=gs1 (issue 24): the pack's lot,
// expiry and own horizon; Idempotency-Key (issue 34): the request that recorded the row. All absent for raw keys
// observed without the header (then the row and its statements are exactly the raw ones).
struct PackAttrs {
  std::optional<Digest> lot;           // digest of AI 10 ("10" + lot, the keys' Digester); never the raw lot
  std::optional<std::int32_t> expiry;  // AI 17, days since 1970-01-01
  std::int64_t keep_until_us = 0;      // the pack's own horizon (µs since the epoch); 0 = none (--retention rules)
  std::optional<RequestId> request;    // the recording request's idempotency record (issue 34); none = no header
  bool empty() const { return !lot && !expiry && keep_until_us == 0 && !request; }
};

struct Result {
  Outcome outcome;
  TimeText first_seen;  // RFC 3339 UTC with microseconds, "2026-11-29T21:43:09.123456Z"; empty unless
                        // kInserted/kDuplicate. Inline: a Result is copied to the submitter's thread
  std::int64_t first_seen_us = 0;  // the same instant in µs since the epoch; valid when first_seen is set
  // kInserted: the lot, expiry and request just written (what was submitted); kDuplicate: those of the row
  // PostgreSQL holds (or of the batch's first item of the digest). keep_until_us is not reported (always 0).
  PackAttrs recorded{};
  // recorded.request is the row's: true for kInserted and for a kDuplicate whose row was read by the pack
  // statements (or is the batch's own first item); false when the statement did not read it (a raw batch's
  // duplicate of a row present before it) — the row's record is then unknown, not absent (the recent set must
  // not answer an idempotent request from it, server/verdict/service.h).
  bool request_known = false;
};

// Runs once per item with its outcome, on a writer thread after the commit (or failure): must not block
// (post to your own executor) and should not throw (a throw is swallowed). Move-only: a callable of up to 16
// bytes (a shared_ptr, two pointers) is held inline, where std::function allocated for any non-trivial capture.
using Completion = absl::AnyInvocable<void(const Result&)>;

// A write-behind row handed over in a group (Store::SubmitWriteBehindGroup): no closure, a tag instead.
struct WriteBehindRow {
  std::uint32_t route = 0;
  Digest digest{};
  std::string_view source;         // copied by the Store
  std::int64_t first_seen_us = 0;  // as SubmitWriteBehind's
  std::uint64_t tag = 0;           // the submitter's (the journal drain: the record's LSN); handed back
  bool flag = false;               // the submitter's (the journal drain: recovered at start); handed back
  std::optional<RequestId> request;  // written with the row (issue 34): the observing request's record
};

// What became of one row of a group: kInserted/kDuplicate once the transaction holding it committed,
// kUnavailable when it was dead-lettered or given up at Shutdown().
struct WriteBehindDone {
  Digest digest;
  std::uint64_t tag;
  bool flag;
  Outcome outcome;
};

// Receives the finished rows of SubmitWriteBehindGroup, once per row, in batches (a writer reports the
// rows of one transaction — or of one dead letter, one give-up — in one call). Called on writer threads,
// concurrently from several: must be thread-safe, must not block, must not throw.
class WriteBehindSink {
 public:
  virtual void Done(std::span<const WriteBehindDone> rows) = 0;

 protected:
  ~WriteBehindSink() = default;
};

// The cancellation handle of one Submit item: one atomic state, queued -> taken (a writer put the item
// into a transaction, or is completing it as kUnavailable) or queued -> cancelled (the submitter gave up:
// the item is never written and its completion never runs). Exactly one transition ever succeeds.
// The submitter owns it (a shared_ptr, so it can live inside the submitter's own request state).
class Ticket {
 public:
  // True when the item was still queued: it is now cancelled for good. False when a writer already took
  // it: the outcome will be delivered (possibly committed). Safe to call concurrently with the writer.
  bool Cancel() {
    std::uint8_t expected = kQueued;
    return state_.compare_exchange_strong(expected, kCancelled, std::memory_order_relaxed);  // see Take
  }

  // The writer's side (storage/write/writer_queue.cc, storage/write/completions.cc): true when the item may be written
  // / completed. Relaxed: the state is the only datum the two sides exchange (the item itself is published by
  // the queue mutex), and the CAS alone decides the winner. Safe to call concurrently with Cancel().
  bool Take() {
    std::uint8_t expected = kQueued;
    return state_.compare_exchange_strong(expected, kTaken, std::memory_order_relaxed) || expected == kTaken;
  }

 private:
  static constexpr std::uint8_t kQueued = 0, kTaken = 1, kCancelled = 2;
  std::atomic<std::uint8_t> state_{kQueued};
};

// What the submitter knows of a Submit item's digest: kNew when a trusted Bloom filter answered "definitely
// new" (no row of it is expected). A hint for the write's shape, never for its outcome: storage::Store writes
// a batch made only of such items by binary COPY, which skips ON CONFLICT's per-row index probe, and a row
// that exists after all (another instance, a row older than the window) aborts the COPY and the batch runs
// again through ON CONFLICT — PostgreSQL decides either way.
enum class Expect : std::uint8_t { kUnknown, kNew };

}  // namespace scangate::storage
