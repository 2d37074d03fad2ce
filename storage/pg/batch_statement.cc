#include "storage/pg/batch_statement.h"

#include <chrono>
#include <stdexcept>

#include "core/time_format.h"
#include "storage/epochs/catalog.h"
#include "storage/pg/batch_internal.h"

namespace scangate::storage {
namespace {

using batch_internal::Binary;
using batch_internal::DigestOid;
using batch_internal::Guard;
using batch_internal::RecordOf;

// The statements are templates for both layouts of scan_keys (storage/pg/table_layout.h ForLayout): {DIGEST} is the
// digests' SQL type (bytea: 32 bytes, the layout of sql/001..010; uuid: their first 16, sql/013), {SOURCE} the source
// column, {SEND} what makes a digest column bytes for encode().

// $1 = the batch's distinct digests ({DIGEST}[]), $2 = their sources (text[], NULL = none), $3 = their first_seen
// in µs since the epoch (int8[], 0 = now(), i.e. the column default) — three binary arrays of equal length.
// Returns one row (hex digest, NULL, NULL) per digest this statement inserted and one last row (NULL, xid,
// now_us): txid_current_if_assigned(), the id an in-doubt COMMIT is settled by (no extra round trip; unused
// when nothing was inserted — then the outcomes hold whether or not the COMMIT happened — which is why it may be
// set then too: sql/010's commit_xid default assigns the xid when it is evaluated for a proposed row, before ON
// CONFLICT finds the row present), and now() — the first_seen of every row inserted with $3 = 0 — in µs.
// UNION ALL runs its branches in order, so the xid is read after the inserts; an xid NULL beside an
// inserted row is distrusted anyway (storage/write/batch_runner.cc). encode(): independent of the session's
// bytea_output. Rows are inserted in digest order so that concurrent batches wait on each other without deadlocks.
// extract(epoch ...) is numeric since PostgreSQL 14, so * 1000000 is exact (timestamptz holds whole µs).
constexpr const char* kInsertName = "scangate_insert_batch";
constexpr const char* kInsertHead = R"sql(
WITH ins AS (
  INSERT INTO scan_keys AS k (digest, {SOURCE}, first_seen)
  SELECT d, s, CASE WHEN us = 0 THEN now() ELSE timestamptz 'epoch' + us * interval '1 microsecond' END
  FROM unnest($1::{DIGEST}[], $2::text[], $3::int8[]) AS u(d, s, us)
  ORDER BY d
)sql";
// Without a horizon (--retention=off) a present row is a duplicate for ever.
constexpr const char* kConflictKeep = "  ON CONFLICT (digest) DO NOTHING\n";
// With a horizon of R µs: a present row whose first_seen is older than R is expired: it is taken over (its
// first_seen and source replaced) and RETURNed like an inserted row, so the key is `new` again; a row within
// R is left alone (a duplicate). Exact with any number of writers: a second writer taking over the same
// expired row waits for the first one's row lock, re-checks the WHERE on the updated row (now young: no
// update, no row returned) and reads it as a duplicate; a row the expiry deletes meanwhile makes ON CONFLICT
// retry the insert. Rows within the horizon are still only probed, but ON CONFLICT DO UPDATE locks the row it
// meets (a lock record in the WAL for a duplicate): bench/RESULTS.md "Issue 22".
// The taken-over row drops the previous observer's idempotency record (sql/008): a retry of that request, past
// the horizon, is not the new observer's. A row's age is its clock age less the clock's steps recorded since its
// first_seen (sql/017): a cheap bound first (the steps back since the horizon's edge: an InitPlan, once per
// statement), so a row well within the horizon (every duplicate but those near or past its end) never pays for
// scangate_clock_ahead().
constexpr const char* kConflictTakeOverExpired =
    "  ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, {SOURCE} = EXCLUDED.{SOURCE}, request = NULL\n"
    "    WHERE k.first_seen < now() - {R} * interval '1 microsecond'\n"
    "                         + (SELECT scangate_clock_behind(now() - {R} * interval '1 microsecond'))\n"
    "      AND k.first_seen < now() - {R} * interval '1 microsecond' - scangate_clock_ahead(k.first_seen)\n"
    "      AND {GUARD}\n";
constexpr const char* kInsertTail = R"sql(  RETURNING digest
)
SELECT encode({SEND}(digest), 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8
)sql";

// The batch INSERT for a horizon of `retention` (0 = off). The horizon is a constant of the process,
// written into the prepared statement as an integer literal. Still a template (ForLayout).
std::string InsertSql(std::chrono::seconds retention) {
  std::string conflict = kConflictKeep;
  if (retention.count() > 0) {
    conflict = kConflictTakeOverExpired;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(retention).count();
    conflict = Substitute(conflict, {{"{R}", std::to_string(us)}, {"{GUARD}", Guard(4)}});
  }
  return std::string(kInsertHead) + conflict + kInsertTail;
}

// Follow-up in the same transaction (a new statement, so a new READ COMMITTED snapshot) for the digests the
// INSERT did not insert: rows present before it, and rows committed by another transaction after its
// snapshot (ON CONFLICT skipped them, waiting for their commit). $1 = those digests ({DIGEST}[]); returns
// (i, first_seen µs), i 1-based into $1.
constexpr const char* kSelectName = "scangate_select_existing";
constexpr const char* kSelectSql = R"sql(
SELECT u.i, (extract(epoch FROM k.first_seen) * 1000000)::int8
FROM unnest($1::{DIGEST}[]) WITH ORDINALITY AS u(d, i)
JOIN scan_keys k ON k.digest = u.d
)sql";

// The pack INSERT (--keys=gs1, issue 24; and any batch with an idempotency record, issue 34): the raw one with
// four more arrays — $4 lot digests ({DIGEST}[], NULL = none), $5 expiry in days since 1970-01-01 (int4[], NULL =
// none), $6 keep_until in µs since the epoch (int8[], 0 = none: the row follows the retention), $7 the request's
// idempotency record ({DIGEST}[] of 16 bytes, NULL = none; sql/008). A row's keep_until is the pack's, but never before
// first_seen + R when the retention R is on ({KEEP}). The answer is the raw INSERT's (kInsertTail).
// Take-over ({EXPIRED}): a present row is expired when its keep_until has passed, or — without one — when it is
// older than R (never with R off). An expired row is taken over with everything the new item carries (first_seen,
// source, lot, expiry, keep_until, request) and RETURNed as inserted. Exact with any number of writers as the raw
// take-over is (kConflictTakeOverExpired): a second writer re-checks the WHERE on the row the first one wrote,
// whose keep_until (or first_seen) is fresh, and reads it as a duplicate.
constexpr const char* kPackInsertName = "scangate_insert_pack_batch";
constexpr const char* kPackInsertSql = R"sql(
WITH ins AS (
  INSERT INTO scan_keys AS k (digest, {SOURCE}, first_seen, lot, expiry, keep_until, request)
  SELECT d, s, f, l, date 'epoch' + e, CASE WHEN ku = 0 THEN NULL ELSE {KEEP} END, rq
  FROM (
    SELECT d, s, l, e, ku, rq,
           CASE WHEN us = 0 THEN now() ELSE timestamptz 'epoch' + us * interval '1 microsecond' END AS f
    FROM unnest($1::{DIGEST}[], $2::text[], $3::int8[], $4::{DIGEST}[], $5::int4[], $6::int8[], $7::{DIGEST}[])
      AS u(d, s, us, l, e, ku, rq)
  ) AS v
  ORDER BY d
  ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, {SOURCE} = EXCLUDED.{SOURCE},
    lot = EXCLUDED.lot, expiry = EXCLUDED.expiry, keep_until = EXCLUDED.keep_until, request = EXCLUDED.request
    WHERE {EXPIRED}
      AND {GUARD}
)sql";
constexpr const char* kKeepPack = "timestamptz 'epoch' + ku * interval '1 microsecond'";
constexpr const char* kKeepPackAtLeastR =
    "greatest(timestamptz 'epoch' + ku * interval '1 microsecond', f + {R} * interval '1 microsecond')";
// Both less the clock's steps since the row's first_seen (sql/017), a cheap bound first (as the raw one: here every
// step back recorded, since a pack's row may be years old).
constexpr const char* kExpiredPack =
    "k.keep_until < now() + (SELECT scangate_clock_behind(NULL)) AND k.keep_until < now() - scangate_clock_ahead(k.first_seen)";
constexpr const char* kExpiredPackOrR =
    "coalesce(k.keep_until, k.first_seen + {R} * interval '1 microsecond') < now() + (SELECT scangate_clock_behind(NULL))\n"
    "    AND coalesce(k.keep_until, k.first_seen + {R} * interval '1 microsecond') < now() - scangate_clock_ahead(k.first_seen)";

// The pack follow-up SELECT: the raw one's answer plus the row's lot (hex, NULL = none), expiry (days since
// 1970-01-01, NULL = none) and idempotency record (hex, NULL = none), so a duplicate reports what the row holds.
constexpr const char* kPackSelectName = "scangate_select_existing_pack";
constexpr const char* kPackSelectSql = R"sql(
SELECT u.i, (extract(epoch FROM k.first_seen) * 1000000)::int8, encode({SEND}(k.lot), 'hex'), k.expiry - date 'epoch',
       encode({SEND}(k.request), 'hex')
FROM unnest($1::{DIGEST}[]) WITH ORDINALITY AS u(d, i)
JOIN scan_keys k ON k.digest = u.d
)sql";

// The pack INSERT for a horizon of `retention` (0 = off), written into the prepared statement as literals.
std::string PackInsertSql(std::chrono::seconds retention) {
  const bool r_on = retention.count() > 0;
  const std::string r = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(retention).count());
  // {R} last: the other two bring it in.
  const std::string sql = Substitute(kPackInsertSql, {{"{KEEP}", r_on ? kKeepPackAtLeastR : kKeepPack},
                                                      {"{EXPIRED}", r_on ? kExpiredPackOrR : kExpiredPack},
                                                      {"{GUARD}", Guard(8)},
                                                      {"{R}", r}});
  return sql + kInsertTail;
}

}  // namespace

// The writing transaction's first statement (storage/epochs/catalog.h, sql/018).
constexpr const char* kWriteOrderName = "scangate_write_order";

TableLayout BatchStatement::Prepare(pqxx::connection& conn, std::chrono::seconds retention) {
  const TableLayout layout = ReadTableLayout(conn);
  conn.prepare(kWriteOrderName, kWriteOrderSql);
  conn.prepare(kInsertName, ForLayout(InsertSql(retention), layout));
  conn.prepare(kSelectName, ForLayout(kSelectSql, layout));
  conn.prepare(kPackInsertName, ForLayout(PackInsertSql(retention), layout));
  conn.prepare(kPackSelectName, ForLayout(kPackSelectSql, layout));
  return layout;
}

BatchStatement::BatchStatement(std::size_t expected_items, bool pack_horizons, std::chrono::seconds retention,
                               TableLayout layout)
    : layout_(layout),
      digests_(DigestOid(layout), expected_items, expected_items * StoredBytes(layout)),
      sources_(kOidText, expected_items, expected_items * 16),
      times_(kOidInt8, expected_items, expected_items * 8) {
  slot_.reserve(expected_items);
  first_item_.reserve(expected_items);
  digest_.reserve(expected_items);
  first_seen_us_.reserve(expected_items);
  source_.reserve(expected_items);
  index_of_.reserve(expected_items);
  attrs_.reserve(expected_items);
  pack_ = pack_horizons;
  retention_ = retention;
}

void BatchStatement::Add(const Digest& full, std::string_view source, std::int64_t first_seen_us,
                         const PackAttrs& attrs) {
  const Digest d = KeyOf(full, layout_);
  const auto next = static_cast<std::uint32_t>(first_item_.size());
  const auto [it, fresh] = index_of_.try_emplace(d, next);
  slot_.push_back(it->second);
  if (!fresh) return;
  first_item_.push_back(static_cast<std::uint32_t>(slot_.size() - 1));
  digest_.push_back(d);
  first_seen_us_.push_back(first_seen_us);
  source_.push_back(source);
  attrs_.push_back(attrs);
  AddRowParams(digest_.size() - 1);
  pack_ = pack_ || !attrs.empty();
}

void BatchStatement::AddRowParams(std::size_t i) {
  digests_.Add(StoredBytesOf(digest_[i], layout_));
  if (source_[i].empty()) {
    sources_.AddNull();
  } else {
    sources_.Add(source_[i]);
  }
  times_.AddInt8(first_seen_us_[i]);
}

BatchAnswer BatchStatement::Run(pqxx::transaction_base& tx) {
  const std::size_t n = distinct();
  std::vector<char> inserted(n, 0), answered(n, 0);
  std::vector<std::int64_t> first_seen(n, 0);

  std::vector<PackAttrs> recorded(n);  // pack batches: the lot/expiry each digest's row holds
  std::vector<char> request_known(n, 0);  // recorded[i].request is the row's (Result::request_known)
  if (!write_order_) throw std::logic_error("BatchStatement::Run: no write order (SetWriteOrder)");
  tx.exec_prepared(kWriteOrderName, *write_order_);
  // A digest live in a closed epoch is a duplicate of that row, and is not inserted (answered: the INSERT and the
  // follow-up leave it out).
  const std::size_t in_closed = ProbeClosed(tx, answered, first_seen, recorded, request_known);
  if (in_closed == n) {
    BatchAnswer a;
    AnswerItems(a, inserted, first_seen, recorded, request_known);
    return a;
  }
  if (in_closed > 0) {  // the arrays Add() built hold every digest: again without those
    digests_ = PgBinaryArray(DigestOid(layout_), n, n * StoredBytes(layout_));
    sources_ = PgBinaryArray(kOidText, n, n * 16);
    times_ = PgBinaryArray(kOidInt8, n, n * 8);
    for (std::size_t i = 0; i < n; ++i) {
      if (!answered[i]) AddRowParams(i);
    }
  }
  pqxx::result r;
  if (!pack_) {
    // Only the take-over (a horizon) has the guard's parameter.
    if (retention_.count() > 0) {
      r = tx.exec_prepared(kInsertName, Binary(digests_.Finish()), Binary(sources_.Finish()), Binary(times_.Finish()),
                           guard_us_);
    } else {
      r = tx.exec_prepared(kInsertName, Binary(digests_.Finish()), Binary(sources_.Finish()), Binary(times_.Finish()));
    }
  } else {
    const std::uint32_t oid = DigestOid(layout_);
    PgBinaryArray lots(oid, n, n * StoredBytes(layout_)), expiries(kOidInt4, n, n * 4), keep(kOidInt8, n, n * 8),
        requests(oid, n, n * sizeof(RequestId));
    for (std::size_t i = 0; i < n; ++i) {
      if (answered[i]) continue;  // live in a closed epoch
      const PackAttrs& at = attrs_[i];
      if (at.lot) {
        lots.Add(StoredBytesOf(*at.lot, layout_));
      } else {
        lots.AddNull();
      }
      if (at.expiry) {
        expiries.AddInt4(*at.expiry);
      } else {
        expiries.AddNull();
      }
      keep.AddInt8(at.keep_until_us);
      if (at.request) {
        requests.Add(std::string_view(reinterpret_cast<const char*>(at.request->data()), at.request->size()));
      } else {
        requests.AddNull();
      }
    }
    r = tx.exec_prepared(kPackInsertName, Binary(digests_.Finish()), Binary(sources_.Finish()),
                         Binary(times_.Finish()), Binary(lots.Finish()), Binary(expiries.Finish()),
                         Binary(keep.Finish()), Binary(requests.Finish()), guard_us_);
  }
  BatchAnswer a;
  bool xid_row = false;
  std::int64_t now_us = 0;
  for (const auto& row : r) {
    if (row[0].is_null()) {  // the xid row
      xid_row = true;
      if (!row[1].is_null()) a.xid = row[1].as<std::int64_t>();
      now_us = row[2].as<std::int64_t>();
      continue;
    }
    Digest d;
    if (!DigestFromLayoutHex(std::string_view(row[0].c_str(), row[0].size()), layout_, d)) {
      throw std::runtime_error("batch statement returned a malformed digest");
    }
    const auto it = index_of_.find(d);
    if (it == index_of_.end() || answered[it->second]) {  // answered: inserted already, or live in a closed epoch
      throw std::runtime_error("batch statement returned a digest not in the batch");
    }
    inserted[it->second] = answered[it->second] = 1;
  }
  if (!xid_row) throw std::runtime_error("batch statement returned no xid row");
  for (std::size_t i = 0; i < n; ++i) {
    if (!inserted[i]) continue;
    first_seen[i] = first_seen_us_[i] != 0 ? first_seen_us_[i] : now_us;
    recorded[i] = PackAttrs{attrs_[i].lot, attrs_[i].expiry, 0, attrs_[i].request};
    request_known[i] = 1;
  }

  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!answered[i]) missing.push_back(i);
  }
  if (!missing.empty()) {
    PgBinaryArray missing_digests(DigestOid(layout_), missing.size(), missing.size() * StoredBytes(layout_));
    for (const auto i : missing) missing_digests.Add(StoredBytesOf(digest_[i], layout_));
    const pqxx::result m = tx.exec_prepared(pack_ ? kPackSelectName : kSelectName, Binary(missing_digests.Finish()));
    for (const auto& row : m) {
      const auto k = row[0].as<std::size_t>() - 1;
      if (k >= missing.size()) throw std::runtime_error("follow-up select returned an index out of range");
      answered[missing[k]] = 1;
      first_seen[missing[k]] = row[1].as<std::int64_t>();
      if (!pack_) continue;  // the raw statement does not read the row's record: unknown
      request_known[missing[k]] = 1;
      recorded[missing[k]] = RecordOf(row, 2, layout_);
    }
    for (const auto i : missing) {
      if (!answered[i]) throw std::runtime_error("a digest was neither inserted nor found");
    }
  }

  AnswerItems(a, inserted, first_seen, recorded, request_known);
  return a;
}

void BatchStatement::AnswerItems(BatchAnswer& a, const std::vector<char>& inserted,
                                 const std::vector<std::int64_t>& first_seen, const std::vector<PackAttrs>& recorded,
                                 const std::vector<char>& request_known) const {
  // Formatted once per distinct digest; in-batch repeats share it.
  std::vector<TimeText> formatted(distinct());
  for (std::size_t i = 0; i < formatted.size(); ++i) formatted[i] = Rfc3339MicrosText(first_seen[i]);
  a.results.reserve(slot_.size());
  for (std::size_t i = 0; i < slot_.size(); ++i) {
    const std::uint32_t u = slot_[i];
    const bool won = inserted[u] && first_item_[u] == i;
    a.any_inserted = a.any_inserted || won;
    a.results.push_back(Result{won ? Outcome::kInserted : Outcome::kDuplicate, formatted[u], first_seen[u], recorded[u],
                               request_known[u] != 0});
  }
}

}  // namespace scangate::storage
