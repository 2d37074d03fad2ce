// Store::WarmLoad (declared in storage/store.h): the digests of the recent window, streamed from
// every epoch (scan_keys, the open one, and the closed ones the epochs' catalog lists: sql/018) by binary COPY over
// plain libpq connections — one, or N reading one exported snapshot, scan_keys in ctid ranges and the closed epochs
// shared out among them — read by storage/pg/copy_out.h. The catalog is read in the load's snapshot, and read again
// after it: when it changed meanwhile (an epoch closed: its rows left the name scan_keys for one the load did not
// read), the load is made again. The batch writers live in storage/write/writer.h and
// storage/write/batch_runner.h.
#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/thread_name.h"
#include "storage/epochs/catalog.h"
#include "storage/pg/copy_out.h"
#include "storage/pg/error_summary.h"
#include "storage/pg/libpq_handles.h"
#include "storage/store.h"
#include "storage/write/writer_context.h"

namespace scangate::storage {
namespace {

// WarmLoad: COPY (query) TO STDOUT in binary format over a plain libpq connection (pqxx 6.4 can neither
// COPY from a query nor read binary results). Binary saves the server's hex encoding and our parsing:
// 33 MB instead of 64 MB on the wire per million keys. COPY takes no bind parameters, so the window goes
// into the text as an integer number of seconds.
constexpr const char* kWarmWhereSqlPrefix =
    "first_seen > now() - (SELECT scangate_clock_ahead_total()) - make_interval(secs => ";

// The epochs' catalog in the load's snapshot: its generation, then the closed epochs' tables (oldest first).
constexpr const char* kWarmGenerationSql = "SELECT generation FROM scangate_epoch_catalog";
constexpr const char* kWarmClosedSql =
    "SELECT relation FROM scangate_epochs WHERE state <> 'open' ORDER BY opened_at, id";
// How often a load is made again when the catalog changed under it before it gives up (a switch is rare: minutes
// or hours apart; a catalog that changes under every load is a fault).
constexpr int kWarmAttempts = 3;

constexpr unsigned kMaxWarmStreams = 16;  // connections one WarmLoad may open

PgConnPtr WarmConnect(const std::string& url) {
  PgConnPtr conn(PQconnectdb(url.c_str()));
  DropNotices(conn.get());
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    throw pqxx::broken_connection("WarmLoad: " + ErrorSummary(conn ? PQerrorMessage(conn.get()) : "out of memory"));
  }
  return conn;
}

// Runs a statement that returns no COPY; returns its result (tuples or command ok) or throws.
PgResultPtr WarmExec(PGconn* conn, const std::string& sql) {
  PgResultPtr r(PQexec(conn, sql.c_str()));
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    throw std::runtime_error("WarmLoad: " + ErrorSummary(PQerrorMessage(conn)));
  }
  return r;
}

// Coordinator query, run as the first statement of a REPEATABLE READ transaction: the snapshot every
// stream imports, the heap size in blocks (taken after the snapshot, so every visible row lies below it
// or in the open-ended last range), the cutoff as an absolute timestamp (one now() for all streams),
// and the planner's row estimates for the whole table and for the window (pg_class.reltuples is -1
// before the first ANALYZE: then the estimate is unknown and the heap is split).
constexpr const char* kWarmPlanSql =
    "SELECT pg_export_snapshot(), "
    "pg_relation_size('scan_keys') / current_setting('block_size')::bigint, "
    "(now() - (SELECT scangate_clock_ahead_total()) - make_interval(secs => $1))::text, "
    "(SELECT reltuples FROM pg_class WHERE oid = 'scan_keys'::regclass)";

struct WarmCatalog {
  std::string generation;
  std::vector<std::string> closed;  // plain identifiers (checked)
};

// The catalog's generation on `conn`, in its current transaction's snapshot (or a new one outside a transaction).
std::string ReadWarmGeneration(PGconn* conn) {
  PgResultPtr r = WarmExec(conn, kWarmGenerationSql);
  if (PQntuples(r.get()) != 1) throw std::runtime_error("WarmLoad: scangate_epoch_catalog does not hold one row");
  return PQgetvalue(r.get(), 0, 0);
}

// The catalog on `conn`, in its current transaction's snapshot.
WarmCatalog ReadWarmCatalog(PGconn* conn) {
  WarmCatalog c{ReadWarmGeneration(conn), {}};
  PgResultPtr r = WarmExec(conn, kWarmClosedSql);
  for (int i = 0; i < PQntuples(r.get()); ++i) c.closed.push_back(RequirePlainRelation(PQgetvalue(r.get(), i, 0)));
  return c;
}

// COPY of `relation`'s digests matching `where`, with more conditions `and` (a ctid range).
std::string WarmCopySql(const std::string& relation, const std::string& where, const std::string& and_ = "") {
  return "COPY (SELECT digest FROM " + relation + " WHERE " + where + and_ + ") TO STDOUT (FORMAT binary)";
}

}  // namespace

std::uint64_t Store::WarmLoad(std::chrono::seconds window,
                              const std::function<void(std::span<const Digest>)>& sink) {
  for (int attempt = 1;; ++attempt) {
    bool catalog_moved = false;
    const std::uint64_t n = WarmLoadOnce(window, sink, catalog_moved);
    if (!catalog_moved) return n;
    if (attempt >= kWarmAttempts) {
      throw std::runtime_error("WarmLoad: the epochs' catalog changed under each of " + std::to_string(attempt) +
                               " loads");
    }
  }
}

std::uint64_t Store::WarmLoadOnce(std::chrono::seconds window,
                                  const std::function<void(std::span<const Digest>)>& sink, bool& catalog_moved) {
  const unsigned streams = std::clamp(options_.warm_streams, 1u, kMaxWarmStreams);
  // One target for the whole load (a Retarget meanwhile applies to the next one): the streams read the
  // coordinator's exported snapshot, which exists only in its database.
  const std::string conninfo = shared_->target.Get().warm_conninfo;
  PgConnPtr coord = WarmConnect(conninfo);
  WarmExec(coord.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  std::string generation;  // the catalog's, in the load's snapshot
  // Ends the load's transaction and reads the generation again, in a new snapshot.
  const auto commit = [&] {
    WarmExec(coord.get(), "COMMIT");
    catalog_moved = ReadWarmGeneration(coord.get()) != generation;
  };
  if (streams == 1) {
    const WarmCatalog catalog = ReadWarmCatalog(coord.get());  // the transaction's snapshot, kept for the COPYs
    generation = catalog.generation;
    const std::string where = kWarmWhereSqlPrefix + std::to_string(window.count()) + ")";
    std::uint64_t n = CopyDigestsOut(coord.get(), WarmCopySql("scan_keys", where), sink, nullptr, "WarmLoad");
    for (const std::string& rel : catalog.closed) {
      n += CopyDigestsOut(coord.get(), WarmCopySql(rel, where), sink, nullptr, "WarmLoad");
    }
    commit();
    last_warm_streams_.store(1);
    return n;
  }
  std::string snapshot, cutoff;
  long long blocks = 0;
  double reltuples = -1;
  {
    const std::string secs = std::to_string(window.count());
    const char* params[1] = {secs.c_str()};
    PgResultPtr r(PQexecParams(coord.get(), kWarmPlanSql, 1, nullptr, params, nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
      throw std::runtime_error("WarmLoad: " + ErrorSummary(PQerrorMessage(coord.get())));
    }
    snapshot = PQgetvalue(r.get(), 0, 0);
    blocks = std::atoll(PQgetvalue(r.get(), 0, 1));
    cutoff = PQgetvalue(r.get(), 0, 2);
    reltuples = std::atof(PQgetvalue(r.get(), 0, 3));
  }
  const WarmCatalog catalog = ReadWarmCatalog(coord.get());  // in the exported snapshot
  generation = catalog.generation;
  // Text values from the server go into SQL text (COPY takes no parameters): make sure they cannot quote out.
  const auto plain = [](const std::string& v) { return v.find_first_of("'\\") == std::string::npos; };
  if (!plain(snapshot) || !plain(cutoff)) throw std::runtime_error("WarmLoad: unexpected snapshot/cutoff text");
  const std::string where = "first_seen > '" + cutoff + "'::timestamptz";

  // Split only when the window covers a large part of the table: a small recent window is a cheap BRIN
  // bitmap scan that one stream reads best (each TID-range stream would repeat the BRIN scan and the
  // planner may pick it per range anyway). The estimate is the planner's own (EXPLAIN) rows.
  bool split = blocks >= static_cast<long long>(streams);
  if (split && options_.warm_parallel_min_fraction > 0 && reltuples > 0) {
    PgResultPtr r = WarmExec(coord.get(), "EXPLAIN SELECT digest FROM scan_keys WHERE " + where);
    const std::string line = PQntuples(r.get()) > 0 ? PQgetvalue(r.get(), 0, 0) : "";
    const auto at = line.find(" rows=");
    const double est = at == std::string::npos ? reltuples : std::atof(line.c_str() + at + 6);
    split = est >= options_.warm_parallel_min_fraction * reltuples;
  }
  const unsigned n_streams = split ? streams : 1;
  const auto copy_sql = [&](unsigned i) {
    std::string range;
    if (n_streams > 1) {
      const long long b0 = blocks * i / n_streams, b1 = blocks * (i + 1) / n_streams;
      if (i > 0) range += " AND ctid >= '(" + std::to_string(b0) + ",0)'::tid";
      if (i + 1 < n_streams) range += " AND ctid < '(" + std::to_string(b1) + ",0)'::tid";  // last range open-ended
    }
    return WarmCopySql("scan_keys", where, range);
  };

  // Each stream: own connection, REPEATABLE READ transaction importing the coordinator's snapshot (so the
  // ranges partition one consistent set of rows), its COPY. The coordinator's transaction stays open until
  // every stream has finished (a snapshot can only be imported while its exporter is open).
  std::atomic<bool> abort{false};
  Mutex error_mu;
  std::exception_ptr first_error;  // under error_mu until the streams are joined
  std::vector<std::uint64_t> counts(n_streams, 0);
  const auto run_stream = [&](unsigned i) {
    SetThreadName("sg-warm-" + std::to_string(i));
    try {
      PgConnPtr conn = WarmConnect(conninfo);
      WarmExec(conn.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      WarmExec(conn.get(), "SET TRANSACTION SNAPSHOT '" + snapshot + "'");
      counts[i] = CopyDigestsOut(conn.get(), copy_sql(i), sink, &abort, "WarmLoad");
      // The closed epochs, shared out among the streams (whole: an epoch is read by one stream).
      for (std::size_t e = i; e < catalog.closed.size(); e += n_streams) {
        counts[i] += CopyDigestsOut(conn.get(), WarmCopySql(catalog.closed[e], where), sink, &abort, "WarmLoad");
      }
      WarmExec(conn.get(), "COMMIT");
    } catch (const CopyOutAborted&) {  // another stream failed: its error is the one reported
    } catch (...) {
      const MutexLock lk(&error_mu);
      if (!first_error) first_error = std::current_exception();
      abort.store(true, std::memory_order_relaxed);  // advisory: others poll it between COPY messages
    }
  };
  {
    std::vector<std::jthread> threads;
    threads.reserve(n_streams);
    for (unsigned i = 0; i < n_streams; ++i) threads.emplace_back(run_stream, i);
  }  // joins
  if (first_error) std::rethrow_exception(first_error);
  commit();
  last_warm_streams_.store(n_streams);
  std::uint64_t total = 0;
  for (const auto c : counts) total += c;
  return total;
}

}  // namespace scangate::storage
