#include "storage/store.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <limits>
#include <libpq-fe.h>

#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "storage/conninfo.h"
#include "storage/migrations.h"
#include "storage/start_error.h"

namespace scangate::storage {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kBackoffMin{50};  // first reconnect delay; doubles up to reconnect_backoff_max
// deadlock_detected / serialization_failure are retried on the same connection this many times before the
// batch counts as failed. Inserts are sorted by digest, so concurrent batches should never deadlock.
constexpr int kMaxRollbackRetries = 3;
constexpr std::size_t kWarmChunkKeys = 65536;   // digests per sink() call in WarmLoad (2 MiB)
constexpr std::size_t kMaxErrorChars = 300;    // pg_state log lines keep only the first line, truncated
constexpr std::size_t kDigestBytes = std::tuple_size_v<Digest>;
static_assert(kDigestBytes == 32);

struct DigestHash {
  std::size_t operator()(const Digest& d) const noexcept {
    std::uint64_t h;
    std::memcpy(&h, d.data(), sizeof h);  // digests are uniformly distributed already
    return static_cast<std::size_t>(h);
  }
};

std::string NowRfc3339() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// First line of a libpq/pqxx message (DETAIL lines can quote row values), bounded.
std::string ErrorSummary(std::string_view what) {
  what = what.substr(0, what.find('\n'));
  if (what.size() > kMaxErrorChars) what = what.substr(0, kMaxErrorChars);
  return std::string(what);
}

// One JSON line on stderr. Never carries a key or digest: only state and libpq's error summary.
void LogLine(std::string_view level, std::string_view event, std::string_view fields) {
  std::string line = "{\"ts\":\"" + NowRfc3339() + "\",\"level\":\"";
  line += level;
  line += "\",\"event\":\"";
  line += event;
  line += '"';
  line += fields;
  line += "}\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void LogPgState(bool up, unsigned writer, const std::string& error) {
  std::string fields = ",\"state\":\"";
  fields += up ? "up" : "down";
  fields += "\",\"writer\":" + std::to_string(writer);
  if (!up) {
    fields += ",\"error\":";
    AppendJsonString(fields, error);
  }
  LogLine(up ? "info" : "warn", "pg_state", fields);
}

// Sources go into a text[] literal; invalid UTF-8 or NUL would fail the whole batch (and a write-behind
// item would then be retried forever), so such a source is stored as NULL instead.
bool ValidUtf8NoNul(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c == 0) return false;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

void AppendArrayElement(std::string& out, std::string_view source) {
  if (source.empty()) {
    out += "NULL";
    return;
  }
  out += '"';
  for (const char c : source) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

constexpr std::array<double, 11> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
constexpr std::array<double, 11> kCommitBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                  0.05,   0.1,   0.25,   0.5,   1};

template <std::size_t N>
void Observe(const std::array<double, N>& bounds, std::array<std::uint64_t, N + 1>& counts, double v) {
  std::size_t i = 0;
  while (i < N && v > bounds[i]) ++i;
  ++counts[i];
}

template <std::size_t N>
std::vector<std::pair<double, std::uint64_t>> Cumulative(const std::array<double, N>& bounds,
                                                         const std::array<std::uint64_t, N + 1>& counts) {
  std::vector<std::pair<double, std::uint64_t>> out;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < N; ++i) {
    sum += counts[i];
    out.emplace_back(bounds[i], sum);
  }
  out.emplace_back(std::numeric_limits<double>::infinity(), sum + counts[N]);
  return out;
}

}  // namespace

struct Store::Item {
  Digest digest;
  std::string source;
  Completion done;            // empty for write-behind
  bool write_behind;
  Clock::time_point enqueued;
  std::shared_ptr<Ticket> ticket;  // Submit items only, optional
};

struct Store::Writer {
  unsigned index = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Item> queue;            // guarded by mu
  std::size_t waiting = 0;           // Submit (non-write-behind) items in queue; guarded by mu
  bool up = false;                   // guarded by mu; Submit refuses while false
  bool stop = false;                 // guarded by mu
  std::atomic<bool> up_flag{false};  // mirror of `up` for lock-free reads by up()
  std::unique_ptr<pqxx::connection> conn;  // writer thread only (Start() before the thread exists)
  std::thread thread;
};

struct Store::Metrics {
  mutable std::mutex mu;  // taken once per batch by a writer; Stats() copies under it
  std::uint64_t batches = 0, keys_written = 0, inserted = 0, duplicates = 0, unavailable = 0;
  std::uint64_t write_behind_conflicts = 0, batch_failures = 0, write_behind_lost = 0;
  std::array<std::uint64_t, kBatchBounds.size() + 1> batch_counts{};
  double batch_sum = 0;
  std::array<std::uint64_t, kCommitBounds.size() + 1> commit_counts{};
  double commit_sum = 0;
};

Store::Store(StoreOptions options) : options_(std::move(options)), metrics_(std::make_unique<Metrics>()) {
  if (options_.writers == 0) throw std::invalid_argument("StoreOptions.writers must be at least 1");
  if (options_.batch_limit == 0) throw std::invalid_argument("StoreOptions.batch_limit must be at least 1");
  if (options_.queue_limit == 0) throw std::invalid_argument("StoreOptions.queue_limit must be at least 1");
  if (options_.reconnect_backoff_max < kBackoffMin) options_.reconnect_backoff_max = kBackoffMin;
  ConnectionDefaults defaults;
  defaults.statement_timeout = options_.statement_timeout;
  defaults.tcp_user_timeout = options_.tcp_user_timeout;
  writer_conninfo_ = WithConnectionDefaults(options_.url, defaults);  // throws std::invalid_argument
  defaults.statement_timeout = options_.warm_statement_timeout;
  warm_conninfo_ = WithConnectionDefaults(options_.url, defaults);
}

Store::~Store() { Shutdown(); }

void Store::Start() {
  if (started_.exchange(true)) throw std::logic_error("Store::Start called twice");
  const auto deadline = Clock::now() + options_.start_timeout;
  auto backoff = kBackoffMin;
  for (;;) {
    try {
      // The long statement bound: a future migration may build an index over millions of rows.
      pqxx::connection conn(warm_conninfo_);
      ApplyMigrations(conn);
      break;
    } catch (const std::exception& e) {
      StartError error = ClassifyStartError(e);
      // Only a connection failure that may heal is retried here (until start_timeout).
      if (error.permanent() || dynamic_cast<const pqxx::broken_connection*>(&e) == nullptr ||
          Clock::now() + backoff > deadline) {
        throw error;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min<std::chrono::milliseconds>(backoff * 2, options_.reconnect_backoff_max);
    }
  }
  for (unsigned i = 0; i < options_.writers; ++i) {
    auto w = std::make_unique<Writer>();
    w->index = i;
    std::string error;
    if (Connect(*w, &error)) {
      w->up = true;
      w->up_flag.store(true);
    }
    writers_.push_back(std::move(w));
  }
  accepting_.store(true);
  for (auto& w : writers_) {
    Writer* raw = w.get();
    w->thread = std::thread([this, raw] { RunWriter(*raw); });
  }
}

bool Store::Enqueue(std::uint32_t route, const Digest& d, std::string source, Completion done,
                    bool write_behind, std::shared_ptr<Ticket> ticket) {
  if (!accepting_.load() || writers_.empty()) return false;
  Writer& w = *writers_[route % writers_.size()];
  if (!write_behind && !w.up_flag.load()) return false;  // fail fast, without touching the lock
  if (pending_.fetch_add(1) >= options_.queue_limit) {
    pending_.fetch_sub(1);
    return false;
  }
  if (!ValidUtf8NoNul(source)) source.clear();
  bool notify;
  {
    std::lock_guard lk(w.mu);
    if (w.stop || (!write_behind && !w.up)) {
      pending_.fetch_sub(1);
      return false;
    }
    const bool was_empty = w.queue.empty();
    w.queue.push_back(Item{d, std::move(source), std::move(done), write_behind, Clock::now(), std::move(ticket)});
    if (!write_behind) ++w.waiting;
    // A write-behind item only needs to wake the writer to start its flush timer (queue was empty) or
    // when it completes a batch; otherwise the writer is already committing or timing the flush.
    notify = !write_behind || was_empty || w.queue.size() >= options_.batch_limit;
  }
  if (notify) w.cv.notify_one();
  return true;
}

bool Store::Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                   std::shared_ptr<Ticket> ticket) {
  if (!done) done = [](const Result&) {};
  return Enqueue(route, d, std::move(source), std::move(done), false, std::move(ticket));
}

bool Store::SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source) {
  return Enqueue(route, d, std::move(source), nullptr, true, nullptr);
}

bool Store::up() const {
  if (writers_.empty()) return false;
  for (const auto& w : writers_) {
    if (!w->up_flag.load()) return false;
  }
  return true;
}

void Store::RunWriter(Writer& w) {
  auto backoff = kBackoffMin;
  std::optional<Clock::time_point> give_up_at;  // set once shutdown is seen while the database is down
  std::vector<Item> batch;
  std::vector<Result> results;
  batch.reserve(options_.batch_limit);
  for (;;) {
    if (!w.conn) {
      // Down (a batch failed, or the connection made by Start() failed). The failing batch already
      // tried one immediate reconnect, so wait first: 50 ms, 100 ms, ... up to reconnect_backoff_max.
      {
        std::unique_lock lk(w.mu);
        if (w.stop) {
          if (w.queue.empty()) return;
          if (!give_up_at) give_up_at = Clock::now() + options_.shutdown_retry;
          if (Clock::now() >= *give_up_at) {
            lk.unlock();
            GiveUp(w);
            return;
          }
        }
        const bool stop_seen = w.stop;
        // Wake early only when Shutdown() begins: new write-behind items must not cause a reconnect storm.
        w.cv.wait_for(lk, backoff, [&] { return w.stop && !stop_seen; });
      }
      if (!Connect(w, nullptr)) {
        backoff = std::min<std::chrono::milliseconds>(backoff * 2, options_.reconnect_backoff_max);
        continue;
      }
      backoff = kBackoffMin;
      {
        std::lock_guard lk(w.mu);
        w.up = true;
        w.up_flag.store(true);
      }
      LogPgState(true, w.index, "");
      continue;
    }

    {
      std::unique_lock lk(w.mu);
      for (;;) {
        if (w.queue.empty()) {
          if (w.stop) return;
          w.cv.wait(lk);
          continue;
        }
        if (w.waiting > 0 || w.stop || w.queue.size() >= options_.batch_limit) break;
        const auto deadline = w.queue.front().enqueued + options_.flush_interval;
        if (Clock::now() >= deadline) break;
        w.cv.wait_until(lk, deadline);
      }
      std::size_t skipped = 0;
      while (!w.queue.empty() && batch.size() < options_.batch_limit) {
        Item& front = w.queue.front();
        if (!front.write_behind) --w.waiting;
        if (front.ticket && !front.ticket->Take()) {
          ++skipped;  // cancelled by its submitter (deadline passed while queued): never written
        } else {
          batch.push_back(std::move(front));
        }
        w.queue.pop_front();
      }
      if (skipped > 0) {
        cancelled_.fetch_add(skipped);
        pending_.fetch_sub(skipped);
      }
    }
    if (batch.empty()) continue;  // everything taken was cancelled

    try {
      try {
        WriteBatch(w, batch, results);
      } catch (const pqxx::in_doubt_error&) {
        throw;  // COMMIT was sent and the connection lost: the outcome is unknown, never retry blindly
      } catch (const std::exception&) {
        // Any other failure happened before COMMIT or was a definite COMMIT failure, so nothing of this
        // batch committed and running it again cannot turn an insert into a "duplicate". If the
        // connection is gone (typically: the server restarted while it sat idle), reconnect at once and
        // retry the batch once; only if that fails does the writer go down.
        if (w.conn && w.conn->is_open()) throw;
        w.conn.reset();
        std::string error;
        if (!Connect(w, &error)) throw std::runtime_error("connection lost; reconnect failed: " + error);
        WriteBatch(w, batch, results);
      }
    } catch (const std::exception& e) {
      FailBatch(w, batch, ErrorSummary(e.what()));
      batch.clear();
      results.clear();
      continue;
    }
    Finish(batch, results);
    batch.clear();
    results.clear();
  }
}

namespace {

// One statement decides a whole batch. $1 = the batch's distinct digests concatenated (bytea, sent in
// binary), $2 = their sources (text[]; NULL = none), element i of $2 belongs to bytes (i-1)*32 .. i*32-1.
// Returns (i, inserted, first_seen) per digest: rows this statement inserted, plus rows already present
// in its snapshot. A row committed by another transaction after the snapshot is neither (ON CONFLICT
// skips it, the snapshot cannot see it): the caller resolves those with kSelectExistingSql.
// Rows are inserted in digest order so that concurrent batches wait on each other without deadlocks.
constexpr const char* kInsertBatchName = "scangate_insert_batch";
constexpr const char* kInsertBatchSql = R"sql(
WITH input AS (
  SELECT s.i::int AS i, substring($1::bytea FROM (s.i::int - 1) * 32 + 1 FOR 32) AS digest, s.source
  FROM unnest($2::text[]) WITH ORDINALITY AS s(source, i)
), inserted AS (
  INSERT INTO scan_keys (digest, source)
  SELECT digest, source FROM input ORDER BY digest
  ON CONFLICT (digest) DO NOTHING
  RETURNING digest, first_seen
)
SELECT input.i, true,
       to_char(inserted.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM inserted JOIN input USING (digest)
UNION ALL
SELECT input.i, false,
       to_char(k.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM input JOIN scan_keys k USING (digest)
)sql";

// Follow-up in the same transaction (a new statement, so a new READ COMMITTED snapshot) for digests the
// batch statement did not answer. $1 = those digests concatenated; returns (i, first_seen), i 1-based.
constexpr const char* kSelectExistingName = "scangate_select_existing";
constexpr const char* kSelectExistingSql = R"sql(
SELECT g.i,
       to_char(k.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM generate_series(1, octet_length($1::bytea) / 32) AS g(i)
JOIN scan_keys k ON k.digest = substring($1::bytea FROM (g.i - 1) * 32 + 1 FOR 32)
)sql";

}  // namespace

// Every writer connection prepares the batch statements once.
bool Store::Connect(Writer& w, std::string* error) {
  try {
    auto conn = std::make_unique<pqxx::connection>(writer_conninfo_);
    // pqxx 6 would otherwise reconnect silently inside the next transaction; the writer owns
    // reconnection (backoff, up/down state), so a lost connection must surface as an exception.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    conn->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    conn->prepare(kInsertBatchName, kInsertBatchSql);
    conn->prepare(kSelectExistingName, kSelectExistingSql);
    w.conn = std::move(conn);
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = ErrorSummary(e.what());
    return false;
  }
}

void Store::WriteBatch(Writer& w, std::vector<Item>& batch, std::vector<Result>& results) {
  // De-duplicate: the first queued item of each digest is the candidate for insertion.
  std::unordered_map<Digest, std::uint32_t, DigestHash> unique_of;
  unique_of.reserve(batch.size() * 2);
  std::vector<std::uint32_t> slot(batch.size());     // item -> distinct digest index
  std::vector<std::uint32_t> first_item;              // distinct digest index -> first item
  first_item.reserve(batch.size());
  std::string digests;
  std::string sources = "{";
  for (std::uint32_t i = 0; i < batch.size(); ++i) {
    auto [it, fresh] = unique_of.try_emplace(batch[i].digest, static_cast<std::uint32_t>(first_item.size()));
    slot[i] = it->second;
    if (!fresh) continue;
    if (!first_item.empty()) sources += ',';
    first_item.push_back(i);
    digests.append(reinterpret_cast<const char*>(batch[i].digest.data()), kDigestBytes);
    AppendArrayElement(sources, batch[i].source);
  }
  sources += '}';
  const std::size_t distinct = first_item.size();

  std::vector<std::string> first_seen(distinct);
  std::vector<char> inserted(distinct, 0);
  const auto started = Clock::now();
  for (int attempt = 0;; ++attempt) {
    std::vector<char> answered(distinct, 0);
    std::fill(inserted.begin(), inserted.end(), 0);
    try {
      pqxx::work tx(*w.conn);
      const pqxx::result r =
          tx.exec_prepared(kInsertBatchName, pqxx::binarystring(digests.data(), digests.size()), sources);
      for (const auto& row : r) {
        const auto i = row[0].as<std::size_t>() - 1;
        if (i >= distinct) throw std::runtime_error("batch statement returned an index out of range");
        answered[i] = 1;
        inserted[i] = row[1].as<bool>() ? 1 : 0;
        first_seen[i] = row[2].c_str();
      }
      std::vector<std::uint32_t> missing;
      for (std::uint32_t i = 0; i < distinct; ++i) {
        if (!answered[i]) missing.push_back(i);
      }
      if (!missing.empty()) {
        // Committed by a concurrent transaction after our snapshot: a new statement sees it.
        std::string missing_digests;
        for (const auto i : missing) {
          missing_digests.append(reinterpret_cast<const char*>(batch[first_item[i]].digest.data()), kDigestBytes);
        }
        const pqxx::result m = tx.exec_prepared(
            kSelectExistingName, pqxx::binarystring(missing_digests.data(), missing_digests.size()));
        for (const auto& row : m) {
          const auto k = row[0].as<std::size_t>() - 1;
          if (k >= missing.size()) throw std::runtime_error("follow-up select returned an index out of range");
          answered[missing[k]] = 1;
          first_seen[missing[k]] = row[1].c_str();
        }
        for (const auto i : missing) {
          if (!answered[i]) throw std::runtime_error("a digest was neither inserted nor found");
        }
      }
      tx.commit();
      break;
    } catch (const pqxx::deadlock_detected&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    } catch (const pqxx::serialization_failure&) {
      if (attempt + 1 >= kMaxRollbackRetries) throw;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();

  results.resize(batch.size());
  std::uint64_t n_inserted = 0, n_duplicates = 0, n_conflicts = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::uint32_t u = slot[i];
    const bool won = inserted[u] && first_item[u] == i;
    results[i].outcome = won ? Outcome::kInserted : Outcome::kDuplicate;
    results[i].first_seen = first_seen[u];
    (won ? n_inserted : n_duplicates) += 1;
    if (!won && batch[i].write_behind) ++n_conflicts;
  }
  std::lock_guard lk(metrics_->mu);
  auto& m = *metrics_;
  ++m.batches;
  m.keys_written += distinct;
  m.inserted += n_inserted;
  m.duplicates += n_duplicates;
  m.write_behind_conflicts += n_conflicts;
  Observe(kBatchBounds, m.batch_counts, static_cast<double>(batch.size()));
  m.batch_sum += static_cast<double>(batch.size());
  Observe(kCommitBounds, m.commit_counts, seconds);
  m.commit_sum += seconds;
}

void Store::Finish(std::vector<Item>& items, const std::vector<Result>& results) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].write_behind || !items[i].done) continue;
    // Queued items failed by an outage were never taken: the one that wins here completes, a cancelled
    // one stays silent (its submitter already answered).
    if (items[i].ticket && !items[i].ticket->Take()) {
      cancelled_.fetch_add(1);
      continue;
    }
    try {
      items[i].done(results[i]);
    } catch (...) {
      // A completion must not throw; the writer must survive one that does.
    }
  }
  pending_.fetch_sub(items.size());
}

void Store::FailBatch(Writer& w, std::vector<Item>& batch, const std::string& error) {
  w.conn.reset();
  std::vector<Item> failed;
  {
    std::lock_guard lk(w.mu);
    w.up = false;
    w.up_flag.store(false);
    // Write-behind items go back to the front, in their original order.
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (it->write_behind) w.queue.push_front(std::move(*it));
    }
    for (auto& item : batch) {
      if (!item.write_behind) failed.push_back(std::move(item));
    }
    // Waiting items still queued would otherwise wait out the outage: they fail now too.
    std::deque<Item> keep;
    for (auto& item : w.queue) {
      if (item.write_behind) {
        keep.push_back(std::move(item));
      } else {
        failed.push_back(std::move(item));
      }
    }
    w.queue.swap(keep);
    w.waiting = 0;
  }
  LogPgState(false, w.index, error);
  const Result unavailable{Outcome::kUnavailable, {}};
  std::vector<Result> results(failed.size(), unavailable);
  {
    std::lock_guard lk(metrics_->mu);
    ++metrics_->batch_failures;
    metrics_->unavailable += failed.size();
  }
  Finish(failed, results);
}

void Store::GiveUp(Writer& w) {
  std::deque<Item> left;
  {
    std::lock_guard lk(w.mu);
    left.swap(w.queue);
    w.waiting = 0;
  }
  std::vector<Item> items(std::make_move_iterator(left.begin()), std::make_move_iterator(left.end()));
  std::uint64_t lost = 0;
  for (const auto& item : items) lost += item.write_behind ? 1 : 0;
  if (lost > 0) {
    LogLine("error", "write_behind_lost",
            ",\"writer\":" + std::to_string(w.index) + ",\"items\":" + std::to_string(lost));
  }
  const Result unavailable{Outcome::kUnavailable, {}};
  std::vector<Result> results(items.size(), unavailable);
  {
    std::lock_guard lk(metrics_->mu);
    metrics_->write_behind_lost += lost;
    metrics_->unavailable += items.size() - lost;
  }
  Finish(items, results);
}

void Store::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    accepting_.store(false);
    for (auto& w : writers_) {
      {
        std::lock_guard lk(w->mu);
        w->stop = true;
      }
      w->cv.notify_all();
    }
    for (auto& w : writers_) {
      if (w->thread.joinable()) w->thread.join();
      w->conn.reset();
    }
  });
}

namespace {

// WarmLoad: COPY (query) TO STDOUT in binary format over a plain libpq connection (pqxx 6.4 can neither
// COPY from a query nor read binary results). Binary saves the server's hex encoding and our parsing:
// 33 MB instead of 64 MB on the wire per million keys. COPY takes no bind parameters, so the window goes
// into the text as an integer number of seconds.
constexpr const char* kWarmCopySqlPrefix =
    "COPY (SELECT digest FROM scan_keys WHERE first_seen > now() - make_interval(secs => ";
constexpr const char* kWarmCopySqlSuffix = ")) TO STDOUT (FORMAT binary)";
constexpr std::string_view kCopyBinarySignature{"PGCOPY\n\377\r\n\0", 11};

// Incremental parser of a binary COPY stream whose rows are a single 32-byte bytea. libpq hands over
// one CopyData message per call; the parser does not assume any alignment of rows to messages.
class CopyDigestParser {
 public:
  explicit CopyDigestParser(const std::function<void(std::span<const Digest>)>& sink) : sink_(sink) {
    chunk_.reserve(kWarmChunkKeys);
  }

  void Feed(std::string_view data) {
    if (!pending_.empty()) {
      pending_.append(data);
      const std::size_t used = Parse(pending_);
      pending_.erase(0, used);
    } else {
      const std::size_t used = Parse(data);
      pending_.assign(data.substr(used));
    }
  }

  std::uint64_t Finish() {
    if (!trailer_seen_ || !pending_.empty()) throw std::runtime_error("WarmLoad: truncated COPY stream");
    Flush();
    return total_;
  }

 private:
  static std::uint32_t Be32(const char* p) {
    return (std::uint32_t{static_cast<unsigned char>(p[0])} << 24) |
           (std::uint32_t{static_cast<unsigned char>(p[1])} << 16) |
           (std::uint32_t{static_cast<unsigned char>(p[2])} << 8) | std::uint32_t{static_cast<unsigned char>(p[3])};
  }
  static std::int16_t Be16(const char* p) {
    return static_cast<std::int16_t>((static_cast<unsigned char>(p[0]) << 8) | static_cast<unsigned char>(p[1]));
  }

  // Consumes complete items from `data`; returns the number of bytes used.
  std::size_t Parse(std::string_view data) {
    std::size_t pos = 0;
    if (!header_seen_) {
      constexpr std::size_t kFixed = 11 + 4 + 4;  // signature, flags, header extension length
      if (data.size() < kFixed) return 0;
      if (data.substr(0, 11) != kCopyBinarySignature) throw std::runtime_error("WarmLoad: bad COPY signature");
      const std::size_t ext = Be32(data.data() + 15);
      if (data.size() < kFixed + ext) return 0;
      pos = kFixed + ext;
      header_seen_ = true;
    }
    constexpr std::size_t kRow = 2 + 4 + kDigestBytes;  // field count, field length, bytes
    while (!trailer_seen_ && data.size() - pos >= 2) {
      const std::int16_t fields = Be16(data.data() + pos);
      if (fields == -1) {
        trailer_seen_ = true;
        pos += 2;
        break;
      }
      if (fields != 1) throw std::runtime_error("WarmLoad: unexpected COPY row shape");
      if (data.size() - pos < kRow) break;
      if (Be32(data.data() + pos + 2) != kDigestBytes) throw std::runtime_error("WarmLoad: digest is not 32 bytes");
      Digest& d = chunk_.emplace_back();
      std::memcpy(d.data(), data.data() + pos + 6, kDigestBytes);
      pos += kRow;
      if (chunk_.size() == kWarmChunkKeys) Flush();
    }
    return pos;
  }

  void Flush() {
    if (chunk_.empty()) return;
    total_ += chunk_.size();
    sink_(chunk_);
    chunk_.clear();
  }

  const std::function<void(std::span<const Digest>)>& sink_;
  std::vector<Digest> chunk_;
  std::string pending_;
  bool header_seen_ = false;
  bool trailer_seen_ = false;
  std::uint64_t total_ = 0;
};

struct PgConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultClearer {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultClearer>;

}  // namespace

namespace {

using PgConnPtr = std::unique_ptr<PGconn, PgConnCloser>;

constexpr unsigned kMaxWarmStreams = 16;  // connections one WarmLoad may open

PgConnPtr WarmConnect(const std::string& url) {
  PgConnPtr conn(PQconnectdb(url.c_str()));
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

struct WarmAbort {};  // another stream failed: stop quietly, its error is the one reported

// Runs one `COPY (query) TO STDOUT (FORMAT binary)` on `conn`, feeding digests to `sink`; returns the count.
std::uint64_t RunWarmCopy(PGconn* conn, const std::string& sql,
                          const std::function<void(std::span<const Digest>)>& sink, const std::atomic<bool>* abort) {
  {
    PgResultPtr r(PQexec(conn, sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_COPY_OUT) {
      throw std::runtime_error("WarmLoad: " + ErrorSummary(PQerrorMessage(conn)));
    }
  }
  CopyDigestParser parser(sink);
  for (;;) {
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) throw WarmAbort{};  // advisory flag only
    char* buf = nullptr;
    const int n = PQgetCopyData(conn, &buf, 0);
    if (n > 0) {
      std::unique_ptr<char, decltype(&PQfreemem)> owned(buf, &PQfreemem);
      parser.Feed(std::string_view(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n == -2) throw std::runtime_error("WarmLoad: " + ErrorSummary(PQerrorMessage(conn)));
    break;  // -1: COPY finished
  }
  bool ok = true;
  std::string error;
  while (PGresult* raw = PQgetResult(conn)) {
    PgResultPtr r(raw);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      ok = false;
      error = ErrorSummary(PQresultErrorMessage(r.get()));
    }
  }
  if (!ok) throw std::runtime_error("WarmLoad: " + error);
  return parser.Finish();
}

// Coordinator query, run as the first statement of a REPEATABLE READ transaction: the snapshot every
// stream imports, the heap size in blocks (taken after the snapshot, so every visible row lies below it
// or in the open-ended last range), the cutoff as an absolute timestamp (one now() for all streams),
// and the planner's row estimates for the whole table and for the window (pg_class.reltuples is -1
// before the first ANALYZE: then the estimate is unknown and the heap is split).
constexpr const char* kWarmPlanSql =
    "SELECT pg_export_snapshot(), "
    "pg_relation_size('scan_keys') / current_setting('block_size')::bigint, "
    "(now() - make_interval(secs => $1))::text, "
    "(SELECT reltuples FROM pg_class WHERE oid = 'scan_keys'::regclass)";

}  // namespace

std::uint64_t Store::WarmLoad(std::chrono::seconds window,
                              const std::function<void(std::span<const Digest>)>& sink) {
  const unsigned streams = std::clamp(options_.warm_streams, 1u, kMaxWarmStreams);
  PgConnPtr coord = WarmConnect(warm_conninfo_);
  if (streams == 1) {
    const std::string sql = kWarmCopySqlPrefix + std::to_string(window.count()) + kWarmCopySqlSuffix;
    const std::uint64_t n = RunWarmCopy(coord.get(), sql, sink, nullptr);
    last_warm_streams_.store(1);
    return n;
  }
  WarmExec(coord.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
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
    std::string q = "COPY (SELECT digest FROM scan_keys WHERE " + where;
    if (n_streams > 1) {
      const long long b0 = blocks * i / n_streams, b1 = blocks * (i + 1) / n_streams;
      if (i > 0) q += " AND ctid >= '(" + std::to_string(b0) + ",0)'::tid";
      if (i + 1 < n_streams) q += " AND ctid < '(" + std::to_string(b1) + ",0)'::tid";  // last range open-ended
    }
    return q + ") TO STDOUT (FORMAT binary)";
  };

  // Each stream: own connection, REPEATABLE READ transaction importing the coordinator's snapshot (so the
  // ranges partition one consistent set of rows), its COPY. The coordinator's transaction stays open until
  // every stream has finished (a snapshot can only be imported while its exporter is open).
  std::atomic<bool> abort{false};
  std::mutex error_mu;
  std::exception_ptr first_error;
  std::vector<std::uint64_t> counts(n_streams, 0);
  const auto run_stream = [&](unsigned i) {
    try {
      PgConnPtr conn = WarmConnect(warm_conninfo_);
      WarmExec(conn.get(), "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      WarmExec(conn.get(), "SET TRANSACTION SNAPSHOT '" + snapshot + "'");
      counts[i] = RunWarmCopy(conn.get(), copy_sql(i), sink, &abort);
      WarmExec(conn.get(), "COMMIT");
    } catch (const WarmAbort&) {
    } catch (...) {
      std::lock_guard lk(error_mu);
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
  WarmExec(coord.get(), "COMMIT");
  last_warm_streams_.store(n_streams);
  std::uint64_t total = 0;
  for (const auto c : counts) total += c;
  return total;
}

StoreStats Store::Stats() const {
  StoreStats s{};
  s.up = up();
  s.queue_depth = pending_.load();
  std::lock_guard lk(metrics_->mu);
  const auto& m = *metrics_;
  s.batches = m.batches;
  s.keys_written = m.keys_written;
  s.inserted = m.inserted;
  s.duplicates = m.duplicates;
  s.unavailable = m.unavailable;
  s.write_behind_conflicts = m.write_behind_conflicts;
  s.batch_failures = m.batch_failures;
  s.write_behind_lost = m.write_behind_lost;
  s.last_warm_streams = last_warm_streams_.load();
  s.cancelled = cancelled_.load();
  s.batch_size_buckets = Cumulative(kBatchBounds, m.batch_counts);
  s.batch_size_sum = m.batch_sum;
  s.batch_size_count = s.batch_size_buckets.back().second;
  s.commit_seconds_buckets = Cumulative(kCommitBounds, m.commit_counts);
  s.commit_seconds_sum = m.commit_sum;
  s.commit_seconds_count = s.commit_seconds_buckets.back().second;
  return s;
}

}  // namespace scangate::storage
