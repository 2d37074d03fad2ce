// DigestScheme: what decides the bytes PostgreSQL holds for a key — the digest secret (or none), --keys and the
// stored form (core/digest.h StoredDigest) — as a keyed fingerprint the database records (sql/014), so that two
// schemes never meet in one database silently (every key of the horizon would be "new" again under the other).
// Invariant: the fingerprint is HMAC-SHA256(secret, SchemeTag(...)) (SHA-256 of the tag without a secret): it
// never holds the secret, and testing a guessed secret against it costs one HMAC, exactly what a stored key
// digest already allows to anyone who knows one raw key (any label); the tag is public and fixed, so the
// fingerprint says nothing a key digest does not. The decision what a recorded scheme means for a starting
// instance lives in storage/scheme/scheme_record.h.
#pragma once

#include <string>
#include <string_view>

#include "core/digest.h"

namespace scangate {

// The stored form of this build's digests: the first kStoredDigestBytes bytes (sql/013). A build that stores
// another form names another one here, and the databases it meets refuse it until they are moved.
inline constexpr std::string_view kStoredForm = "prefix16";
static_assert(kStoredDigestBytes == 16, "kStoredForm names the 16-byte prefix");

struct DigestScheme {
  std::string keys;         // "raw" | "gs1" (--keys)
  std::string stored;       // kStoredForm
  bool keyed = false;       // digests are HMAC-SHA256 with a secret
  Digest fingerprint{};     // Digester(SchemeTag(keys, stored))
};

// "scangate digest scheme v1|keys=<keys>|stored=<stored>". Pure.
std::string SchemeTag(std::string_view keys, std::string_view stored);

// The scheme `digester` makes with --keys `keys` and this build's stored form. Thread-safe (the Digester is).
DigestScheme SchemeOf(const Digester& digester, std::string_view keys);

// Which component of two schemes differs, the first that does in this order (each named in a refusal).
enum class SchemeDiff { kSame, kKeys, kStored, kSecretPresence, kSecret };
SchemeDiff CompareSchemes(const DigestScheme& recorded, const DigestScheme& local);
// "same", "keys", "stored", "secret_presence", "secret". Pure.
std::string_view SchemeDiffName(SchemeDiff d);

}  // namespace scangate
