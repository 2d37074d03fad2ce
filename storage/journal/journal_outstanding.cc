// Journal (storage/journal/journal.h): the records appended or recovered but not yet Applied — not yet known to
// PostgreSQL — and the figures derived from them: the checkpoint's bound (AppliedPosition) and each partition's
// oldest record's append time on the boot clock (oldest_uncommitted_ns, --max-commit-lag; UncommittedOf, the peers'
// watermark). Split from journal.cc (the write path).
#include <algorithm>
#include <span>

#include "core/boot_clock.h"
#include "storage/journal/journal.h"

namespace scangate::storage {

void Journal::Applied(std::uint64_t lsn) { Applied(std::span<const std::uint64_t>(&lsn, 1)); }

void Journal::Applied(std::span<const std::uint64_t> lsns) {
  bool wake;
  {
    const MutexLock lk(&mu_);
    for (const std::uint64_t lsn : lsns) EraseOutstandingLocked(lsn);
    NoteOldestLocked();
    // Records wait for room: the flusher checkpoints now and admits them, instead of at its next tick.
    wake = !parked_.empty();
    if (wake) applied_moved_ = true;
  }
  if (wake) cv_.Signal();
}

std::uint64_t Journal::AppliedPosition() const {
  return outstanding_.empty() ? durable_lsn_ : std::min(outstanding_.begin()->first, durable_lsn_);
}

void Journal::AddOutstandingLocked(std::uint64_t lsn, const JournalRecord& record, std::int64_t appended_ns) {
  const unsigned p = PartitionIndex(record.digest);
  // Ascending LSNs (appended, or recovered in order): the largest yet, so hinted at the end.
  outstanding_.emplace_hint(outstanding_.end(), lsn, Outstanding{appended_ns, p});
  if (options_.partitions == 1) {
    if (outstanding_.size() == 1) NoteOldestLocked();
    return;
  }
  auto& mine = outstanding_by_partition_[p];
  mine.emplace_hint(mine.end(), lsn, appended_ns);
  // Its partition's first outstanding record is its oldest; the other partitions' are unchanged. relaxed: as in
  // NoteOldestLocked.
  if (mine.size() == 1) oldest_ns_[p].store(appended_ns, std::memory_order_relaxed);
}

void Journal::EraseOutstandingLocked(std::uint64_t lsn) {
  const auto it = outstanding_.find(lsn);
  if (it == outstanding_.end()) return;
  if (options_.partitions > 1) outstanding_by_partition_[it->second.partition].erase(lsn);
  outstanding_.erase(it);
}

void Journal::NoteOldestLocked() {
  // relaxed: read as a hint (oldest_uncommitted_ns)
  if (options_.partitions == 1) {
    oldest_ns_[0].store(outstanding_.empty() ? 0 : outstanding_.begin()->second.appended_ns, std::memory_order_relaxed);
    return;
  }
  for (unsigned p = 0; p < options_.partitions; ++p) {
    const auto& mine = outstanding_by_partition_[p];
    oldest_ns_[p].store(mine.empty() ? 0 : mine.begin()->second, std::memory_order_relaxed);
  }
}

Journal::Uncommitted Journal::UncommittedOf(unsigned p) const {
  Uncommitted u;
  const MutexLock lk(&mu_);
  // The time is read under the lock: an append before it is in the maps (AddOutstandingLocked runs under the lock
  // too), so a record appended before now_ns and not counted here was Applied.
  u.now_ns = BootClock::NowNs();
  if (options_.partitions == 1) {
    u.count = outstanding_.size();
    u.oldest_ns = outstanding_.empty() ? 0 : outstanding_.begin()->second.appended_ns;
    return u;
  }
  const auto& mine = outstanding_by_partition_[p];
  u.count = mine.size();
  u.oldest_ns = mine.empty() ? 0 : mine.begin()->second;
  return u;
}

}  // namespace scangate::storage
