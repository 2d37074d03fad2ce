// Journal faults and their healing (storage/journal/journal.h "Faults heal"): noticing that the directory or the
// active segment is no longer the one written, marking the journal unusable, and the flusher's periodic
// probe that rebuilds a removed directory from the open segment descriptors, proves a write + fdatasync
// works, cuts a failed group's bytes off the active segment and makes the journal usable again.
// Flusher thread only (and the constructor's thread before it starts).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "storage/journal/journal.h"
#include "storage/journal/journal_files.h"

namespace scangate::storage {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace journal_files;  // NOLINT: the journal's own file plumbing

namespace {
// A probe every second while unusable: a freed disk or a recreated directory is used again within ~1 s, and
// a disk that stays full costs one failed 64 KiB write per second.
constexpr auto kProbeInterval = std::chrono::seconds(1);
// The probe's write: larger than a typical group (~100 records of ~80 bytes), so a disk with room for the
// probe has room for the next groups, not only for a header.
constexpr std::size_t kProbeBytes = 64 << 10;
constexpr std::size_t kCopyChunk = 1 << 20;  // segment copy buffer when a removed directory is rebuilt

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// fsync of the directory holding `dir`, so a recreated directory's own name survives a power loss.
void SyncParent(const std::string& dir) {
  fs::path parent = fs::path(dir).parent_path();
  if (parent.empty()) parent = ".";
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ThrowErrno("open " + parent.string());
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw std::system_error(err, std::generic_category(), "journal: fsync " + parent.string());
}
}  // namespace

std::string Journal::FolderProblem() const {
  struct stat st {};
  if (seg_fd_ >= 0 && ::fstat(seg_fd_, &st) == 0 && st.st_nlink == 0) {
    return "journal segment " + options_.dir + "/" + SegmentName(seg_base_) + " was unlinked (folder removed?)";
  }
  if (::stat(options_.dir.c_str(), &st) != 0) return Errno("journal folder " + options_.dir + " is gone");
  if (static_cast<std::uint64_t>(st.st_dev) != dir_dev_ || static_cast<std::uint64_t>(st.st_ino) != dir_ino_) {
    return "journal folder " + options_.dir + " was replaced (another directory now has its name)";
  }
  return {};
}

void Journal::MarkUnusable(const std::string& cause) {
  bool first;
  {
    const MutexLock lk(&mu_);
    first = !unusable_;
    if (first) ++faults_;
    unusable_ = true;
    cause_ = cause;
    usable_.store(false, std::memory_order_relaxed);  // relaxed: a hint; Append re-checks unusable_ under mu_
  }
  next_probe_ = Clock::now() + kProbeInterval;
  if (!first) return;
  log_->Write(LogSeverity::kError, "journal_state",
              {{"state", "unusable"}, {"cause", cause}, {"dir", options_.dir},
               {"effect", "new keys are decided exactly in PostgreSQL until a probe write + sync succeeds"}});
}

void Journal::TryHeal() {
  next_probe_ = Clock::now() + kProbeInterval;
  {
    const MutexLock lk(&mu_);
    if (!buffer_.empty()) return;  // records appended before the fault are refused on the next pass first
  }
  std::string failure;
  try {
    if (rebuild_ || !FolderProblem().empty()) AdoptFolder();  // sets rebuild_
    Probe();
    if (rebuild_) {
      CopySegments();
      rebuild_ = false;
    } else {
      TrimActive();
    }
  } catch (const std::exception& e) {
    failure = FaultCause(e);
  }
  if (!failure.empty()) {
    bool changed;
    {
      const MutexLock lk(&mu_);
      changed = cause_ != failure;
      cause_ = failure;
    }
    if (changed) {
      log_->Write(LogSeverity::kWarn, "journal_state", {{"state", "unusable"}, {"cause", failure}, {"dir", options_.dir}});
    }
    return;
  }
  {
    const MutexLock lk(&mu_);
    // Nothing is buffered (Append refuses while unusable) and no LSN past the durable end is outstanding (a
    // failed group's are erased): the log continues at the durable end, where the active segment now ends.
    next_lsn_ = durable_lsn_;
    unusable_ = false;
    ++heals_;
    cause_.clear();
    usable_.store(true, std::memory_order_relaxed);  // relaxed: a hint, see MarkUnusable
  }
  preallocate_ = options_.preallocate;  // a full disk may have turned it off
  next_folder_check_ = Clock::now();
  log_->Write(LogSeverity::kInfo, "journal_state", {{"state", "usable"}, {"dir", options_.dir}});
}

void Journal::AdoptFolder() {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw std::system_error(ec, "journal: create directory " + options_.dir);
  const int dfd = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) ThrowErrno("open directory " + options_.dir);
  struct stat st {};
  if (::fstat(dfd, &st) != 0) {
    ::close(dfd);
    ThrowErrno("stat " + options_.dir);
  }
  rebuild_ = true;  // even in the same directory: a segment unlinked from it is written back
  if (static_cast<std::uint64_t>(st.st_dev) == dir_dev_ && static_cast<std::uint64_t>(st.st_ino) == dir_ino_) {
    ::close(dfd);  // ours already (an earlier probe adopted it, or only a file was removed)
    return;
  }
  const int lfd = ::openat(dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lfd < 0 || ::flock(lfd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (lfd >= 0) ::close(lfd);
    ::close(dfd);
    throw std::system_error(err, std::generic_category(), "journal: lock the recreated " + options_.dir);
  }
  try {
    // A directory someone put in its place may hold another journal: never overwrite or adopt its records.
    for (const auto& e : fs::directory_iterator(options_.dir)) {
      std::uint64_t base;
      const std::string name = e.path().filename().string();
      if (ParseSegmentName(name, base) || name == "checkpoint") {
        throw JournalError("journal folder " + options_.dir + " was replaced by one holding journal files; "
                           "not writing into it");
      }
    }
    const std::string meta = MetaContent(options_.identity);
    if (::faccessat(dfd, "meta", F_OK, 0) == 0 && ReadWhole(dfd, options_.dir, "meta") != meta) {
      throw JournalError("journal folder " + options_.dir + " was replaced by another database's journal");
    }
    WriteFileDurably(dfd, options_.dir, "meta", meta);
    WriteFileDurably(dfd, options_.dir, kInstanceName, instance_id_ + "\n");  // the same instance (issue 42)
    SyncParent(options_.dir);
  } catch (...) {
    ::close(lfd);
    ::close(dfd);
    throw;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  (void)!::pwrite(lfd, pid.data(), pid.size(), 0);  // diagnostics only
  ::close(lock_fd_);  // the old directory's lock (its file is gone with it)
  ::close(dir_fd_);
  lock_fd_ = lfd;
  dir_fd_ = dfd;
  dir_dev_ = static_cast<std::uint64_t>(st.st_dev);
  dir_ino_ = static_cast<std::uint64_t>(st.st_ino);
  if (spare_fd_ >= 0) ::close(spare_fd_);  // it was the old directory's
  spare_fd_ = -1;
  spare_ready_ = false;
  spare_bytes_ = 0;
  log_->Write(LogSeverity::kWarn, "journal_state",
              {{"state", "rebuilding"}, {"dir", options_.dir}, {"segments", segments_.size()}});
}

void Journal::CopySegments() {
  std::string buf(kCopyChunk, '\0');
  for (Segment& g : segments_) {
    const bool active = g.fd == seg_fd_;
    struct stat src {}, dst {};
    if (::fstat(g.fd, &src) != 0) ThrowErrno("stat segment " + g.name);
    if (::fstatat(dir_fd_, g.name.c_str(), &dst, 0) == 0 && dst.st_dev == src.st_dev && dst.st_ino == src.st_ino) {
      continue;  // this very file is in the directory (still linked, or copied by an earlier probe)
    }
    // The active segment up to its last durable group (a failed group's bytes stay behind).
    const std::uint64_t len = active ? seg_bytes_ : static_cast<std::uint64_t>(src.st_size);
    const std::string path = options_.dir + "/" + g.name;
    const int fd = ::openat(dir_fd_, g.name.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) ThrowErrno("create " + path);
    try {
      for (std::uint64_t off = 0; off < len;) {
        const ssize_t r = ::pread(g.fd, buf.data(), std::min<std::uint64_t>(kCopyChunk, len - off), static_cast<off_t>(off));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) ThrowErrno("read the removed " + path);
        WriteAll(fd, buf.data(), static_cast<std::size_t>(r), path);
        off += static_cast<std::uint64_t>(r);
      }
      if (::fdatasync(fd) != 0) ThrowErrno("fdatasync " + path);
      if (active && ::lseek(fd, static_cast<off_t>(len), SEEK_SET) < 0) ThrowErrno("seek " + path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(g.fd);
    g.fd = fd;
    if (active) {
      seg_fd_ = fd;
      seg_zeroed_ = false;
    }
  }
  std::string data;
  {
    const MutexLock lk(&mu_);
    Put(data, checkpoint_lsn_);
  }
  Put(data, Crc32c(data));
  WriteFileDurably(dir_fd_, options_.dir, "checkpoint", data);  // fsyncs the directory: the copies' names too
}

void Journal::Probe() {
  static const std::array<char, kProbeBytes> kZeros{};
  const std::string path = options_.dir + "/" + kProbeName;
  const int fd = ::openat(dir_fd_, kProbeName, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ThrowErrno("create " + path);
  try {
    WriteAll(fd, kZeros.data(), kZeros.size(), path);
    if (::fdatasync(fd) != 0) ThrowErrno("fdatasync " + path);
  } catch (...) {
    ::close(fd);
    (void)::unlinkat(dir_fd_, kProbeName, 0);
    throw;
  }
  ::close(fd);
  (void)::unlinkat(dir_fd_, kProbeName, 0);
}

void Journal::TrimActive() {
  if (seg_fd_ >= 0) {
    // The failed group's bytes (whole, torn or absent) go; the durable groups before them stay.
    if (::ftruncate(seg_fd_, static_cast<off_t>(seg_bytes_)) != 0) ThrowErrno("truncate segment");
    if (::fdatasync(seg_fd_) != 0) ThrowErrno("fdatasync segment");
    if (::lseek(seg_fd_, static_cast<off_t>(seg_bytes_), SEEK_SET) < 0) ThrowErrno("seek segment");
    seg_zeroed_ = false;
    return;
  }
  // A rotation that failed may have left the next segment's name holding a header only (no record).
  std::uint64_t durable;
  {
    const MutexLock lk(&mu_);
    durable = durable_lsn_;
  }
  const std::string name = SegmentName(durable);
  for (const Segment& g : segments_) {
    if (g.name == name) return;
  }
  if (::unlinkat(dir_fd_, name.c_str(), 0) != 0 && errno != ENOENT) ThrowErrno("unlink " + name);
}

}  // namespace scangate::storage
