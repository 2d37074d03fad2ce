// The digest scheme's record in each database (sql/014 scangate_digest_scheme, issue 55): the first instance
// records its scheme's keyed fingerprint (core/digest_scheme.h); every later one compares its own at start and is
// refused when a component differs, or starts or ends a rotation of the secret (--digest-secret-previous-file).
// Use: CheckDigestScheme once per database (partition) after the migrations, before anything is written;
// DecideScheme is the pure decision table it applies (unit-tested alone).
//
// Rotation. Keys recorded under the previous secret stay findable: while the previous secret is set, a key is new
// only if PostgreSQL holds it under neither digest (server/verdict/service_previous.cc reads the previous digest
// before the insert of the current one). New keys are recorded under the current digest only. The previous secret
// is needed until previous_needed_until = the rotation's start (after it waited for the writers of the old secret:
// below) + --retention, or the latest keep_until of a row the database held at the start (pinned rows, GS1 packs)
// plus every forward step of the clock recorded by then, if later; 'infinity' with --retention=off. That is a time
// of PostgreSQL's clock at the start: it is read later by the steps of the clock recorded after the start (sql/017:
// a row first seen at f is expired only when f + R + scangate_clock_ahead(f) < now(), and every row under the
// previous secret was first seen by the start), and judged against PostgreSQL's now(). Before that an instance
// without it is refused (a key recorded under the previous digest would be new to it).
//
// Concurrent instances. An instance still on the previous secret alone must not record a key under the previous
// digest once an instance on the new one may have answered it `new` under the new digest. The fence is in
// PostgreSQL, in every writing transaction: each writer connection carries its current fingerprint (options
// -c scangate.digest_scheme=<hex>, StoreOptions::digest_scheme) and sql/014's statement trigger on scan_keys, before
// any row of an INSERT or COPY, takes kSchemeLockKey SHARED for the transaction and compares it with the recorded
// current one. A rotation changes the row under kSchemeLockKey EXCLUSIVE: it waits for every writing transaction
// that passed the check to commit or abort — so each key such a transaction recorded under the old digest is
// visible to the rotating instance's reads, which all begin after the rotation committed — and every writing
// transaction after it reads the new row and fails (55000, an outage to that writer: its rows stay queued, its
// answers are 503, never a data error). So, per key: either its old-digest row committed before the rotation and
// every new-scheme instance reads it (duplicate), or no old-scheme writer records it after. Answers that do not
// write — --ack=filter's journal and write-behind `new` — are fenced by the old instance's own scheme watch
// (storage/scheme/scheme_watch.h): it may answer from its filter only within kSchemeLease of a read that found its
// scheme current, and the rotating instance waits kRotationSettle (> the lease) after the rotation committed before
// it serves. Journals written before a rotation hold old digests: replayed by an instance on the new secret with the
// previous one set (same current fingerprint), they are recorded under the old digest — the records they are —
// and found by the previous-digest read; the peers' watermark (storage/peers/peer_view.h) holds other instances'
// new keys until such a journal is replayed. Idempotency records (sql/008) are keyed with the secret too: a retry
// that crosses the rotation with the same Idempotency-Key is answered `duplicate` instead of a replayed `new`.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "core/digest_scheme.h"

namespace scangate::storage {

// Arbitrary but fixed: sql/014's guard takes it shared in every writing transaction, a rotation exclusive.
inline constexpr long long kSchemeLockKey = 0x5ca9'6a7e'0014LL;
// An --ack=filter instance answers from its filter only within this long of a read that found its scheme current
// (storage/scheme/scheme_watch.h, polled every kSchemeLease / 4); an instance that starts a rotation waits
// kRotationSettle after it committed before it serves, so every such lease of the old scheme has run out.
inline constexpr std::chrono::milliseconds kSchemeLease{2000};
inline constexpr std::chrono::milliseconds kRotationSettle{3000};
static_assert(kRotationSettle > kSchemeLease, "a rotation must outwait every old instance's lease");

// This instance's scheme: the digester of --digest-secret-file, and of --digest-secret-previous-file if set.
struct LocalScheme {
  DigestScheme current;
  std::optional<DigestScheme> previous;
};

// The database's row.
struct RecordedScheme {
  DigestScheme current;
  std::optional<DigestScheme> previous;
  std::int64_t rotation_started_us = 0;        // 0: no rotation recorded
  // PostgreSQL's clock (now()) at which the previous secret may go: the recorded previous_needed_until plus the steps
  // of the clock recorded after the rotation's start (sql/017), as read. INT64_MAX: never (--retention=off).
  std::int64_t previous_needed_until_us = 0;
  std::int64_t clock_ahead_total_us = 0;       // every forward step recorded at the read (scangate_clock_ahead_total)
};

enum class SchemeAction {
  kRecord,         // no row: record this instance's scheme
  kMatch,          // the database's scheme: nothing to change
  kStartRotation,  // this instance's previous secret is the database's current one: rotate
  kEndRotation,    // the previous secret is no longer needed and this instance runs without it: forget it
  kRefuse,         // exit 2 with `component` and `detail`
};

struct SchemeDecision {
  SchemeAction action = SchemeAction::kRefuse;
  // kRefuse: which component differs — "secret", "secret_presence", "keys", "stored", "previous_secret",
  // "previous_secret_missing" (a rotation still needs it) or "rotation_in_progress" (a second rotation too early).
  std::string component;
  std::string detail;  // what the operator does; never a secret, only fingerprints' first hex digits
  bool previous_unneeded = false;  // kMatch: this instance has a previous secret the database no longer needs
};

// The decision table. `now_us`: PostgreSQL's clock. Pure.
SchemeDecision DecideScheme(const std::optional<RecordedScheme>& recorded, const LocalScheme& local,
                            std::int64_t now_us);

struct SchemeCheck {
  SchemeDecision decision;
  std::optional<RecordedScheme> recorded;  // the row as it is after the check (none only when refused... never)
};

// Reads the row, decides, applies the decision (insert, rotation start or end under kSchemeLockKey exclusive) and
// commits. `retention`: --retention (0 = off), for previous_needed_until. Throws pqxx errors (the caller retries a
// broken connection).
SchemeCheck CheckDigestScheme(pqxx::connection& conn, const LocalScheme& local, std::chrono::seconds retention);

// The row as it is (nullopt: none). Throws pqxx errors.
std::optional<RecordedScheme> ReadDigestScheme(pqxx::transaction_base& tx);

// "-c scangate.digest_scheme=<64 hex>": the options a writer connection carries (sql/014's guard).
std::string SchemeOption(const DigestScheme& current);

}  // namespace scangate::storage
