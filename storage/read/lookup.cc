#include "storage/read/lookup.h"

#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "core/thread_name.h"
#include "storage/epochs/catalog.h"
#include "storage/pg/table_layout.h"

namespace scangate::storage {

namespace {
constexpr auto kBackoffMin = std::chrono::milliseconds(50);
constexpr const char* kLookupName = "scangate_lookup";
// One digest's live row in any epoch (the open one, scan_keys, and each closed one: sql/018), the newest if several;
// first_seen in the same RFC 3339 shape as the writers' verdicts; the pack columns (lot hex, expiry in days since
// 1970-01-01, keep_until in µs; NULL when none). An expired row — the next observation of the key is `new` — is not
// reported, whether or not the expiry (storage/horizon/expiry.h) has deleted it yet: one past its keep_until, or
// without one, older than $2 = the horizon in µs (0 = off: never), by the take-over's rule (a row's age less the
// steps of the clock since its first_seen, sql/017; one row: no cheap bound first). A template for the table's layout
// (storage/pg/table_layout.h): $1 is the digest as it stores it (32 bytes of bytea or 16 of a uuid), the lot comes
// back in that width. The first column is the epochs' catalog generation, read in the statement's snapshot (always
// one row: NULLs when no row is live): when it is not the one the statement was written for, an epoch closed since
// (its rows are no longer under the names read) and the look-up is made again for the new catalog.
constexpr const char* kLookupHead = R"sql(
SELECT c.generation, r.* FROM scangate_epoch_catalog AS c LEFT JOIN LATERAL (
  SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), source,
         encode({SEND}(lot), 'hex'), expiry - date 'epoch', (extract(epoch FROM keep_until) * 1000000)::int8
  FROM (
)sql";
constexpr const char* kLookupBranch = R"sql(
    SELECT first_seen, {SOURCE} AS source, lot, expiry, keep_until FROM {REL}
    WHERE digest = $1::{DIGEST}
      AND CASE WHEN keep_until IS NOT NULL
               THEN keep_until >= now() - scangate_clock_ahead(first_seen)
               ELSE $2::int8 = 0 OR first_seen >= now() - $2::int8 * interval '1 microsecond' - scangate_clock_ahead(first_seen) END
)sql";
constexpr const char* kLookupTail = R"sql(
  ) AS e ORDER BY first_seen DESC LIMIT 1
) AS r ON true
)sql";

// The look-up over the open epoch and `closed` (plain identifiers: ReadEpochCatalog checked them).
std::string LookupSql(const std::vector<std::string>& closed) {
  std::string sql = kLookupHead + Substitute(kLookupBranch, {{"{REL}", "scan_keys"}});
  for (const std::string& rel : closed) sql += "    UNION ALL" + Substitute(kLookupBranch, {{"{REL}", rel}});
  return sql + kLookupTail;
}

// The catalog moved on under the prepared look-up (its generation is not the statement's).
struct EpochsMoved : std::runtime_error {
  EpochsMoved() : std::runtime_error("the epochs' catalog changed under the look-up") {}
};

}  // namespace

struct Lookup::Conn {
  pqxx::connection c;
  TableLayout layout = TableLayout::kUuid16;  // scan_keys' layout when the statement was prepared
  std::int64_t generation = 0;                // the epochs' catalog the statement was written for
  explicit Conn(const std::string& url) : c(url) {}
};

Lookup::Lookup(LookupOptions options) : options_(std::move(options)), target_(options_.url) {}

void Lookup::Retarget(std::string url) { target_.Set(std::move(url)); }

Lookup::~Lookup() { Shutdown(); }

bool Lookup::Connect() {
  try {
    auto conn = std::make_unique<Conn>(target_.Get(&target_seen_));
    // As in the writers (storage/pg/pg_connection.h): a lost connection must surface as an exception, not a
    // silent reconnect.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    conn->c.inhibit_reactivation(true);
#pragma GCC diagnostic pop
    conn->layout = ReadTableLayout(conn->c);
    const EpochCatalog catalog = ReadEpochCatalog(conn->c, false);
    conn->generation = catalog.generation;
    conn->c.prepare(kLookupName, ForLayout(LookupSql(catalog.relations), conn->layout));
    conn_ = std::move(conn);
    up_.store(true, std::memory_order_release);  // release: pairs with up()
    return true;
  } catch (const std::exception&) {
    conn_.reset();
    up_.store(false, std::memory_order_release);
    return false;
  }
}

void Lookup::Start() {
  Connect();
  thread_ = std::thread([this] {
    SetThreadName("sg-lookup");
    Run();
  });
}

bool Lookup::Find(const Digest& d, LookupDone done) {
  if (!up()) return false;
  const MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= options_.queue_limit) return false;
  queue_.push_back(Item{d, std::move(done)});
  cv_.Signal();
  return true;
}

RecordLookup Lookup::Read(const Digest& d) {
  pqxx::nontransaction tx(conn_->c);  // one SELECT: atomic on its own, no BEGIN/COMMIT round trips
  const std::string_view stored = StoredBytesOf(d, conn_->layout);
  const pqxx::result r = tx.exec_prepared(
      kLookupName, pqxx::binarystring(stored.data(), stored.size()),
      static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(options_.retention).count()));
  if (r.size() != 1) throw std::runtime_error("lookup returned " + std::to_string(r.size()) + " rows, not 1");
  if (r[0][0].as<std::int64_t>() != conn_->generation) throw EpochsMoved();
  const auto row = r[0].slice(1, r[0].size());  // the live row's columns (NULL first_seen: none)
  RecordLookup out;
  if (row[0].is_null()) {
    out.status = RecordLookup::Status::kNotFound;
    return out;
  }
  out.status = RecordLookup::Status::kFound;
  out.first_seen = row[0].c_str();
  if (!row[1].is_null()) out.source = row[1].c_str();
  if (!row[2].is_null()) {  // the lot as the layout stores it (16 bytes: its stored form)
    out.lot.emplace();
    if (!DigestFromLayoutHex(std::string_view(row[2].c_str(), row[2].size()), conn_->layout, *out.lot)) {
      throw std::runtime_error("lookup returned a malformed lot");
    }
  }
  if (!row[3].is_null()) out.expiry = row[3].as<std::int32_t>();
  if (!row[4].is_null()) out.keep_until_us = row[4].as<std::int64_t>();
  return out;
}

void Lookup::Run() {
  auto backoff = kBackoffMin;
  for (;;) {
    std::vector<Item> batch;
    {
      const MutexLock lock(&mu_);
      if (conn_ == nullptr) {
        // Down: wait the backoff (or for shutdown), then try again.
        const auto deadline = std::chrono::steady_clock::now() + backoff;
        while (!stopping_ && !cv_.WaitUntil(&mu_, deadline)) {
        }
      } else {
        while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      }
      if (stopping_) break;
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    // Retargeted: the old database is left before this batch; it is read from the new one.
    if (target_.Changed(target_seen_)) {
      conn_.reset();
      Connect();
    }
    if (conn_ == nullptr) {
      // Reads queued just before the connection broke: answered unavailable, not held across the outage.
      for (Item& item : batch) item.done(RecordLookup{});
      if (Connect()) {
        backoff = kBackoffMin;
      } else {
        backoff = std::min(backoff * 2, options_.reconnect_backoff_max);
      }
      continue;
    }
    for (Item& item : batch) {
      RecordLookup result;  // kUnavailable unless the query succeeds
      if (conn_ != nullptr) {
        try {
          try {
            result = Read(item.digest);
          } catch (const pqxx::sql_error& e) {
            // The table moved to the other layout under the prepared statement (sql/013's swap): read it again on
            // a new connection, which prepares the statement for the layout it finds. Anything else: below.
            if (!IsLayoutChange(e) || !Connect()) throw;
            result = Read(item.digest);
          } catch (const EpochsMoved&) {
            // An epoch closed (or was dropped) since the statement was written: again for the catalog as it is.
            if (!Connect()) throw;
            result = Read(item.digest);
          } catch (const pqxx::broken_connection&) {
            // Lost while idle (PostgreSQL restarted or failed over since the last read): only this read notices.
            // A read is safe to repeat, so it is read once more on a new connection before anyone is told 503 —
            // else the first /lookup, or the first peer-coverage read, after /readyz says 200 again was a 503.
            if (!Connect()) throw;
            result = Read(item.digest);
          }
        } catch (const std::exception&) {
          // Broken connection or a server error: this read (and the rest of the batch) get 503; reconnect.
          conn_.reset();
          up_.store(false, std::memory_order_release);  // release: pairs with up()
          backoff = kBackoffMin;
        }
      }
      item.done(result);
    }
  }
  // Stopping: whatever is still queued is answered unavailable.
  std::deque<Item> rest;
  {
    const MutexLock lock(&mu_);
    rest.swap(queue_);
  }
  for (Item& item : rest) item.done(RecordLookup{});
}

void Lookup::Shutdown() {
  {
    const MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace scangate::storage
