// CloseOneEpoch: the close of one `closing` epoch (sql/020; issue 54) — its rows rewritten compact and sorted, its
// membership summary built from them, both swapped into the catalog and the closing table dropped. Invariant: every
// digest the closing table holds is in the compact table and in its summary before the catalog names them (the
// closing table is immutable: its writers all committed before its switch), and the swap takes the write order's
// exclusive side, so a writer checks either the closing table row by row or the compact one through its summary,
// never neither. Each step can be run again after an interruption anywhere (scangate_epoch_compact reuses a whole
// table; scangate_epoch_close does nothing for an epoch closed already). One close at a time per database, across
// instances (a session advisory lock tried, not waited for). Use: from the epoch switcher's pass
// (storage/epochs/switcher.h), on its own connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "storage/pg/pg_connection.h"

namespace scangate::storage {

struct EpochClose {
  std::int64_t epoch = 0;        // the epoch's id
  bool closed = false;           // false: postponed (its locks did not come within lock_timeout, every attempt)
  int attempts = 0;              // swap attempts made
  std::int64_t keys = 0;         // rows of the compact table
  std::size_t summary_bytes = 0;
  double compact_seconds = 0;    // the rewrite
  double summary_seconds = 0;    // reading the digests into the summary
  double swap_seconds = 0;       // the swap's transaction, lock waits included (the last attempt)
};

struct EpochMerge {
  std::vector<std::int64_t> epochs;  // the closed epochs merged, oldest first
  bool merged = false;               // false: postponed (its locks did not come), or another instance merged first
  std::int64_t keys_before = 0;      // their rows
  std::int64_t keys = 0;             // the rows kept (those that may still be live)
  double seconds = 0;                // all its steps
};

// Closes the oldest closing epoch of `conn`'s database. nullopt: none is closing, or another session is closing one.
// The swap is tried `attempts` times at `lock_timeout`, `wait(20 ms)` apart (true from `wait`: give up now).
// Throws pqxx errors and std::runtime_error (the summary's read); the connection is then unusable. Threading: one
// call per connection at a time.
std::optional<EpochClose> CloseOneEpoch(PgConnection& conn, std::chrono::milliseconds lock_timeout, int attempts,
                                        const std::function<bool(std::chrono::milliseconds)>& wait);

// When the database holds more than `max_closed` closed epochs: merges the two adjacent ones (in the order they
// opened) that hold the fewest rows between them into one, keeping only rows that may still be live under
// `retention` (0: all). sql/020 scangate_epoch_merge_*; the same lock as CloseOneEpoch, the same retries. nullopt:
// nothing to merge, or another session holds the lock. Throws as CloseOneEpoch.
std::optional<EpochMerge> MergeTwoEpochs(PgConnection& conn, std::size_t max_closed, std::chrono::seconds retention,
                                         std::chrono::milliseconds lock_timeout, int attempts,
                                         const std::function<bool(std::chrono::milliseconds)>& wait);

}  // namespace scangate::storage
