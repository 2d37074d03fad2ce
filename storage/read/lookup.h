// Lookup: read-only answers to "what does PostgreSQL hold for this digest?" (POST /lookup), on its own
// connection and thread so operator reads never queue behind (or slow) the group-commit writers of
// storage/store.h. Invariant: it never writes; kFound/kNotFound come only from a query that succeeded, any
// failure is kUnavailable (-> 503), never "not found". It reconnects by itself with exponential backoff.
// Use one Lookup per process; completions run on its thread and must post to the caller's executor.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/digest.h"
#include "core/mutex.h"
#include "storage/conn_target.h"

namespace scangate::storage {

// What PostgreSQL holds for one digest, as Lookup read it (named apart from the journal drain's own lookup).
struct RecordLookup {
  enum class Status : std::uint8_t { kFound, kNotFound, kUnavailable };
  Status status = Status::kUnavailable;
  std::string first_seen;             // RFC 3339 UTC with microseconds (kFound only)
  std::optional<std::string> source;  // kFound: the recorded source, nullopt when none
  // kFound, packs (--keys=gs1): the row's lot digest, expiry (days since 1970-01-01) and own horizon (µs since
  // the epoch); nullopt when the row has none (raw keys always).
  std::optional<Digest> lot;
  std::optional<std::int32_t> expiry;
  std::optional<std::int64_t> keep_until_us;
};
using LookupDone = std::function<void(const RecordLookup&)>;

// What the HTTP side needs: tests substitute an in-memory fake.
class DigestReader {
 public:
  virtual ~DigestReader() = default;
  // Queues a read of `d`; `done` runs exactly once on another thread. Returns false — `done` never runs —
  // when PostgreSQL is known to be down, the queue is full or the reader is stopping. Thread-safe.
  virtual bool Find(const Digest& d, LookupDone done) = 0;
};

struct LookupOptions {
  std::string url;                                        // libpq URL
  std::size_t queue_limit = 1024;                         // queued reads; beyond it Find refuses (503)
  std::chrono::milliseconds reconnect_backoff_max{2000};  // backoff doubles from 50 ms up to this
  // The horizon (StoreOptions::retention); 0 = off. An expired row is kNotFound: one past its keep_until, or —
  // without one — older than the retention (the rule of the batch INSERT's take-over).
  std::chrono::seconds retention{0};
};

class Lookup final : public DigestReader {
 public:
  explicit Lookup(LookupOptions options);
  ~Lookup() override;  // calls Shutdown()
  Lookup(const Lookup&) = delete;
  Lookup& operator=(const Lookup&) = delete;

  // One connection attempt now (failure is not fatal: the thread keeps retrying), then starts the thread.
  void Start();
  bool Find(const Digest& d, LookupDone done) override;
  // Completes what is queued with kUnavailable and joins the thread. Idempotent.
  void Shutdown();
  bool up() const { return up_.load(std::memory_order_acquire); }  // acquire: pairs with the thread's store
  // Reads go to `url` from the next one on; the current connection is dropped then (a partition moved:
  // storage/partitions/partitioned_store.h). Thread-safe.
  void Retarget(std::string url);

 private:
  struct Item {
    Digest digest;
    LookupDone done;
  };
  struct Conn;
  void Run();
  bool Connect();
  RecordLookup Read(const Digest& d);  // throws on database errors

  const LookupOptions options_;
  ConnTarget<std::string> target_;  // options.url, or the last Retarget's
  std::uint64_t target_seen_ = 0;   // the generation of target_ conn_ follows; as conn_
  std::unique_ptr<Conn> conn_;  // the thread's (and Start()'s, before the thread exists) only
  std::atomic<bool> up_{false};
  Mutex mu_;
  CondVar cv_;  // signalled when an item is queued and when stopping_ is set
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace scangate::storage
