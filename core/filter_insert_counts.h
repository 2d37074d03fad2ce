// Per-thread pending insert counts of a ShardedFilter and the registry of live threads that holds them (see
// "Insert counting" in core/filter.h). Internal to the filter: included only by core/filter*.cc.
// Invariant: a thread's ThreadCounts is written only by that thread and is registered from its first insert
// until its exit, so Stats() can fold every live thread's pending counts into ShardStats::inserted.
// Tested through ShardedFilter (tests/core/filter_test.cc StatsCountPendingInserts, filter_concurrency_test.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "core/filter_geometry.h"

namespace scangate::filter_detail {

// Upper bound of count_batch_ (see "Insert counting" in filter.h): 16 removes ~15/16 of the counter's
// locked adds; the pending counts fit in one byte each.
inline constexpr std::uint32_t kMaxCountBatch = 16;
static_assert(kMaxCountBatch <= 255);

// Per-thread insert counts not yet added to their shard's counter, for one filter instance at a time.
// Written only by the owning thread; Stats() reads them from another thread through the registry
// and folds them into ShardStats::inserted. Single writer, so the owner's increments are relaxed
// load + relaxed store (a plain byte load and store on x86, no locked instruction); relaxed is enough
// because the reader only wants some recent value and nothing else is published through these.
struct ThreadCounts {
  std::atomic<std::uint64_t> filter_id{0};  // 0: none
  std::atomic<std::uint8_t> pending[kMaxShards] = {};
};

// The calling thread's ThreadCounts, registered (and freed at thread exit) on this thread's first call.
// The probe path caches the pointer in its own thread_local, so this runs once per thread, not per insert.
// Threading: safe to call concurrently; takes the registry's mutex on a thread's first call only.
ThreadCounts* RegisterThreadCounts();

// Adds to pending[i] the counts for shard i that live threads hold for filter `filter_id` (telemetry: any
// recent value of each count). Threading: safe to call concurrently; takes the registry's mutex.
void AddPendingInsertCounts(std::uint64_t filter_id, std::span<std::uint64_t> pending);

}  // namespace scangate::filter_detail
