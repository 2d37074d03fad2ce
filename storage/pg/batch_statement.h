// BatchStatement: the statements of one group-commit batch transaction and the mapping of their answer to
// one Result per item. The batch runner (storage/write/batch_runner.h) owns the transaction, retries, COMMIT and
// the in-doubt resolution; this unit owns the SQL, the parameter encoding and the result mapping.
// Invariant: an item gets kInserted only if it is the first item of its digest in the batch AND the batch's
// INSERT inserted that digest; every other item gets kDuplicate with the first_seen PostgreSQL holds (read
// in the same transaction, after the INSERT, so a row committed concurrently is found too) and, for a pack
// batch, the lot and expiry that row holds (an inserted item: what it sent). Use: one per
// batch, on the writer thread; Add() every item in queue order, then Run() inside a transaction (again in a
// fresh transaction after a rollback). Result::request_known says whether an item's recorded.request is the row's:
// always for kInserted, for a duplicate only when the pack statements read the row (the raw ones do not).
//
// Shape (chosen by measurement, bench/RESULTS.md "Batch statement shapes"):
//   0. scangate_write_order(generation) (storage/epochs/catalog.h): the transaction ordered against a change of the
//      epochs' catalog; then, only when some digest may be in a closed epoch (PlanClosedProbes: its summary says
//      maybe, or it has none), one look-up of those digests in those epochs' primary keys: a digest live there is
//      answered kDuplicate of that row and left out of step 1 (closed epochs are immutable: no take-over there).
//   1. INSERT ... SELECT FROM unnest($1::bytea[], $2::text[], $3::int8[]) ORDER BY digest (uuid[] and seen_by in
//      sql/013's layout: the statements are written for the table's layout, storage/pg/table_layout.h)
//      ON CONFLICT DO NOTHING RETURNING digest — the three arrays sent as binary parameters
//      (with a horizon, --retention: ON CONFLICT DO UPDATE ... WHERE first_seen is older than it, so an
//      expired row is taken over and returned as inserted)
//      (storage/pg/pg_array.h), linear in the batch, no per-row formatting; plus one row with
//      txid_current_if_assigned() (the in-doubt COMMIT is settled by it) and now() in µs.
//   2. Only when some digest was not inserted: SELECT its first_seen (µs since the epoch) — a new
//      statement, so a new READ COMMITTED snapshot that also sees rows committed after step 1's snapshot.
// first_seen travels as an integer and is formatted here (core/time_format.h), never by the server.
// Packs (--keys=gs1, issue 24): a batch with PackAttrs (or any batch under StoreOptions::pack_horizons) uses
// the pack statements instead: three more arrays (lot bytea[], expiry int4[] days, keep_until int8[] µs), a
// take-over of rows past their own keep_until (else past the retention), and a follow-up SELECT that also
// returns the row's lot and expiry. A raw batch sends exactly the raw statements above. Idempotency records
// (issue 34, PackAttrs::request, sql/008) ride the pack statements too: a batch with one goes through them (a
// fourth array; a raw key's lot, expiry and keep_until stay NULL), its follow-up SELECT returns the row's record
// (a retry recognises its own), and every take-over replaces it — the raw one with NULL.
// A batch of definitely-new keys (write-behind rows and items the filter called new: Bloom negatives) may
// go by BeginCopy() / CommitCopy() instead: binary COPY FROM STDIN, which skips ON CONFLICT's probe of the
// primary key. COPY cannot skip a row that exists, so a conflict aborts it (CopyConflict) and the writer
// re-runs the batch with Run(). (The COPY path lives in storage/pg/batch_copy.cc; a pack batch's COPY also writes
// lot, expiry and keep_until.)
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <libpq-fe.h>
#include <pqxx/pqxx>

#include "core/closed_epochs.h"
#include "core/digest.h"
#include "core/digest_hash.h"
#include "storage/pg/pg_array.h"
#include "storage/pg/table_layout.h"
#include "storage/outcome.h"

namespace scangate::storage {

// What one run of the batch's statements established (before its COMMIT).
struct BatchAnswer {
  std::vector<Result> results;      // one per item added, in order
  std::optional<std::int64_t> xid;  // txid_current_if_assigned(): empty = the transaction wrote nothing
  bool any_inserted = false;        // some item got kInserted (then an empty xid cannot be trusted)
};

// The COPY found a digest already present (unique_violation): the transaction was rolled back and nothing of
// it holds; write the batch with Run() (ON CONFLICT) instead.
class CopyConflict : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BatchStatement {
 public:
  // Prepares the batch statements on a writer connection for the layout scan_keys has now, and returns it;
  // once per connection, before any Run(). `retention`: the de-duplication horizon (StoreOptions::retention;
  // 0 = off): a row older than it is taken over by the INSERT (kInserted, first_seen and source replaced) instead
  // of answering kDuplicate. Prepares the raw and the pack statements (a row with a keep_until expires by it
  // instead).
  static TableLayout Prepare(pqxx::connection& conn, std::chrono::seconds retention = std::chrono::seconds{0});
  // Prepares the look-up of a batch's digests in the closed epochs whose tables are `relations` (the catalog's
  // order, storage/epochs/catalog.h; none: nothing prepared) for `retention` and `layout`, after Prepare on the same
  // connection, once per catalog read. Relations must be plain identifiers (the catalog checks them).
  static void PrepareClosedProbe(pqxx::connection& conn, const std::vector<std::string>& relations,
                                 std::chrono::seconds retention, TableLayout layout);

  // `pack_horizons` (StoreOptions::pack_horizons): the batch goes through the pack statements even without
  // attrs. `retention`: as Prepare's (the COPY computes a pack row's keep_until with it). `layout`: what Prepare
  // returned on the connection the batch runs on. Digests are told apart as the layout compares them (KeyOf): in
  // the 16-byte layout two digests with one stored form are one digest of the batch.
  explicit BatchStatement(std::size_t expected_items = 0, bool pack_horizons = false,
                          std::chrono::seconds retention = std::chrono::seconds{0},
                          TableLayout layout = TableLayout::kUuid16);

  // Adds the next item of the batch. `source`: empty = NULL; otherwise valid UTF-8 without NUL (the caller
  // validates; PostgreSQL would reject the whole statement otherwise). `first_seen_us`: µs since the
  // epoch, 0 = now() at insert. `attrs`: the pack's lot/expiry/keep_until (empty for raw keys); the row's
  // keep_until becomes max(attrs.keep_until_us, first_seen + retention) when retention is on. A repeated
  // digest keeps its first item's source, time and attrs. `source` must outlive the BatchStatement (BeginCopy
  // reads it again).
  void Add(const Digest& d, std::string_view source, std::int64_t first_seen_us, const PackAttrs& attrs = {});
  // The take-over's clock guard (PgClock::GuardUs of the writer's database; nullopt: none): see sql/017 and
  // batch_statement.cc Guard().
  void SetClockGuard(std::optional<std::int64_t> guard_us) { guard_us_ = guard_us; }
  // The epochs' catalog generation the writer read on its connection (storage/epochs/catalog.h): the first statement
  // of the batch's transaction, scangate_write_order(generation), orders it against a change of the catalog and
  // fails it (SGE01, nothing written) when the catalog moved on. Required: Run() and BeginCopy() throw
  // std::logic_error without it.
  void SetWriteOrder(std::int64_t generation) { write_order_ = generation; }

  // After every Add(): which digests must be looked up in which of `closed` (the catalog the connection's
  // PrepareClosedProbe was given: ClosedEpochs::PlanProbes — a summary that says absent spares the look-up). True when
  // some must: then Run() looks them up first and answers a digest live in a closed epoch kDuplicate of that row
  // (without inserting it); a batch going by BeginCopy must be looked up by ProbeClosedBeforeCopy first.
  bool PlanClosedProbes(const std::vector<ClosedEpoch>& closed);
  // The closed epochs' look-up of a batch that goes by COPY, before it and outside its transaction (`tx`: autocommit
  // on the writer's connection, which then must be idle again): BeginCopy leaves out the digests found live there
  // and answers them kDuplicate of that row. Sound because the epochs a catalog generation lists are immutable (their
  // writers committed before their switch; a close or a drop is a new generation) and the COPY's transaction
  // starts with scangate_write_order(generation), which fails (SGE01) unless the catalog is still the one looked up
  // in. Returns how many digests were found; when that is distinct(), nothing is left to COPY: use Run().
  std::size_t ProbeClosedBeforeCopy(pqxx::transaction_base& tx);

  std::size_t items() const { return slot_.size(); }
  std::size_t distinct() const { return first_item_.size(); }
  // True when the batch goes through the pack statements (pack_horizons, or some item has attrs).
  bool pack() const { return pack_; }

  // Runs the statements in `tx` — scangate_write_order first, so `tx` must be new — and maps the answer. Throws what
  // pqxx throws, or std::runtime_error when the answer does not fit the batch (a digest neither inserted nor found,
  // an unknown digest, no xid row).
  BatchAnswer Run(pqxx::transaction_base& tx);

  // The item index of each distinct digest's first item, in order (a repeated digest's later items answer from it).
  const std::vector<std::uint32_t>& first_items() const { return first_item_; }

  // The COPY path, in two round trips on an idle writer connection (PgConnection::raw(); no pqxx transaction
  // open), instead of four (BEGIN, prologue + COPY, rows, COMMIT: bench/RESULTS.md "BEGIN and COMMIT in the
  // COPY's round trips").
  // BeginCopy sends one simple-protocol query — BEGIN; scangate_write_order(generation); txid_current() and now() µs;
  // COPY ... FROM STDIN; COMMIT
  // — and returns once the COPY is open, with every item kInserted and the xid that settles an in-doubt
  // COMMIT; the rows go sorted by digest (deadlock freedom, as Run()). It throws pqxx::broken_connection when
  // the connection broke (nothing can have committed), or what CommitCopy throws for a definite failure,
  // leaving the connection idle. COPY writes one row per distinct digest (COPY would conflict with itself): a
  // repeated digest's later items are answered kDuplicate of its first, as Run() answers them. Requires items().
  BatchAnswer BeginCopy(PGconn* c);
  // Sends the rows and the end of the COPY, upon which the server runs the query's COMMIT. Returns once it
  // committed. Throws CopyConflict when a digest exists; pqxx::deadlock_detected / serialization_failure /
  // sql_error (with SQLSTATE, so data errors are told apart) for another failure — nothing committed and the
  // connection is idle again; pqxx::in_doubt_error when the connection broke once the end of the COPY may
  // have reached the server (the COMMIT may have run: settle by the xid).
  void CommitCopy(PGconn* c);
  // Undoes a BeginCopy that CommitCopy did not finish: fails the COPY (the query's COMMIT is then skipped)
  // and rolls back. Does nothing on an idle or broken connection. Never throws.
  static void AbandonCopy(PGconn* c) noexcept;

 private:
  // The items' answers from each distinct digest's (inserted, first_seen, recorded, request_known): a digest's
  // first item kInserted when its row was inserted, every other item of it kDuplicate of that row. Run() and
  // BeginCopy() answer the same way through it.
  void AnswerItems(BatchAnswer& a, const std::vector<char>& inserted, const std::vector<std::int64_t>& first_seen,
                   const std::vector<PackAttrs>& recorded, const std::vector<char>& request_known) const;
  // Appends distinct digest i's digest, source (NULL when empty) and first_seen to the INSERT's arrays (Add(), and
  // Run() again without the digests live in a closed epoch).
  void AddRowParams(std::size_t i);
  // Runs the closed epochs' look-up (PlanClosedProbes) in `tx`: each digest live there gets answered, its row's
  // first_seen and record. Returns how many (0 without probes).
  std::size_t ProbeClosed(pqxx::transaction_base& tx, std::vector<char>& answered, std::vector<std::int64_t>& first_seen,
                          std::vector<PackAttrs>& recorded, std::vector<char>& request_known);

  std::vector<std::uint32_t> slot_;        // item -> distinct digest index
  std::vector<std::uint32_t> first_item_;  // distinct digest index -> its first item
  std::vector<Digest> digest_;             // distinct digest index -> digest as the layout compares it (KeyOf)
  std::vector<std::int64_t> first_seen_us_;  // distinct digest index -> requested first_seen (0 = now())
  std::vector<std::string_view> source_;     // distinct digest index -> source ("" = NULL), the caller's bytes
  std::vector<PackAttrs> attrs_;             // distinct digest index -> its first item's attrs
  absl::flat_hash_map<Digest, std::uint32_t, DigestHash, DigestEq> index_of_;  // digest -> distinct digest index
  TableLayout layout_;
  PgBinaryArray digests_;
  PgBinaryArray sources_{kOidText};
  PgBinaryArray times_{kOidInt8};
  std::string copy_rows_;  // BeginCopy -> CommitCopy: the COPY's binary payload
  std::string copy_sql_;   // BeginCopy -> CommitCopy: the query (with the write order's generation)
  bool pack_ = false;
  std::chrono::seconds retention_{0};
  std::optional<std::int64_t> guard_us_;
  std::optional<std::int64_t> write_order_;
  std::vector<EpochProbe> probes_;  // PlanClosedProbes: epoch = the epoch's position in the catalog's order
  std::size_t closed_count_ = 0;    // the closed epochs the prepared look-up has parameters for
  // ProbeClosedBeforeCopy -> BeginCopy: per distinct digest, found live in a closed epoch, and that row's answer.
  std::vector<char> copy_found_;
  std::vector<std::int64_t> copy_found_seen_;
  std::vector<PackAttrs> copy_found_recorded_;
  std::vector<char> copy_found_request_known_;
};

}  // namespace scangate::storage
