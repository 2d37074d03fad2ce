#include "storage/scheme/scheme_record.h"

#include <limits>
#include <string_view>

#include "core/time_format.h"

namespace scangate::storage {
namespace {

// previous_needed_until as recorded is a time of PostgreSQL's clock at the rotation's start; every row under the
// previous secret was first seen at or before that start, and is expired only when first_seen + R +
// scangate_clock_ahead(first_seen) < now() (sql/017). So the record is read later by the steps recorded after the
// start (a forward step: later; a step back: earlier), as a row first seen at the start would be: the needed-until
// is then a time of PostgreSQL's clock as it reads now, judged against its now().
constexpr const char* kReadSql =
    "SELECT fingerprint, keyed, keys, stored, previous_fingerprint, previous_keyed,"
    " coalesce((extract(epoch FROM rotation_started_at) * 1000000)::int8, 0),"
    " CASE WHEN previous_needed_until = 'infinity' THEN 9223372036854775807"
    "      ELSE coalesce((extract(epoch FROM previous_needed_until + scangate_clock_ahead(rotation_started_at))"
    "                     * 1000000)::int8, 0) END,"
    " (extract(epoch FROM scangate_clock_ahead_total()) * 1000000)::int8"
    " FROM scangate_digest_scheme WHERE id = 1";
constexpr const char* kNowSql = "SELECT (extract(epoch FROM now()) * 1000000)::int8";
constexpr const char* kLockSql = "SELECT pg_advisory_xact_lock($1)";
// The rotation starts at its statement's start (statement_timestamp()), which a rotation runs after it took
// kSchemeLockKey: every writing transaction of the previous secret committed before it, and every row it wrote was
// first seen by then (the transaction's now() would be its BEGIN, before the lock's wait). The previous secret is
// needed for the horizon from the start, and for every row the database holds with a later horizon of its own
// (keep_until: pins, GS1 packs, in any epoch: scangate_max_keep_until, sql/018; the keep_until indexes answer it). Such a row was first seen before the
// start, and is expired only when keep_until < now() - scangate_clock_ahead(first_seen) (sql/017): its keep_until
// is kept later by every forward step recorded by the start (at least the steps between its first_seen and the
// start; kReadSql adds those recorded after), as the expiry deletes it (storage/horizon/expiry.cc).
constexpr const char* kNeededUntil =
    "CASE WHEN $1::int8 = 0 THEN 'infinity'::timestamptz"
    " ELSE greatest(statement_timestamp() + $1::int8 * interval '1 second',"
    "               scangate_max_keep_until() + scangate_clock_ahead_total()) END";
// The first instance's row; with a previous secret (a rotation recorded at once: a database a scangate without
// sql/014 filled under the previous secret) the rotation starts at once.
constexpr const char* kInsertSql =
    "INSERT INTO scangate_digest_scheme (fingerprint, keyed, keys, stored) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (id) DO NOTHING";
const std::string kInsertRotatingSql = std::string(
    "INSERT INTO scangate_digest_scheme (fingerprint, keyed, keys, stored, previous_fingerprint, previous_keyed,"
    " rotation_started_at, previous_needed_until)"
    " VALUES ($2, $3, $4, $5, $6, $7, statement_timestamp(), ") + kNeededUntil + ") ON CONFLICT (id) DO NOTHING";
const std::string kRotateSql = std::string(
    "UPDATE scangate_digest_scheme SET previous_fingerprint = fingerprint, previous_keyed = keyed,"
    " fingerprint = $2, keyed = $3, rotation_started_at = statement_timestamp(),"
    " previous_needed_until = ") + kNeededUntil + " WHERE id = 1";
constexpr const char* kEndRotationSql =
    "UPDATE scangate_digest_scheme SET previous_fingerprint = NULL, previous_keyed = NULL,"
    " rotation_started_at = NULL, previous_needed_until = NULL WHERE id = 1";

std::string Short(const Digest& d) { return ToHex(d).substr(0, 12); }

std::string When(std::int64_t us) {
  if (us == std::numeric_limits<std::int64_t>::max()) return "never (--retention=off)";
  return Rfc3339Micros(us);
}

pqxx::binarystring Bytes(const Digest& d) { return pqxx::binarystring(d.data(), d.size()); }

Digest DigestOf(const pqxx::field& f) {
  const pqxx::binarystring b(f);
  Digest d{};
  for (std::size_t i = 0; i < d.size() && i < b.size(); ++i) d[i] = b[i];
  return d;
}

SchemeDecision Refuse(std::string component, std::string detail) {
  SchemeDecision d;
  d.action = SchemeAction::kRefuse;
  d.component = std::move(component);
  d.detail = std::move(detail);
  return d;
}

SchemeDecision Act(SchemeAction a) {
  SchemeDecision d;
  d.action = a;
  return d;
}

std::string Describe(const DigestScheme& s) {
  return std::string(s.keyed ? "HMAC-SHA256 with a secret" : "plain SHA-256 (no secret)") + ", --keys=" + s.keys +
         ", stored form " + s.stored + ", fingerprint " + Short(s.fingerprint) + "...";
}

}  // namespace

SchemeDecision DecideScheme(const std::optional<RecordedScheme>& recorded, const LocalScheme& local,
                            std::int64_t now_us) {
  if (!recorded) return Act(SchemeAction::kRecord);
  const RecordedScheme& r = *recorded;
  const SchemeDiff diff = CompareSchemes(r.current, local.current);
  const std::string theirs = "the database records " + Describe(r.current) + "; this instance has " +
                             Describe(local.current);
  if (diff == SchemeDiff::kKeys || diff == SchemeDiff::kStored) {
    return Refuse(std::string(SchemeDiffName(diff)),
                  theirs + ". Every key of the horizon would be new again under this scheme: start it with the "
                           "database's --keys (a database holds one kind of key; use another database for the other)");
  }
  const bool rotation_needed = r.previous && now_us < r.previous_needed_until_us;
  if (diff == SchemeDiff::kSame) {
    if (r.previous && !local.previous) {
      if (!rotation_needed) return Act(SchemeAction::kEndRotation);
      return Refuse("previous_secret_missing",
                    "the database rotated its digest secret at " + When(r.rotation_started_us) +
                        " and still holds keys recorded under the previous one (" + Describe(*r.previous) +
                        "): start this instance with --digest-secret-previous-file holding that secret until " +
                        When(r.previous_needed_until_us) + " (the horizon, pins and GS1 packs' keep_until)");
    }
    if (r.previous && local.previous && CompareSchemes(*r.previous, *local.previous) != SchemeDiff::kSame) {
      return Refuse("previous_secret",
                    "--digest-secret-previous-file is not the secret the database rotated from (it records " +
                        Describe(*r.previous) + "; this instance has " + Describe(*local.previous) +
                        "): give it the secret that was current before the rotation of " +
                        When(r.rotation_started_us));
    }
    SchemeDecision d = Act(SchemeAction::kMatch);
    d.previous_unneeded = local.previous && !r.previous;
    return d;
  }
  // The secret differs (or one side has none).
  if (local.previous && CompareSchemes(r.current, *local.previous) == SchemeDiff::kSame) {
    if (rotation_needed) {
      return Refuse("rotation_in_progress",
                    "the database's previous rotation (at " + When(r.rotation_started_us) +
                        ") still needs the secret it rotated from until " + When(r.previous_needed_until_us) +
                        "; a second rotation now would make the keys recorded under that one new again: keep the "
                        "database's current secret until then");
    }
    return Act(SchemeAction::kStartRotation);
  }
  if (r.previous && CompareSchemes(*r.previous, local.current) == SchemeDiff::kSame) {
    return Refuse(std::string(SchemeDiffName(diff)),
                  "the database rotated from this instance's digest secret to another at " +
                      When(r.rotation_started_us) + " (" + Describe(r.current) +
                      "): start it with the new secret in --digest-secret-file and this one in "
                      "--digest-secret-previous-file");
  }
  return Refuse(std::string(SchemeDiffName(diff)),
                theirs + ". Every key of the horizon would be new again under this scheme: start it with the "
                         "database's --digest-secret-file, or rotate to this secret with the database's current one "
                         "in --digest-secret-previous-file");
}

std::optional<RecordedScheme> ReadDigestScheme(pqxx::transaction_base& tx) {
  const pqxx::result rows = tx.exec(kReadSql);
  if (rows.empty()) return std::nullopt;
  const pqxx::row& row = rows[0];
  RecordedScheme r;
  r.current.fingerprint = DigestOf(row[0]);
  r.current.keyed = row[1].as<bool>();
  r.current.keys = row[2].as<std::string>();
  r.current.stored = row[3].as<std::string>();
  if (!row[4].is_null()) {
    DigestScheme p = r.current;
    p.fingerprint = DigestOf(row[4]);
    p.keyed = row[5].as<bool>(false);
    r.previous = std::move(p);
  }
  r.rotation_started_us = row[6].as<std::int64_t>();
  r.previous_needed_until_us = row[7].as<std::int64_t>();
  r.clock_ahead_total_us = row[8].as<std::int64_t>();
  return r;
}

SchemeCheck CheckDigestScheme(pqxx::connection& conn, const LocalScheme& local, std::chrono::seconds retention) {
  for (;;) {
    pqxx::work tx(conn, "scangate_digest_scheme");
    std::optional<RecordedScheme> recorded = ReadDigestScheme(tx);
    std::int64_t now_us = tx.exec(kNowSql)[0][0].as<std::int64_t>();
    SchemeDecision d = DecideScheme(recorded, local, now_us);
    if (d.action == SchemeAction::kStartRotation || d.action == SchemeAction::kEndRotation) {
      // Waits for every writing transaction that passed sql/014's guard; then the row as it is now (a fresh
      // snapshot: READ COMMITTED), decided again (another instance may have rotated meanwhile).
      tx.exec_params(kLockSql, kSchemeLockKey);
      recorded = ReadDigestScheme(tx);
      now_us = tx.exec(kNowSql)[0][0].as<std::int64_t>();
      d = DecideScheme(recorded, local, now_us);
    }
    const long long retention_s = retention.count();
    switch (d.action) {
      case SchemeAction::kRecord: {
        const DigestScheme& c = local.current;
        const pqxx::result r =
            local.previous
                ? tx.exec_params(kInsertRotatingSql, retention_s, Bytes(c.fingerprint), c.keyed, c.keys, c.stored,
                                 Bytes(local.previous->fingerprint), local.previous->keyed)
                : tx.exec_params(kInsertSql, Bytes(c.fingerprint), c.keyed, c.keys, c.stored);
        if (r.affected_rows() == 0) continue;  // another instance recorded first: decide against its row
        break;
      }
      case SchemeAction::kStartRotation:
        tx.exec_params0(kRotateSql, retention_s, Bytes(local.current.fingerprint), local.current.keyed);
        break;
      case SchemeAction::kEndRotation:
        tx.exec0(kEndRotationSql);
        break;
      case SchemeAction::kMatch:
      case SchemeAction::kRefuse:
        break;
    }
    recorded = ReadDigestScheme(tx);
    tx.commit();
    return SchemeCheck{std::move(d), std::move(recorded)};
  }
}

std::string SchemeOption(const DigestScheme& current) {
  return "-c scangate.digest_scheme=" + ToHex(current.fingerprint);
}

}  // namespace scangate::storage
