#include "storage/journal/journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <system_error>

#include "core/boot_clock.h"
#include "core/thread_name.h"
#include "storage/histogram.h"
#include "storage/journal/journal_files.h"

namespace scangate::storage {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace journal_files;  // NOLINT: the journal's own file plumbing

static_assert(std::endian::native == std::endian::little, "the journal format is little endian");

constexpr std::size_t kMaxPayload = kFixedPayload + kMaxJournalSource + kRequestBytes;
// How often a usable journal checks that its directory is still the one it opened (besides after every
// group's fdatasync): a removed directory is noticed within this, even while idle.
constexpr auto kFolderCheckInterval = std::chrono::milliseconds(500);

// Bytes `r` takes in the log once encoded (a longer source is cut to kMaxJournalSource).
std::size_t EncodedSize(const JournalRecord& r) {
  return kRecordHeader + kFixedPayload + std::min(r.source.size(), kMaxJournalSource) +
         (r.request ? kRequestBytes : 0);
}

// Group sizes (records per fdatasync) and fsync latency buckets for /metrics.
constexpr std::array<double, 13> kGroupBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
constexpr std::array<double, 12> kFsyncBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                 0.01,   0.025,   0.05,   0.1,   0.25,   1};

}  // namespace

std::uint32_t Crc32c(std::string_view data) {
  Crc32cAlgo crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

struct Journal::Counters {
  mutable Mutex mu;  // taken once per group by the flusher; Stats() copies under it
  std::uint64_t appended ABSL_GUARDED_BY(mu) = 0, groups ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t syncs_failed ABSL_GUARDED_BY(mu) = 0, rejected ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t checkpoints ABSL_GUARDED_BY(mu) = 0, segments_deleted ABSL_GUARDED_BY(mu) = 0;
  std::array<std::uint64_t, kGroupBounds.size() + 1> group_counts ABSL_GUARDED_BY(mu){};
  double group_sum ABSL_GUARDED_BY(mu) = 0;
  std::array<std::uint64_t, kFsyncBounds.size() + 1> fsync_counts ABSL_GUARDED_BY(mu){};
  double fsync_sum ABSL_GUARDED_BY(mu) = 0;
};

Journal::Journal(JournalOptions options)
    : options_(std::move(options)),
      log_(options_.log ? options_.log : StderrLogSink()),
      spare_path_(options_.dir + "/" + kSpareName),
      preallocate_(options_.preallocate),
      counters_(std::make_unique<Counters>()) {
  if (options_.dir.empty()) throw JournalError("journal: no directory given (--journal-dir)");
  if (options_.partitions == 0 || (options_.partitions & (options_.partitions - 1)) != 0) {
    throw JournalError("journal: the partition count must be a power of two");
  }
  oldest_ns_ = std::make_unique<std::atomic<std::int64_t>[]>(options_.partitions);  // C++20: zeroed
  {
    const MutexLock lk(&mu_);
    if (options_.partitions > 1) outstanding_by_partition_.resize(options_.partitions);
  }
  if (options_.max_bytes < 2 * kMaxPayload) throw JournalError("journal: max_bytes is too small");
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw JournalError("journal: cannot create directory '" + options_.dir + "': " + ec.message());
  dir_fd_ = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) ThrowErrno("open directory " + options_.dir);
  struct stat st {};
  if (::fstat(dir_fd_, &st) != 0) ThrowErrno("stat " + options_.dir);
  dir_dev_ = st.st_dev;
  dir_ino_ = st.st_ino;
  const std::string lock_path = options_.dir + "/lock";
  lock_fd_ = ::openat(dir_fd_, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) ThrowErrno("open " + lock_path);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = ReadWhole(dir_fd_, options_.dir, "lock");
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\r')) holder.pop_back();
    ::close(lock_fd_);
    ::close(dir_fd_);
    lock_fd_ = dir_fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw JournalError("journal directory '" + options_.dir + "' is in use by another scangate process (pid " +
                         (holder.empty() ? std::string("unknown") : holder) +
                         "); every instance needs its own --journal-dir");
    }
    throw std::system_error(err, std::generic_category(), "journal: flock " + lock_path);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0) {
    (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);  // diagnostics only
  }
  try {
    CheckMeta();
    Recover();
  } catch (...) {
    for (const Segment& g : segments_) ::close(g.fd);
    segments_.clear();
    ::close(lock_fd_);
    ::close(dir_fd_);
    lock_fd_ = dir_fd_ = -1;
    throw;
  }
  last_checkpoint_ = next_folder_check_ = Clock::now();
}

Journal::~Journal() {
  Stop();
  try {
    Close();
  } catch (const std::exception& e) {
    log_->Write(LogSeverity::kError, "journal", {{"error", e.what()}});
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::vector<JournalEntry> Journal::TakeRecovered() { return std::move(recovered_); }

void Journal::Start() {
  // The first segment is pre-zeroed too: 8 MiB of zeros and one fdatasync here (~20-50 ms) before serving.
  while (preallocate_ && !spare_ready_) PrepareSpare();
  flusher_ = std::thread([this] {
    SetThreadName("sg-journal");
    RunFlusher();
  });
}

void Journal::EncodeLocked(JournalRecord&& record) {
  if (record.source.size() > kMaxJournalSource) record.source.resize(kMaxJournalSource);
  const auto len =
      static_cast<std::uint32_t>(kFixedPayload + record.source.size() + (record.request ? kRequestBytes : 0));
  const std::size_t at = buffer_.size();
  Put(buffer_, len);
  Put(buffer_, std::uint32_t{0});  // CRC, filled below
  buffer_.append(reinterpret_cast<const char*>(record.digest.data()), 32);
  Put(buffer_, record.time_us);
  buffer_.push_back(static_cast<char>(record.source.size()));
  buffer_.append(record.source);
  if (record.request) buffer_.append(reinterpret_cast<const char*>(record.request->data()), kRequestBytes);
  Crc32cAlgo crc;
  crc.process_bytes(buffer_.data() + at, 4);
  crc.process_bytes(buffer_.data() + at + kRecordHeader, len);
  const std::uint32_t sum = crc.checksum();
  std::memcpy(buffer_.data() + at + 4, &sum, 4);
  AddOutstandingLocked(next_lsn_, record, BootClock::NowNs());
  buffered_.push_back(JournalEntry{std::move(record), next_lsn_});
  next_lsn_ += kRecordHeader + len;
}

bool Journal::Append(JournalRecord record) {
  bool notify;
  {
    const MutexLock lk(&mu_);
    if (stop_ || unusable_) return false;
    if (!parked_.empty() || !FitsLocked(record)) {
      parked_.push_back(Parked{std::move(record), Clock::now() + options_.full_wait});
      return true;
    }
    notify = buffer_.empty();  // otherwise the flusher is writing and takes the buffer when it returns
    EncodeLocked(std::move(record));
  }
  if (notify) cv_.Signal();
  return true;
}

void Journal::RunFlusher() {
  std::string bytes;
  std::vector<JournalEntry> group, rejected;
  for (;;) {
    std::uint64_t group_end = 0;
    bool stopping, parked, unusable;
    {
      const MutexLock lk(&mu_);
      if (buffer_.empty() && !stop_) {
        auto wake = Clock::now() + options_.checkpoint_interval;
        if (!parked_.empty()) wake = std::min(wake, parked_.front().deadline);
        // Until a group, stop, an Applied() with records parked or room for the first parked one; or `wake`.
        while (buffer_.empty() && !stop_ && !applied_moved_ && !ParkedFits() && !cv_.WaitUntil(&mu_, wake)) {
        }
      }
      // Under load, gather (JournalOptions::max_gather): wait as long as the previous sync took, so this group
      // also takes what arrives meanwhile. Not for a lone record, nor while records wait for room or at a fault.
      if (!buffer_.empty() && !stop_ && !unusable_ && parked_.empty() && last_group_ >= kGatherMinGroup) {
        const auto until = Clock::now() + std::min<Clock::duration>(last_sync_, options_.max_gather);
        while (!stop_ && !unusable_ && !cv_.WaitUntil(&mu_, until)) {
        }
      }
      applied_moved_ = false;  // MaybeCheckpoint below passes what was applied
      // Admit parked records while there is room; reject those whose wait is over (or all at shutdown).
      const auto now = Clock::now();
      while (!parked_.empty()) {
        Parked& p = parked_.front();
        if (!stop_ && !unusable_ && FitsLocked(p.record)) {
          EncodeLocked(std::move(p.record));
        } else if (stop_ || unusable_ || now >= p.deadline) {
          rejected.push_back(JournalEntry{std::move(p.record), 0});
        } else {
          break;
        }
        parked_.pop_front();
      }
      bytes.swap(buffer_);
      group.swap(buffered_);
      last_group_ = group.size();
      group_end = next_lsn_;
      stopping = stop_;
      parked = !parked_.empty();
      unusable = unusable_;
      if (unusable && !group.empty()) {  // appended before the fault: never written, so refused
        for (auto& e : group) {
          EraseOutstandingLocked(e.lsn);
          rejected.push_back(std::move(e));
        }
        NoteOldestLocked();
        group.clear();
        bytes.clear();
      }
    }
    if (!rejected.empty()) {
      {
        const MutexLock lk(&counters_->mu);
        counters_->rejected += rejected.size();
      }
      options_.on_commit(rejected, JournalFate::kRefused);
      rejected.clear();
    }
    if (!group.empty()) {
      std::string fault;
      try {
        WriteGroup(bytes, group.front().lsn);
      } catch (const std::exception& e) {
        fault = FaultCause(e);
      }
      const bool ok = fault.empty();
      {
        const MutexLock lk(&mu_);
        if (ok) {
          durable_lsn_ = group_end;
        } else {
          for (const auto& e : group) EraseOutstandingLocked(e.lsn);
          NoteOldestLocked();
        }
      }
      if (!ok) MarkUnusable(fault);
      {
        const MutexLock lk(&counters_->mu);
        if (ok) {
          counters_->appended += group.size();
          ++counters_->groups;
          ObserveInBucket(kGroupBounds, counters_->group_counts, static_cast<double>(group.size()));
          counters_->group_sum += static_cast<double>(group.size());
        } else {
          ++counters_->syncs_failed;
          counters_->rejected += group.size();
        }
      }
      options_.on_commit(group, ok ? JournalFate::kDurable : JournalFate::kIoError);
      group.clear();
      bytes.clear();
    }
    if (!rebuild_) {  // a removed directory takes no checkpoint until it is rebuilt
      try {
        MaybeCheckpoint(parked);
      } catch (const std::exception& e) {
        // While unusable the fault is logged already (journal_state); a full disk fails checkpoints too.
        if (usable()) log_->Write(LogSeverity::kWarn, "journal", {{"checkpoint_error", e.what()}});
      }
    }
    if (!stopping) {
      const auto now = Clock::now();
      if (!usable()) {
        if (now >= next_probe_) TryHeal();
      } else if (now >= next_folder_check_) {
        next_folder_check_ = now + kFolderCheckInterval;
        if (const std::string problem = FolderProblem(); !problem.empty()) MarkUnusable(problem);
      }
      if (usable()) PrepareSpare();
    }
    if (stopping) {
      const MutexLock lk(&mu_);
      if (buffer_.empty() && parked_.empty()) return;
    }
  }
}

bool Journal::FitsLocked(const JournalRecord& r) const {
  return next_lsn_ + EncodedSize(r) - checkpoint_lsn_ <= options_.max_bytes;
}

bool Journal::ParkedFits() const { return !parked_.empty() && FitsLocked(parked_.front().record); }

void Journal::WriteGroup(const std::string& bytes, std::uint64_t first_lsn) {
  if (seg_fd_ < 0 || seg_bytes_ >= options_.segment_bytes) OpenSegment(first_lsn);
  const auto t0 = Clock::now();
  WriteAll(seg_fd_, bytes.data(), bytes.size(), "segment");
  if (::fdatasync(seg_fd_) != 0) ThrowErrno("fdatasync segment");
  // Never "durable" in a file that is no longer the journal's (unlinked, or its directory gone or replaced):
  // the group fails and its bytes stay past seg_bytes_ (a rebuild does not copy them).
  if (const std::string problem = FolderProblem(); !problem.empty()) throw JournalError(problem);
  last_sync_ = Clock::now() - t0;
  const double seconds = std::chrono::duration<double>(last_sync_).count();
  seg_bytes_ += bytes.size();
  const MutexLock lk(&counters_->mu);
  ObserveInBucket(kFsyncBounds, counters_->fsync_counts, seconds);
  counters_->fsync_sum += seconds;
}

void Journal::MaybeCheckpoint(bool force) {
  std::uint64_t pos;
  {
    const MutexLock lk(&mu_);
    pos = AppliedPosition();
    if (pos <= checkpoint_lsn_) return;
  }
  const auto now = Clock::now();
  if (!force && now - last_checkpoint_ < options_.checkpoint_interval) return;
  last_checkpoint_ = now;
  std::string data;
  Put(data, pos);
  Put(data, Crc32c(data));
  WriteFileDurably(dir_fd_, options_.dir, "checkpoint", data);
  {
    const MutexLock lk(&mu_);
    checkpoint_lsn_ = pos;
  }
  // Segments whose every record lies below the checkpoint (the next segment starts at or below it) are
  // applied; the active (last) segment is never deleted.
  std::size_t deleted = 0;
  while (segments_.size() >= 2 && segments_[1].base <= pos) {
    if (::unlinkat(dir_fd_, segments_.front().name.c_str(), 0) != 0 && errno != ENOENT) ThrowErrno("unlink segment");
    ::close(segments_.front().fd);
    segments_.erase(segments_.begin());
    ++deleted;
  }
  const MutexLock lk(&counters_->mu);
  ++counters_->checkpoints;
  counters_->segments_deleted += deleted;
}

void Journal::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    const MutexLock lk(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (flusher_.joinable()) flusher_.join();
}

void Journal::Close() {
  if (closed_) return;
  closed_ = true;
  try {
    if (!rebuild_) MaybeCheckpoint(true);  // a removed directory: nothing to checkpoint into
  } catch (const std::exception& e) {
    log_->Write(LogSeverity::kWarn, "journal", {{"checkpoint_error", e.what()}});
  }
  CloseSegment();
  for (const Segment& g : segments_) ::close(g.fd);
  segments_.clear();
  if (spare_fd_ >= 0) {
    ::close(spare_fd_);
    spare_fd_ = -1;
    (void)::unlinkat(dir_fd_, kSpareName, 0);
  }
}

std::string Journal::unusable_cause() const {
  const MutexLock lk(&mu_);
  return cause_;
}

JournalStats Journal::Stats() const {
  JournalStats s;
  s.max_bytes = options_.max_bytes;
  {
    const MutexLock lk(&mu_);
    s.disk_bytes = next_lsn_ - checkpoint_lsn_;
    s.outstanding = outstanding_.size();
    s.parked = parked_.size();
    s.usable = !unusable_;
    s.cause = cause_;
    s.faults = faults_;
    s.heals = heals_;
  }
  const Counters& c = *counters_;
  const MutexLock lk(&c.mu);
  s.appended = c.appended;
  s.groups = c.groups;
  s.syncs_failed = c.syncs_failed;
  s.rejected = c.rejected;
  s.checkpoints = c.checkpoints;
  s.segments_deleted = c.segments_deleted;
  s.group_size_buckets = CumulativeBuckets(kGroupBounds, c.group_counts);
  s.group_size_sum = c.group_sum;
  s.group_size_count = s.group_size_buckets.back().second;
  s.fsync_seconds_buckets = CumulativeBuckets(kFsyncBounds, c.fsync_counts);
  s.fsync_seconds_sum = c.fsync_sum;
  s.fsync_seconds_count = s.fsync_seconds_buckets.back().second;
  return s;
}

}  // namespace scangate::storage
