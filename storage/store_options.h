// StoreOptions: how storage::Store (storage/store.h) is sized and connected, and the test-only fault hook
// (StoreFault). Each default is written here once: the server's Config (server/config/config.h) and its --help take
// the store's defaults from these constants. Invariant: a default-constructed StoreOptions (with a url) is a
// valid configuration; Store's constructor rejects zero writers, batch_limit or queue_limit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "storage/log_sink.h"

namespace scangate::storage {

// The defaults of the options the server exposes (--writers, --batch-limit, --queue-limit, --flush-interval).
inline constexpr unsigned kDefaultWriters = 2;
inline constexpr std::size_t kDefaultBatchLimit = 1024;
inline constexpr std::size_t kDefaultQueueLimit = 65536;
// Without the journal the write-behind lag is what a crash loses: kept short (server/config/config.cc has the
// journal's longer auto value and its measurements).
inline constexpr std::chrono::microseconds kDefaultFlushInterval{2000};

// A write-behind row that PostgreSQL rejects with a data error (SQLSTATE class 22/23) in a transaction
// of its own this many times is dead-lettered (logged by digest, counted, dropped). Such errors are
// deterministic in practice, so 1 would do; 3 (each retry after kRowRetryPause in batch_runner.cc) absorbs
// a misclassified momentary error at the cost of two extra single-row transactions per bad row.
inline constexpr int kMaxRowAttempts = 3;
// How long a writer tries to settle an in-doubt COMMIT (reconnect, then poll txid_status while "in
// progress") before answering kUnknown — every connection attempt and query included (storage/write/in_doubt.h).
// Below common HTTP client timeouts (5-10 s) so the client still gets an answer; long enough for a
// connection blip or a fast PostgreSQL restart.
inline constexpr std::chrono::milliseconds kInDoubtResolveFor{3000};

// Test-only faults injected by StoreOptions::fault_hook just before a batch's COMMIT.
enum class StoreFault : std::uint8_t {
  kNone,
  kCommitAnswerLost,    // COMMIT succeeds, then the writer behaves as if the connection broke during it
  kLostBeforeCommit,    // the transaction is rolled back instead, then the same "connection broke in COMMIT"
  kXidUnknowable,       // as kCommitAnswerLost, with the noted xid moved 2^32 into the future (PostgreSQL
                        // then answers "transaction ID ... is in the future", as a replaced server would)
  kSocketShutBeforeCommit,  // shutdown(2) the connection's socket, then COMMIT for real: libpq/pqxx's own
                            // failure path (pqxx::in_doubt_error); the server aborts the transaction
};

struct StoreOptions {
  std::string url;                                         // libpq URL
  unsigned writers = kDefaultWriters;                      // writer threads, one connection each
  std::size_t batch_limit = kDefaultBatchLimit;            // max items per transaction
  std::chrono::microseconds flush_interval = kDefaultFlushInterval;  // max write-behind lag (ack=filter)
  std::size_t queue_limit = kDefaultQueueLimit;            // per-store bound on accepted, unfinished items
  std::chrono::milliseconds reconnect_backoff_max{2000};  // a down writer's reconnect pauses double up to this
  // The de-duplication horizon (--retention). 0 = off: a row answers `duplicate` for ever. Otherwise a row whose
  // first_seen is older than this (by PostgreSQL's clock) counts as absent: the batch INSERT takes its place
  // (`new`, first_seen and source replaced: storage/pg/batch_statement.h), whether or not the expiry
  // (storage/horizon/expiry.h) has deleted it yet.
  std::chrono::seconds retention{0};
  // The writers' digest scheme (storage/scheme/scheme_record.h SchemeOption: "-c scangate.digest_scheme=<hex>"):
  // sql/014's guard refuses their inserts once the database's scheme is another. "" = unchecked (tests, tools).
  std::string digest_scheme_option;
  // --keys=gs1 (issue 24): rows may carry their own horizon (PackAttrs::keep_until_us). Every batch then goes
  // through the pack statements, which take over a row past its keep_until even with retention off (a row
  // without one still follows retention). false (raw keys): the statements are exactly the raw ones, unless a
  // batch carries attrs anyway.
  bool pack_horizons = false;
  // How long Shutdown() keeps retrying queued write-behind items while the database is down.
  std::chrono::milliseconds shutdown_retry{30000};
  // How long Start() retries the first connection before throwing (storage/start/startup.h); 0 = one attempt.
  std::chrono::milliseconds start_timeout{30000};
  // Connection safety (storage/pg/conninfo.h), applied unless the URL sets them. statement_timeout bounds a
  // writer's statements: the server sets it a little above --request-timeout, so a statement outliving
  // every waiting request is cancelled (nothing of its batch commits). 0 = none.
  std::chrono::milliseconds statement_timeout{0};
  // Warm load and migrations: the COPY legitimately runs for seconds (10 M keys: 5-26 s measured) and a
  // migration may build an index over the whole table: their own, long bound.
  std::chrono::milliseconds warm_statement_timeout{600000};
  std::chrono::milliseconds tcp_user_timeout{10000};  // unacknowledged data this long: connection dropped
  // WarmLoad parallelism. 1 = one COPY over one connection. N > 1 = when the window is estimated to hold at
  // least warm_parallel_min_fraction of the table's rows, the heap is split into N block ranges by ctid, one
  // connection + thread + COPY per range, all reading one exported snapshot. Otherwise (small recent window)
  // one COPY with the BRIN bitmap scan. Measured on the shared 2-core box (load average 5.5-9), 10 M keys:
  // 1 stream 6.0-9.8 s, 2: 5.7-9.5 s, 3: 4.8-6.2 s, 4: 4.6-5.6 s, 8: 4.5 s (storage/README.md "Figures");
  // 4 is the default, more mostly takes CPU from neighbours.
  unsigned warm_streams = 4;
  double warm_parallel_min_fraction = 0.5;  // estimated rows-in-window / reltuples; 0 = always split
  // Where storage reports events (pg_state, commit_in_doubt, dead_letter, write_behind_lost). Empty =
  // StderrLogSink(). The server passes an adapter to server::Log (one writer, one format).
  std::shared_ptr<LogSink> log;
  // The store's name in its log lines: when non-empty, every line it writes (pg_state, commit_in_doubt,
  // dead_letter, row_rejected, write_behind_lost) carries it as a "partition" field
  // (storage/partitions/partitioned_store.h names its partitions "p0", "p1", ...). Empty (a single database): no such
  // field.
  std::string label;
  // TESTS ONLY. Called on the writer thread once per batch transaction, just before COMMIT; its answer
  // injects a fault (see StoreFault). Empty (the default) costs one branch per batch.
  std::function<StoreFault()> fault_hook;
};

}  // namespace scangate::storage
