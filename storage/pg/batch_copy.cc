// BatchStatement's COPY path (storage/pg/batch_statement.h: BeginCopy, CommitCopy, AbandonCopy): a batch of
// definitely-new rows as one binary COPY FROM STDIN inside one simple-protocol query, and the libpq plumbing
// that leaves the connection idle whatever happens. Split from batch_statement.cc (the ON CONFLICT path).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <libpq-fe.h>
#include <memory>
#include <stdexcept>

#include "storage/pg/pg_binary.h"
#include "storage/pg/batch_statement.h"

namespace scangate::storage {
namespace {

// BeginCopy's query, one simple-protocol message: BEGIN; the write order (storage/epochs/catalog.h: its statement of
// its own, before anything that writes; BeginCopy writes the generation into it); the transaction's xid (forced: the
// COPY writes anyway, and an in-doubt COMMIT needs it) and now() — the first_seen of rows with $3 = 0, sent explicitly
// since a binary COPY row cannot ask for the column default — in µs; the COPY, its columns in this order;
// and the COMMIT, which the server runs as soon as the COPY ends. A statement that fails skips the rest of the
// query (so never the COMMIT), leaving the transaction aborted. One message instead of four round trips:
// bench/RESULTS.md "COPY's prologue in the COPY's round trip" and "BEGIN and COMMIT in the COPY's round trips".
// A template for the table's layout (storage/pg/table_layout.h ForLayout: the source column's name; a digest field
// is 32 bytes of bytea or the 16 of a uuid).
constexpr const char* kCopySql =
    "SELECT txid_current()::int8, (extract(epoch FROM now()) * 1000000)::int8; "
    "COPY scan_keys (digest, {SOURCE}, first_seen) FROM STDIN (FORMAT binary); "
    "COMMIT";
constexpr std::string_view kCopyHeader{"PGCOPY\n\377\r\n\0" "\0\0\0\0" "\0\0\0\0", 19};  // signature, flags, ext
constexpr const char* kUniqueViolation = "23505";
// The pack COPY (a batch with PackAttrs): the same query with the pack columns and the idempotency record
// (sql/008); NULL where an item has none.
constexpr const char* kPackCopySql =
    "SELECT txid_current()::int8, (extract(epoch FROM now()) * 1000000)::int8; "
    "COPY scan_keys (digest, {SOURCE}, first_seen, lot, expiry, keep_until, request) FROM STDIN (FORMAT binary); "
    "COMMIT";
// The COPY query of a batch (pack or raw) for `layout` after its BEGIN and write order, written once per process.
const std::string& CopySql(bool pack, TableLayout layout) {
  static const std::string kSql[2][2] = {
      {ForLayout(kCopySql, TableLayout::kBytea32), ForLayout(kPackCopySql, TableLayout::kBytea32)},
      {ForLayout(kCopySql, TableLayout::kUuid16), ForLayout(kPackCopySql, TableLayout::kUuid16)}};
  return kSql[layout == TableLayout::kBytea32 ? 0 : 1][pack ? 1 : 0];
}
// date on the wire: days since 2000-01-01.
constexpr std::int32_t kPgEpochDays = 10'957;

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
[[noreturn]] void FailCopy(PGconn* c, const PGresult* r, const char* sql) {
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
  throw pqxx::sql_error(msg, sql, s.empty() ? nullptr : s.c_str());
}

// A failure once the end of the COPY has gone (or may have gone) out: on a broken connection the query's COMMIT
// may have run (in doubt: settle by the xid); otherwise it is definite, as FailCopy says.
[[noreturn]] void FailAfterCopyEnd(PGconn* c, const PGresult* r, const char* sql) {
  if (PQstatus(c) != CONNECTION_OK) {
    throw pqxx::in_doubt_error(std::string("connection lost after the end of the COPY (its COMMIT may have run): ") +
                               PQerrorMessage(c));
  }
  FailCopy(c, r, sql);
}

void AppendBe32(std::string& out, std::uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.append(b, 4);
}

// One timestamptz field (length 8, µs since 2000-01-01) of a binary COPY row.
void AppendTimestamp(std::string& out, std::int64_t unix_us) {
  const auto pg_us = static_cast<std::uint64_t>(unix_us - kPgEpochUs);
  AppendBe32(out, 8);
  AppendBe32(out, static_cast<std::uint32_t>(pg_us >> 32));
  AppendBe32(out, static_cast<std::uint32_t>(pg_us));
}

// One digest field of a binary COPY row: the bytes `layout` stores (32 of a bytea, 16 of a uuid).
void AppendDigest(std::string& out, const Digest& d, TableLayout layout) {
  const std::string_view bytes = StoredBytesOf(d, layout);
  AppendBe32(out, static_cast<std::uint32_t>(bytes.size()));
  out.append(bytes);
}

// The pack columns of one binary COPY row: lot (a digest field), expiry (date), keep_until (timestamptz), request
// (16 bytes: a bytea or a uuid alike), NULL when absent. keep_until as the INSERT computes it: max(the pack's,
// first_seen + retention) when retention is on.
void AppendPackFields(std::string& out, const PackAttrs& a, std::int64_t first_seen_us, std::int64_t retention_us,
                      TableLayout layout) {
  if (a.lot) {
    AppendDigest(out, *a.lot, layout);
  } else {
    AppendBe32(out, 0xFFFFFFFFu);
  }
  if (a.expiry) {
    AppendBe32(out, 4);
    AppendBe32(out, static_cast<std::uint32_t>(*a.expiry - kPgEpochDays));
  } else {
    AppendBe32(out, 0xFFFFFFFFu);
  }
  if (a.keep_until_us != 0) {
    AppendTimestamp(out, retention_us > 0 ? std::max(a.keep_until_us, first_seen_us + retention_us) : a.keep_until_us);
  } else {
    AppendBe32(out, 0xFFFFFFFFu);
  }
  if (a.request) {
    AppendBe32(out, static_cast<std::uint32_t>(a.request->size()));
    out.append(reinterpret_cast<const char*>(a.request->data()), a.request->size());
  } else {
    AppendBe32(out, 0xFFFFFFFFu);
  }
}

// A text-format int8 column; false unless the whole value is a decimal integer.
bool ParseInt64(const char* text, std::int64_t& out) {
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, out);
  return ec == std::errc() && p == end && p != text;
}

}  // namespace

BatchAnswer BatchStatement::BeginCopy(PGconn* c) {
  if (items() == 0) throw std::logic_error("BatchStatement::BeginCopy: empty batch");
  if (PQstatus(c) != CONNECTION_OK) throw pqxx::broken_connection(PQerrorMessage(c));
  // Inside a transaction the query's BEGIN would only warn, and its COMMIT would end the outer one: refuse.
  if (PQtransactionStatus(c) != PQTRANS_IDLE) throw std::logic_error("BatchStatement::BeginCopy: connection not idle");
  if (!write_order_) throw std::logic_error("BatchStatement::BeginCopy: no write order (SetWriteOrder)");
  copy_sql_ = "BEGIN; SELECT scangate_write_order(" + std::to_string(*write_order_) + "); " + CopySql(pack_, layout_);
  const char* sql = copy_sql_.c_str();
  if (PQsendQuery(c, sql) != 1) FailCopy(c, nullptr, sql);
  const std::size_t n = distinct();
  std::vector<std::uint32_t> order(n);  // sorted while the server starts the transaction
  for (std::uint32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    return DigestLess{}(digest_[x], digest_[y]);  // bytea (uuid) order: the stored bytes compared unsigned
  });
  {
    PgResult begin(PQgetResult(c));
    if (PQresultStatus(begin.get()) != PGRES_COMMAND_OK) FailCopy(c, begin.get(), sql);
  }
  {
    PgResult order(PQgetResult(c));  // SGE01 here: the catalog moved on (nothing of the query runs after it)
    if (PQresultStatus(order.get()) != PGRES_TUPLES_OK) FailCopy(c, order.get(), sql);
  }
  BatchAnswer a;
  std::int64_t now_us = 0;
  {
    PgResult pro(PQgetResult(c));
    if (PQresultStatus(pro.get()) != PGRES_TUPLES_OK || PQntuples(pro.get()) != 1 || PQnfields(pro.get()) != 2) {
      FailCopy(c, pro.get(), sql);
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
    if (PQresultStatus(r.get()) != PGRES_COPY_IN) FailCopy(c, r.get(), sql);
  }

  std::vector<std::int64_t> first_seen(n);
  const std::int64_t retention_us = std::chrono::duration_cast<std::chrono::microseconds>(retention_).count();
  std::string& buf = copy_rows_;
  buf.assign(kCopyHeader);
  const std::size_t digest_bytes = StoredBytes(layout_);
  buf.reserve(kCopyHeader.size() +
              n * (2 + 4 + digest_bytes + 4 + 16 + 4 + 8 + (pack_ ? 4 + digest_bytes + 8 + 12 + 4 + sizeof(RequestId) : 0)) +
              2);
  const bool found_any = !copy_found_.empty();  // ProbeClosedBeforeCopy ran: its finds are not written
  std::vector<PackAttrs> recorded(n);
  std::vector<char> inserted(n, 1), request_known(n, 1);
  for (const auto i : order) {
    if (found_any && copy_found_[i]) {  // live in a closed epoch: a duplicate of that row
      inserted[i] = 0;
      first_seen[i] = copy_found_seen_[i];
      recorded[i] = copy_found_recorded_[i];
      request_known[i] = copy_found_request_known_[i];
      continue;
    }
    first_seen[i] = first_seen_us_[i] != 0 ? first_seen_us_[i] : now_us;
    buf.append(pack_ ? "\0\7" : "\0\3", 2);  // field count
    AppendDigest(buf, digest_[i], layout_);
    if (source_[i].empty()) {
      AppendBe32(buf, 0xFFFFFFFFu);  // NULL
    } else {
      AppendBe32(buf, static_cast<std::uint32_t>(source_[i].size()));
      buf.append(source_[i]);
    }
    AppendTimestamp(buf, first_seen[i]);
    if (pack_) AppendPackFields(buf, attrs_[i], first_seen[i], retention_us, layout_);
  }
  buf.append("\377\377", 2);  // trailer

  // Every distinct digest's row was written (but those found in a closed epoch); a later item of a digest (a repeat
  // that reached the batch while its first observation was in it) is a duplicate of that row, with its time and
  // request record, as Run() answers.
  for (std::size_t i = 0; i < n; ++i) {
    if (inserted[i]) recorded[i] = PackAttrs{attrs_[i].lot, attrs_[i].expiry, 0, attrs_[i].request};
  }
  AnswerItems(a, inserted, first_seen, recorded, request_known);
  return a;
}

void BatchStatement::CommitCopy(PGconn* c) {
  const char* sql = copy_sql_.c_str();
  // Until the end of the COPY is sent the server cannot run the COMMIT: a connection lost here is a plain
  // failure (broken_connection), retried like any other.
  if (PQputCopyData(c, copy_rows_.data(), static_cast<int>(copy_rows_.size())) != 1) FailCopy(c, nullptr, sql);
  if (PQputCopyEnd(c, nullptr) != 1) FailAfterCopyEnd(c, nullptr, sql);
  PgResult copy(PQgetResult(c));
  if (PQresultStatus(copy.get()) != PGRES_COMMAND_OK) FailAfterCopyEnd(c, copy.get(), sql);  // COMMIT skipped
  PgResult commit(PQgetResult(c));
  if (PQresultStatus(commit.get()) != PGRES_COMMAND_OK) FailAfterCopyEnd(c, commit.get(), sql);  // rolled back
  // A COMMIT of an aborted transaction succeeds with the tag ROLLBACK: nothing committed.
  if (std::string_view(PQcmdStatus(commit.get())) != "COMMIT") {
    Recover(c);
    throw pqxx::sql_error(std::string("COPY's COMMIT answered ") + PQcmdStatus(commit.get()), sql);
  }
  DrainResults(c);
}

void BatchStatement::AbandonCopy(PGconn* c) noexcept { Recover(c); }

}  // namespace scangate::storage
