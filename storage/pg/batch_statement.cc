#include "storage/pg/batch_statement.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <libpq-fe.h>
#include <memory>
#include <stdexcept>

#include "core/time_format.h"

namespace scangate::storage {
namespace {

constexpr std::size_t kDigestBytes = std::tuple_size_v<Digest>;
static_assert(kDigestBytes == 32);

// $1 = the batch's distinct digests (bytea[]), $2 = their sources (text[], NULL = none), $3 = their first_seen
// in µs since the epoch (int8[], 0 = now(), i.e. the column default) — three binary arrays of equal length.
// Returns one row (hex digest, NULL, NULL) per digest this statement inserted and one last row (NULL, xid,
// now_us): txid_current_if_assigned(), the id an in-doubt COMMIT is settled by (no extra round trip; NULL
// when nothing was inserted — then the outcomes hold whether or not the COMMIT happened, and no xid is
// assigned just to be noted), and now() — the first_seen of every row inserted with $3 = 0 — in µs.
// UNION ALL runs its branches in order, so the xid is read after the inserts; an xid NULL beside an
// inserted row is distrusted anyway (storage/batch_runner.cc). encode(): independent of the session's bytea_output.
// Rows are inserted in digest order so that concurrent batches wait on each other without deadlocks.
// extract(epoch ...) is numeric since PostgreSQL 14, so * 1000000 is exact (timestamptz holds whole µs).
constexpr const char* kInsertName = "scangate_insert_batch";
constexpr const char* kInsertHead = R"sql(
WITH ins AS (
  INSERT INTO scan_keys AS k (digest, source, first_seen)
  SELECT d, s, CASE WHEN us = 0 THEN now() ELSE timestamptz 'epoch' + us * interval '1 microsecond' END
  FROM unnest($1::bytea[], $2::text[], $3::int8[]) AS u(d, s, us)
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
constexpr const char* kConflictTakeOverExpired =
    "  ON CONFLICT (digest) DO UPDATE SET first_seen = EXCLUDED.first_seen, source = EXCLUDED.source\n"
    "    WHERE k.first_seen < now() - {R} * interval '1 microsecond'\n";
constexpr const char* kInsertTail = R"sql(  RETURNING digest
)
SELECT encode(digest, 'hex'), NULL::int8, NULL::int8 FROM ins
UNION ALL
SELECT NULL, txid_current_if_assigned()::int8, (extract(epoch FROM now()) * 1000000)::int8
)sql";

// The batch INSERT for a horizon of `retention` (0 = off). The horizon is a constant of the process,
// written into the prepared statement as an integer literal.
std::string InsertSql(std::chrono::seconds retention) {
  std::string conflict = kConflictKeep;
  if (retention.count() > 0) {
    conflict = kConflictTakeOverExpired;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(retention).count();
    conflict.replace(conflict.find("{R}"), 3, std::to_string(us));
  }
  return std::string(kInsertHead) + conflict + kInsertTail;
}

// Follow-up in the same transaction (a new statement, so a new READ COMMITTED snapshot) for the digests the
// INSERT did not insert: rows present before it, and rows committed by another transaction after its
// snapshot (ON CONFLICT skipped them, waiting for their commit). $1 = those digests (bytea[]); returns
// (i, first_seen µs), i 1-based into $1.
constexpr const char* kSelectName = "scangate_select_existing";
constexpr const char* kSelectSql = R"sql(
SELECT u.i, (extract(epoch FROM k.first_seen) * 1000000)::int8
FROM unnest($1::bytea[]) WITH ORDINALITY AS u(d, i)
JOIN scan_keys k ON k.digest = u.d
)sql";

// BeginCopy's query, one simple-protocol message: BEGIN; the transaction's xid (forced: the COPY writes
// anyway, and an in-doubt COMMIT needs it) and now() — the first_seen of rows with $3 = 0, sent explicitly
// since a binary COPY row cannot ask for the column default — in µs; the COPY, its columns in this order;
// and the COMMIT, which the server runs as soon as the COPY ends. A statement that fails skips the rest of the
// query (so never the COMMIT), leaving the transaction aborted. One message instead of four round trips:
// bench/RESULTS.md "COPY's prologue in the COPY's round trip" and "BEGIN and COMMIT in the COPY's round trips".
constexpr const char* kCopySql =
    "BEGIN; "
    "SELECT txid_current()::int8, (extract(epoch FROM now()) * 1000000)::int8; "
    "COPY scan_keys (digest, source, first_seen) FROM STDIN (FORMAT binary); "
    "COMMIT";
constexpr std::string_view kCopyHeader{"PGCOPY\n\377\r\n\0" "\0\0\0\0" "\0\0\0\0", 19};  // signature, flags, ext
// timestamptz on the wire: µs since 2000-01-01T00:00:00Z.
constexpr std::int64_t kPgEpochUs = 946'684'800'000'000;
constexpr const char* kUniqueViolation = "23505";

struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

// Drains the connection's remaining results (libpq must be idle again before pqxx continues). A COPY that
// has started is failed first (CopyFail: the server answers with an error, and the transaction is aborted):
// libpq would otherwise hand out PGRES_COPY_IN for ever.
void DrainResults(PGconn* c) {
  while (PGresult* r = PQgetResult(c)) {
    const bool copy_in = PQresultStatus(r) == PGRES_COPY_IN;
    PQclear(r);
    if (copy_in && PQputCopyEnd(c, "scangate: COPY abandoned") != 1) break;  // connection gone
  }
}

// Leaves a connection that is still up idle: a started COPY failed, the results drained, an open or aborted
// transaction rolled back.
void Recover(PGconn* c) noexcept {
  if (PQstatus(c) != CONNECTION_OK) return;
  DrainResults(c);
  const PGTransactionStatusType ts = PQtransactionStatus(c);
  if (ts == PQTRANS_INTRANS || ts == PQTRANS_INERROR) PQclear(PQexec(c, "ROLLBACK"));
}

// Raises the pqxx exception pqxx itself would raise for this failure, so the writer classifies it the same
// way (connection lost, deadlock, data error by SQLSTATE), or CopyConflict for a unique violation — after
// leaving a connection that is still up idle (nothing of the COPY committed).
[[noreturn]] void FailCopy(PGconn* c, const PGresult* r) {
  std::string msg = r != nullptr ? PQresultErrorMessage(r) : "";
  if (msg.empty()) msg = PQerrorMessage(c);
  if (msg.empty()) msg = std::string("COPY: unexpected result ") + PQresStatus(PQresultStatus(r));
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string s = state != nullptr ? state : "";
  if (PQstatus(c) != CONNECTION_OK) throw pqxx::broken_connection(msg);
  Recover(c);
  if (s == kUniqueViolation) throw CopyConflict(msg);
  if (s == "40P01") throw pqxx::deadlock_detected(msg);
  if (s == "40001") throw pqxx::serialization_failure(msg);
  throw pqxx::sql_error(msg, kCopySql, s.empty() ? nullptr : s.c_str());
}

// A failure once the end of the COPY has gone (or may have gone) out: on a broken connection the query's COMMIT
// may have run (in doubt: settle by the xid); otherwise it is definite, as FailCopy says.
[[noreturn]] void FailAfterCopyEnd(PGconn* c, const PGresult* r) {
  if (PQstatus(c) != CONNECTION_OK) {
    throw pqxx::in_doubt_error(std::string("connection lost after the end of the COPY (its COMMIT may have run): ") +
                               PQerrorMessage(c));
  }
  FailCopy(c, r);
}

void AppendBe32(std::string& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// encode(digest, 'hex') -> Digest; false unless exactly 64 lowercase hex digits.
bool ParseHexDigest(std::string_view hex, Digest& out) {
  if (hex.size() != 2 * kDigestBytes) return false;
  for (std::size_t i = 0; i < kDigestBytes; ++i) {
    const int hi = HexNibble(hex[2 * i]), lo = HexNibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

// A text-format int8 column; false unless the whole value is a decimal integer.
bool ParseInt64(const char* text, std::int64_t& out) {
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && p == end && p != text;
}

pqxx::binarystring Binary(std::string_view bytes) { return pqxx::binarystring(bytes.data(), bytes.size()); }

}  // namespace

void BatchStatement::Prepare(pqxx::connection& conn, std::chrono::seconds retention) {
  conn.prepare(kInsertName, InsertSql(retention));
  conn.prepare(kSelectName, kSelectSql);
}

BatchStatement::BatchStatement(std::size_t expected_items)
    : digests_(kOidBytea, expected_items, expected_items * kDigestBytes),
      sources_(kOidText, expected_items, expected_items * 16),
      times_(kOidInt8, expected_items, expected_items * 8) {
  slot_.reserve(expected_items);
  first_item_.reserve(expected_items);
  digest_.reserve(expected_items);
  first_seen_us_.reserve(expected_items);
  source_.reserve(expected_items);
  index_of_.reserve(expected_items);
}

void BatchStatement::Add(const Digest& d, std::string_view source, std::int64_t first_seen_us) {
  const auto next = static_cast<std::uint32_t>(first_item_.size());
  const auto [it, fresh] = index_of_.try_emplace(d, next);
  slot_.push_back(it->second);
  if (!fresh) return;
  first_item_.push_back(static_cast<std::uint32_t>(slot_.size() - 1));
  digest_.push_back(d);
  first_seen_us_.push_back(first_seen_us);
  digests_.Add(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
  source_.push_back(source);
  if (source.empty()) {
    sources_.AddNull();
  } else {
    sources_.Add(source);
  }
  times_.AddInt8(first_seen_us);
}

BatchAnswer BatchStatement::Run(pqxx::transaction_base& tx) {
  const std::size_t n = distinct();
  std::vector<char> inserted(n, 0), answered(n, 0);
  std::vector<std::int64_t> first_seen(n, 0);

  const pqxx::result r =
      tx.exec_prepared(kInsertName, Binary(digests_.Finish()), Binary(sources_.Finish()), Binary(times_.Finish()));
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
    if (!ParseHexDigest(std::string_view(row[0].c_str(), row[0].size()), d)) {
      throw std::runtime_error("batch statement returned a malformed digest");
    }
    const auto it = index_of_.find(d);
    if (it == index_of_.end() || inserted[it->second]) {
      throw std::runtime_error("batch statement returned a digest not in the batch");
    }
    inserted[it->second] = answered[it->second] = 1;
  }
  if (!xid_row) throw std::runtime_error("batch statement returned no xid row");
  for (std::size_t i = 0; i < n; ++i) {
    if (inserted[i]) first_seen[i] = first_seen_us_[i] != 0 ? first_seen_us_[i] : now_us;
  }

  std::vector<std::uint32_t> missing;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!answered[i]) missing.push_back(i);
  }
  if (!missing.empty()) {
    PgBinaryArray missing_digests(kOidBytea, missing.size(), missing.size() * kDigestBytes);
    for (const auto i : missing) {
      missing_digests.Add(std::string_view(reinterpret_cast<const char*>(digest_[i].data()), kDigestBytes));
    }
    const pqxx::result m = tx.exec_prepared(kSelectName, Binary(missing_digests.Finish()));
    for (const auto& row : m) {
      const auto k = row[0].as<std::size_t>() - 1;
      if (k >= missing.size()) throw std::runtime_error("follow-up select returned an index out of range");
      answered[missing[k]] = 1;
      first_seen[missing[k]] = row[1].as<std::int64_t>();
    }
    for (const auto i : missing) {
      if (!answered[i]) throw std::runtime_error("a digest was neither inserted nor found");
    }
  }

  // Formatted once per distinct digest; in-batch repeats share it.
  std::vector<std::string> formatted(n);
  for (std::size_t i = 0; i < n; ++i) formatted[i] = Rfc3339Micros(first_seen[i]);
  a.results.reserve(slot_.size());
  for (std::size_t i = 0; i < slot_.size(); ++i) {
    const std::uint32_t u = slot_[i];
    const bool won = inserted[u] && first_item_[u] == i;
    a.any_inserted = a.any_inserted || won;
    a.results.push_back(Result{won ? Outcome::kInserted : Outcome::kDuplicate, formatted[u], first_seen[u]});
  }
  return a;
}

BatchAnswer BatchStatement::BeginCopy(PGconn* c) {
  if (!copy_eligible()) throw std::logic_error("BatchStatement::BeginCopy: repeated digests");
  if (PQstatus(c) != CONNECTION_OK) throw pqxx::broken_connection(PQerrorMessage(c));
  // Inside a transaction the query's BEGIN would only warn, and its COMMIT would end the outer one: refuse.
  if (PQtransactionStatus(c) != PQTRANS_IDLE) throw std::logic_error("BatchStatement::BeginCopy: connection not idle");
  if (PQsendQuery(c, kCopySql) != 1) FailCopy(c, nullptr);
  const std::size_t n = distinct();
  std::vector<std::uint32_t> order(n);  // sorted while the server starts the transaction
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    return DigestLess{}(digest_[x], digest_[y]);  // bytea order
  });
  {
    PgResult begin(PQgetResult(c));
    if (PQresultStatus(begin.get()) != PGRES_COMMAND_OK) FailCopy(c, begin.get());
  }
  BatchAnswer a;
  std::int64_t now_us = 0;
  {
    PgResult pro(PQgetResult(c));
    if (PQresultStatus(pro.get()) != PGRES_TUPLES_OK || PQntuples(pro.get()) != 1 || PQnfields(pro.get()) != 2) {
      FailCopy(c, pro.get());
    }
    std::int64_t xid = 0;
    if (!ParseInt64(PQgetvalue(pro.get(), 0, 0), xid) || !ParseInt64(PQgetvalue(pro.get(), 0, 1), now_us)) {
      Recover(c);
      throw std::runtime_error("COPY prologue returned a malformed xid or time");
    }
    a.xid = xid;
  }
  {
    PgResult r(PQgetResult(c));  // the COPY's start
    if (PQresultStatus(r.get()) != PGRES_COPY_IN) FailCopy(c, r.get());
  }

  std::vector<std::int64_t> first_seen(n);
  std::string& buf = copy_rows_;
  buf.assign(kCopyHeader);
  buf.reserve(kCopyHeader.size() + n * (2 + 4 + kDigestBytes + 4 + 16 + 4 + 8) + 2);
  for (const auto i : order) {
    first_seen[i] = first_seen_us_[i] != 0 ? first_seen_us_[i] : now_us;
    buf.append("\0\3", 2);  // field count
    AppendBe32(buf, kDigestBytes);
    buf.append(reinterpret_cast<const char*>(digest_[i].data()), kDigestBytes);
    if (source_[i].empty()) {
      AppendBe32(buf, 0xFFFFFFFFu);  // NULL
    } else {
      AppendBe32(buf, static_cast<std::uint32_t>(source_[i].size()));
      buf.append(source_[i]);
    }
    const auto pg_us = static_cast<std::uint64_t>(first_seen[i] - kPgEpochUs);
    AppendBe32(buf, 8);
    AppendBe32(buf, static_cast<std::uint32_t>(pg_us >> 32));
    AppendBe32(buf, static_cast<std::uint32_t>(pg_us));
  }
  buf.append("\377\377", 2);  // trailer

  std::vector<std::string> formatted(n);
  for (std::size_t i = 0; i < n; ++i) formatted[i] = Rfc3339Micros(first_seen[i]);
  a.results.reserve(n);
  for (std::size_t i = 0; i < slot_.size(); ++i) {
    a.results.push_back(Result{Outcome::kInserted, formatted[slot_[i]], first_seen[slot_[i]]});
  }
  a.any_inserted = true;
  return a;
}

void BatchStatement::CommitCopy(PGconn* c) {
  // Until the end of the COPY is sent the server cannot run the COMMIT: a connection lost here is a plain
  // failure (broken_connection), retried like any other.
  if (PQputCopyData(c, copy_rows_.data(), static_cast<int>(copy_rows_.size())) != 1) FailCopy(c, nullptr);
  if (PQputCopyEnd(c, nullptr) != 1) FailAfterCopyEnd(c, nullptr);
  PgResult copy(PQgetResult(c));
  if (PQresultStatus(copy.get()) != PGRES_COMMAND_OK) FailAfterCopyEnd(c, copy.get());  // COMMIT skipped
  PgResult commit(PQgetResult(c));
  if (PQresultStatus(commit.get()) != PGRES_COMMAND_OK) FailAfterCopyEnd(c, commit.get());  // rolled back
  // A COMMIT of an aborted transaction succeeds with the tag ROLLBACK: nothing committed.
  if (std::string_view(PQcmdStatus(commit.get())) != "COMMIT") {
    Recover(c);
    throw pqxx::sql_error(std::string("COPY's COMMIT answered ") + PQcmdStatus(commit.get()), kCopySql);
  }
  DrainResults(c);
}

void BatchStatement::AbandonCopy(PGconn* c) noexcept { Recover(c); }

}  // namespace scangate::storage
