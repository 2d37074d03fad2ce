// Journal: a local, group-committed, checksummed append-only log of "definitely new" keys (--ack=filter).
// Invariant: a record is reported durable (on_commit(..., kDurable)) only after the write holding it returned
// and fdatasync() of its segment succeeded; recovery applies only whole records whose CRC32C matches, and
// truncates a torn tail. Use one Journal per directory (an exclusive flock enforces it); the drain that
// feeds PostgreSQL and answers waiters is storage/journal/journal_drain.h.
//
// Format. The directory holds `meta` (identity of the database it belongs to), `lock` (flock), `checkpoint`
// and segments `<16 hex lsn>.seg`. An LSN is a byte offset in the logical record stream (segment headers
// excluded); a segment's name is the LSN of its first record. Segment = 16-byte header ("SGJNL001" + base
// LSN, little endian) then records: u32 payload length, u32 CRC32C over (length bytes, payload), payload =
// 32-byte digest, i64 time in µs since the epoch, u8 source length, source bytes. CRC32C is Boost.CRC's
// crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> (check value of "123456789": 0xE3069283).
// `instance` = the owner's identity (a UUID and a newline; issue 42: the peers' watermark names it).
// `checkpoint` = u64 LSN + u32 CRC32C: every record below it is committed in PostgreSQL. It is written to a
// temporary file, fdatasync'ed, renamed over, and the directory fsync'ed; segments wholly below it are deleted.
//
// Group commit: Append() copies the encoded record into a shared buffer under a mutex and returns. One
// flusher thread swaps the buffer out, write()s it to the active segment and fdatasync()s — so one sync
// covers everything that arrived during the previous one, never one sync per key — then calls on_commit
// with the group. Under load (the previous group held 4 records or more) the flusher first waits as long as the
// previous write + fdatasync took (at most max_gather), so that a group also takes what arrives during that wait:
// at most one more sync time of latency per record, none for a lone one; at 256 connections on this machine
// records per fdatasync 48 -> 99 and the server's CPU per key -11 % (bench/RESULTS.md "Issue 44, part 2").
// A new segment is started between groups once the active one reaches segment_bytes, so a torn record can only
// be in the last segment; a bad record anywhere else is corruption and Open() refuses.
// Pre-zeroed segments: between groups the flusher zero-fills the next segment's file (`spare.tmp`, a slice at
// a time) and fdatasyncs it once complete; at rotation it gets its header (made durable) and is renamed into
// place. Group commits then overwrite allocated blocks, so fdatasync flushes data only — no filesystem
// journal commit for a grown file (measured on this disk: 0.085–0.105 ms and ~33 µs of CPU per fdatasync vs
// 0.13–0.17 ms and ~55–62 µs when appending; storage/README.md "Journal"). So a segment may end in zero bytes
// past its last record: recovery reads zeros running to the end of a segment as its clean end.
// Bounded: when LSN bytes past the checkpoint would exceed max_bytes, records wait (FIFO) up to full_wait
// for the checkpoint to advance, then are reported not durable. While records wait, Applied() wakes the
// flusher, which checkpoints at once and admits what fits (not at its next checkpoint_interval tick).
// Faults heal (storage/journal/journal_heal.cc). A write or sync error (ENOSPC, EIO), or a segment or directory found
// unlinked or replaced (checked after every group's fdatasync and every ~0.5 s), makes the journal
// *unusable*: that group is reported kIoError, queued and parked records kRefused, Append() refuses and
// usable() is false (the server then decides new keys exactly in PostgreSQL). Every ~1 s the flusher probes:
// a removed or replaced directory is recreated (new lock, same `meta` identity, the checkpoint, and every live
// segment copied from the open file descriptors, so records durable in the removed directory and not yet in
// PostgreSQL are durable again, at their LSNs), a probe file is written and fdatasync'ed, the active segment
// is cut back to its last durable group; then the journal is usable again, no restart. Caveat: between the
// removal of the directory and that copy, those records exist only in this process (the drain's pending set,
// the Store's queue) and in unlinked files: a kill -9 in that window loses the ones PostgreSQL has not
// committed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/btree_map.h>

#include "core/digest.h"
#include "core/mutex.h"
#include "storage/log_sink.h"
#include "storage/outcome.h"
#include "storage/partitions/partition_map.h"

namespace scangate::storage {

struct JournalRecord {
  Digest digest{};
  std::int64_t time_us = 0;  // first observation, µs since the Unix epoch (UTC)
  std::string source;        // at most kMaxJournalSource bytes (longer is cut)
  std::optional<RequestId> request;  // the observing request's idempotency record (issue 34); none = no header
};

inline constexpr std::size_t kMaxJournalSource = 255;

// What became of an appended record, as on_commit reports it.
enum class JournalFate : std::uint8_t {
  kDurable,  // in a group whose write + fdatasync returned
  kRefused,  // never written: the journal stayed full past full_wait, or it is stopping
  kIoError,  // its group's write or fdatasync failed: it may or may not be on disk (and replayed later)
};

struct JournalEntry {
  JournalRecord record;
  std::uint64_t lsn = 0;  // start of the record in the logical stream; pass to Applied()
};

// Foreign, locked, or corrupt directory: Open() refuses with a message naming the cause and the fix.
class JournalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PgClocks;  // storage/clock/pg_clock.h

struct JournalOptions {
  std::string dir;
  // The de-duplication horizon (--retention; 0 = off). Used by JournalDrain::Start(), not the journal: a
  // recovered record older than it is expired — neither pending, nor the filter's, nor replayed.
  std::chrono::seconds retention{0};
  // The clock the horizon is judged by (JournalDrain, not the journal): each record's partition's PostgreSQL clock
  // (storage/clock/pg_clock.h, issue 42) — a record is expired only once PostgreSQL would take its row over. Null:
  // this host's wall clock (tests of the journal alone). Must outlive the drain.
  const PgClocks* clocks = nullptr;
  // Identity of the database the records belong to (e.g. "system_identifier=... database=scangate").
  std::string identity;
  std::uint64_t max_bytes = 64ull << 20;     // LSN bytes past the checkpoint; beyond it Append waits
  std::uint64_t segment_bytes = 8ull << 20;  // rotate to a new segment at this size (between groups)
  std::chrono::milliseconds full_wait{1000};  // bounded wait of a record while the journal is full
  std::chrono::milliseconds checkpoint_interval{100};  // at most one checkpoint write per interval
  // Gathering under load (see "Group commit" above): the longest the flusher waits for more records before a
  // group, after a group of at least 4. 0 = never wait. 1 ms: more than one sync of the disks measured (0.1–0.5 ms).
  std::chrono::microseconds max_gather{1000};
  // Zero-fill the next segment ahead (see "Pre-zeroed segments" above); false = segments grow by appending.
  bool preallocate = true;
  // With --partitions: the partition count (a power of two), so that oldest_uncommitted_ns is kept per
  // partition (storage/partitions/partition_map.h PartitionOf of the record's digest) — one partition's outage then
  // bounds that partition's new keys alone. 1 = one database.
  unsigned partitions = 1;
  // Runs on the flusher thread after each group with the group's fate (every record of `group` shares it).
  // Must not block long.
  std::function<void(std::vector<JournalEntry>& group, JournalFate fate)> on_commit;
  // Where the journal reports truncated tails and I/O errors; empty = StderrLogSink() (the server passes its
  // own, so the process keeps one log stream).
  std::shared_ptr<LogSink> log;
};

struct JournalStats {
  std::uint64_t appended = 0, groups = 0, syncs_failed = 0, rejected = 0, checkpoints = 0;
  std::uint64_t segments_deleted = 0;
  std::uint64_t disk_bytes = 0;        // LSN bytes from the checkpoint to the end (not yet applied + not yet checkpointed)
  std::uint64_t max_bytes = 0;         // JournalOptions::max_bytes: disk_bytes' bound
  std::uint64_t outstanding = 0;       // records appended (or recovered) and not yet Applied()
  std::uint64_t parked = 0;            // records waiting for space
  bool usable = true;                  // see Journal::usable()
  std::string cause;                   // why it is unusable ("" while usable)
  std::uint64_t faults = 0;            // times it became unusable
  std::uint64_t heals = 0;             // times a probe made it usable again
  std::vector<std::pair<double, std::uint64_t>> group_size_buckets;  // cumulative (le, count)
  double group_size_sum = 0;
  std::uint64_t group_size_count = 0;
  std::vector<std::pair<double, std::uint64_t>> fsync_seconds_buckets;  // cumulative (le, count)
  double fsync_seconds_sum = 0;
  std::uint64_t fsync_seconds_count = 0;
};

class Journal {
 public:
  // Locks the directory (creating it), checks or writes `meta`, reads the checkpoint, scans the segments
  // (truncating a torn tail of the last one) and keeps the records past the checkpoint for Recovered().
  // Throws JournalError (foreign identity, locked by another process, corruption) or std::system_error.
  explicit Journal(JournalOptions options);
  ~Journal();  // Stop() + Close()
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Records found past the checkpoint at Open, in LSN order. They count as outstanding until Applied().
  // Single call, before Start().
  std::vector<JournalEntry> TakeRecovered();

  void Start();  // starts the flusher thread
  // (With preallocate, Start() first zero-fills the first segment: ~20-50 ms for 8 MiB.)

  // Queues one record for the next group commit. Returns false (nothing queued, on_commit not called for
  // it) when the journal is unusable or stopping. Never blocks on I/O. Safe to call concurrently.
  bool Append(JournalRecord record);

  // The record at `lsn` is committed in PostgreSQL; the checkpoint may pass it. Safe to call concurrently.
  void Applied(std::uint64_t lsn);
  // The same for every LSN of `lsns`, under one lock (the drain reports a writer's batch at once).
  void Applied(std::span<const std::uint64_t> lsns);

  // Flushes what is queued (parked records are rejected), joins the flusher. Appends fail from now on.
  // Applied() keeps working. Idempotent.
  void Stop();
  // After Stop(): writes the final checkpoint and deletes applied segments. Idempotent.
  void Close();

  JournalStats Stats() const;
  // False from a fault (I/O error, directory removed or replaced) until a probe heals it: Append() refuses.
  // One atomic load, for the hot path; a hint (Append re-checks under the lock). Safe to call concurrently.
  bool usable() const { return usable_.load(std::memory_order_relaxed); }  // relaxed: a hint, nothing depends on it
  // Why it is unusable, e.g. "ENOSPC: No space left on device (write segment)"; "" while usable. Safe to call
  // concurrently.
  std::string unusable_cause() const;
  const std::string& dir() const { return options_.dir; }
  // When (BootClock ns, core/boot_clock.h) the oldest record not yet Applied — appended or recovered, so not yet
  // known to PostgreSQL — of the partition `d` belongs to (JournalOptions::partitions; every record with one) was
  // appended; kAgeUnknown for a record recovered at Open (appended before this process: older than anything it can
  // date); 0 when every such record is Applied. Dated by the boot clock, never by the record's time (the wall
  // clock: a step back would make an old record young; issue 42). One atomic load, for the hot path (the server
  // bounds how long a key it answered stays unknown to other instances, --max-commit-lag). Safe to call
  // concurrently.
  std::int64_t oldest_uncommitted_ns(const Digest& d) const {
    // relaxed: a bound checked per key, no data behind it (the watermark reads Uncommitted(), under the lock)
    return oldest_ns_[PartitionIndex(d)].load(std::memory_order_relaxed);
  }
  static constexpr std::int64_t kAgeUnknown = 1;
  // Partition `p`'s records not yet Applied, read under the journal's lock together with the boot time: every
  // record appended before `now_ns` and not counted here was Applied (committed in PostgreSQL) before this call
  // returned. The peers' watermark (storage/peers/watermark_publisher.h) is built on that. Safe to call
  // concurrently; p < JournalOptions::partitions.
  struct Uncommitted {
    std::int64_t oldest_ns = 0;  // as oldest_uncommitted_ns: 0 none, kAgeUnknown recovered, else its append time
    std::uint64_t count = 0;
    std::int64_t now_ns = 0;  // BootClock::NowNs() under the lock
  };
  Uncommitted UncommittedOf(unsigned p) const;
  // This journal's owner's identity (issue 42): a random UUID written to the directory's `instance` file when the
  // journal is created, kept by every later Open (a restart with this journal is the same instance) and by a
  // rebuilt directory. Safe to call concurrently.
  const std::string& instance_id() const { return instance_id_; }

 private:
  // The previous group held at least this many records: keys arrive concurrently, so gathering pays (below it a
  // record is alone, or nearly: it is synced at once).
  static constexpr std::size_t kGatherMinGroup = 4;
  struct Parked {
    JournalRecord record;
    std::chrono::steady_clock::time_point deadline;
  };

  struct Segment {
    std::uint64_t base = 0;
    std::string name;  // "<16 hex>.seg" in the directory
    int fd = -1;       // open read-write until deleted or Close(): a removed directory is rebuilt from it
  };

  void RunFlusher();
  // journal_heal.cc (flusher thread). Why the directory or the active segment is no longer the one written
  // ("" = fine): unlinked segment, directory gone or replaced.
  std::string FolderProblem() const;
  // Makes the journal unusable with `cause` (fails nothing itself; the caller reports the group). Logs it.
  void MarkUnusable(const std::string& cause);
  // Every kProbeInterval while unusable: rebuild the directory if needed, probe, trim, mark usable.
  void TryHeal();
  void AdoptFolder();   // (re)creates and locks the directory at options_.dir, writes `meta`
  void CopySegments();  // copies every live segment (and the checkpoint) into the adopted directory
  void Probe();         // write + fdatasync of a scratch file
  void TrimActive();    // cuts the active segment back to its durable end (drops a failed group's bytes)

  // `r` fits under max_bytes past the checkpoint now.
  bool FitsLocked(const JournalRecord& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first parked record fits under max_bytes now.
  bool ParkedFits() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Recover();    // journal_recover.cc
  void CheckMeta();  // journal_recover.cc
  // Writes `group_bytes` to the active segment (rotating first when due) and fdatasyncs. Flusher thread only.
  void WriteGroup(const std::string& bytes, std::uint64_t first_lsn);
  void OpenSegment(std::uint64_t base_lsn);
  // Closes the active segment (if any), cutting off its unused pre-zeroed rest. Flusher thread (or Close).
  void CloseSegment();
  // Zero-fills one more slice of the spare segment (fdatasync once complete). Flusher thread only. An error
  // only turns preallocation off (logged once): segments then grow by appending, as before.
  void PrepareSpare();
  // Writes a checkpoint when the applied position moved; deletes segments below it. Flusher thread (or Close).
  void MaybeCheckpoint(bool force);
  // Where the checkpoint may go: the lowest outstanding LSN, or the durable end when none is outstanding.
  std::uint64_t AppliedPosition() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EncodeLocked(JournalRecord&& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JournalOptions options_;
  std::shared_ptr<LogSink> log_;
  int lock_fd_ = -1;
  int dir_fd_ = -1;                    // every file is opened relative to it (flusher thread after Start)
  std::uint64_t dir_dev_ = 0, dir_ino_ = 0;  // identity of the directory dir_fd_ opened (flusher thread)
  int seg_fd_ = -1;                    // active segment = segments_.back().fd, or -1 (flusher thread)
  std::uint64_t seg_base_ = 0;         // flusher thread
  std::uint64_t seg_bytes_ = 0;        // file bytes written to the active segment (flusher thread)
  bool seg_zeroed_ = false;            // the active segment was pre-zeroed (flusher thread)
  const std::string spare_path_;       // dir/spare.tmp
  int spare_fd_ = -1;                  // the next segment being zero-filled (flusher thread)
  std::uint64_t spare_bytes_ = 0;      // zeros written to it so far (flusher thread)
  bool spare_ready_ = false;           // complete and fdatasync'ed (flusher thread)
  bool preallocate_ = true;            // options_.preallocate until an error turns it off (flusher thread)
  std::size_t last_group_ = 0;         // records in the previous group (flusher thread)
  std::chrono::steady_clock::duration last_sync_{};  // the previous group's write + fdatasync (flusher thread)
  std::vector<Segment> segments_;      // live segments, ascending base; flusher thread
  bool rebuild_ = false;               // the adopted directory still lacks the segments' copies (flusher)
  std::chrono::steady_clock::time_point next_probe_, next_folder_check_;  // flusher thread
  std::vector<JournalEntry> recovered_;
  std::string instance_id_;  // read or created by CheckMeta(); fixed afterwards

  mutable Mutex mu_;
  CondVar cv_;  // wakes the flusher: a group to write, stop, Applied() with records parked
  std::string buffer_ ABSL_GUARDED_BY(mu_);               // encoded records of the next group
  std::vector<JournalEntry> buffered_ ABSL_GUARDED_BY(mu_);  // their entries
  std::deque<Parked> parked_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_lsn_ ABSL_GUARDED_BY(mu_) = 0;        // LSN of the next appended record
  std::uint64_t durable_lsn_ ABSL_GUARDED_BY(mu_) = 0;     // end of the last durable group
  std::uint64_t checkpoint_lsn_ ABSL_GUARDED_BY(mu_) = 0;  // last written checkpoint
  // LSNs appended/recovered, not yet Applied, with their records' time (µs since the epoch). A B-tree: inserted
  // in ascending order, erased roughly so, one node per many LSNs instead of std::map's allocation (and
  // rebalancing) per record.
  struct Outstanding {
    std::int64_t appended_ns;  // BootClock ns of its append; kAgeUnknown when recovered
    unsigned partition;        // PartitionOf(digest, options_.partitions); 0 with one database
  };
  absl::btree_map<std::uint64_t, Outstanding> outstanding_ ABSL_GUARDED_BY(mu_);
  // With partitions > 1: each partition's outstanding LSNs and their append times (outstanding_ split by
  // partition), so each partition's oldest is its map's first entry. Empty with one database.
  std::vector<absl::btree_map<std::uint64_t, std::int64_t>> outstanding_by_partition_ ABSL_GUARDED_BY(mu_);
  // Per partition (one with one database): the append time of its lowest outstanding LSN's record (0 = none), for
  // oldest_uncommitted_ns() without the lock.
  std::unique_ptr<std::atomic<std::int64_t>[]> oldest_ns_;
  unsigned PartitionIndex(const Digest& d) const {
    return options_.partitions == 1 ? 0 : PartitionOf(d, options_.partitions);
  }
  // The bookkeeping of records not yet Applied: outstanding_ (and its partition's map), then the oldest figures.
  // `appended_ns`: BootClock::NowNs() at the append, kAgeUnknown for a recovered record.
  void AddOutstandingLocked(std::uint64_t lsn, const JournalRecord& record, std::int64_t appended_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseOutstandingLocked(std::uint64_t lsn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Applied() moved while records were parked: wake the flusher to checkpoint and admit them.
  bool applied_moved_ ABSL_GUARDED_BY(mu_) = false;
  bool unusable_ ABSL_GUARDED_BY(mu_) = false;
  std::string cause_ ABSL_GUARDED_BY(mu_);
  std::uint64_t faults_ ABSL_GUARDED_BY(mu_) = 0, heals_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> usable_{true};  // !unusable_, for usable() without the lock
  bool stopped_ = false, closed_ = false;  // Stop/Close caller thread only
  std::chrono::steady_clock::time_point last_checkpoint_;  // flusher thread
  std::thread flusher_;

  struct Counters;
  std::unique_ptr<Counters> counters_;
};

// CRC32C (Castagnoli) of `data` (Boost.CRC, see the format above).
std::uint32_t Crc32c(std::string_view data);

}  // namespace scangate::storage
