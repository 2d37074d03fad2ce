// Journal segment files (storage/journal/journal.h "Format", "Pre-zeroed segments"): opening the next segment (the
// pre-zeroed spare renamed into place, or a new file), closing the active one, and zero-filling the spare a
// slice at a time between groups. Flusher thread only (Close() after it stopped).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <stdexcept>

#include "storage/journal/journal.h"
#include "storage/journal/journal_files.h"

namespace scangate::storage {

using namespace journal_files;  // NOLINT: the journal's own file plumbing

namespace {
// Zeros written to the spare per flusher pass (between groups): an 8 MB segment is ready after 32 passes,
// each ~20-40 µs of page-cache copying, so no group waits long for it.
constexpr std::size_t kSpareSlice = 256 << 10;
}  // namespace

void Journal::CloseSegment() {
  if (seg_fd_ < 0) return;
  // The pre-zeroed rest is dropped (not synced: recovery reads a zero tail as the segment's end anyway).
  if (seg_zeroed_) (void)!::ftruncate(seg_fd_, static_cast<off_t>(seg_bytes_));
  seg_zeroed_ = false;
  seg_fd_ = -1;  // the fd stays open in segments_ until the segment is deleted (or Close)
}

void Journal::OpenSegment(std::uint64_t base) {
  CloseSegment();
  const std::string name = SegmentName(base);
  const std::string path = options_.dir + "/" + name;
  std::string header(kSegmentMagic);
  Put(header, base);
  // The spare when it is ready (renamed into place below), else a new, empty file.
  const bool zeroed = spare_ready_;
  int fd;
  if (zeroed) {
    fd = spare_fd_;
    spare_fd_ = -1;
    spare_ready_ = false;
    spare_bytes_ = 0;
  } else {
    fd = ::openat(dir_fd_, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) ThrowErrno("create " + path);
  }
  try {
    // Header first and durable, then the name: a crash never leaves a named segment without its header.
    if (::pwrite(fd, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
      ThrowErrno("write " + path);
    }
    if (::fdatasync(fd) != 0) ThrowErrno("fdatasync " + path);
    // RENAME_NOREPLACE: like the O_EXCL of a new file, an existing file of that name is an error.
    if (zeroed && ::renameat2(dir_fd_, kSpareName, dir_fd_, name.c_str(), RENAME_NOREPLACE) != 0) {
      ThrowErrno("rename " + spare_path_);
    }
    if (::fsync(dir_fd_) != 0) ThrowErrno("fsync " + options_.dir);
    if (::lseek(fd, static_cast<off_t>(header.size()), SEEK_SET) < 0) ThrowErrno("seek " + path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  segments_.push_back(Segment{base, name, fd});
  seg_fd_ = fd;
  seg_zeroed_ = zeroed;
  seg_base_ = base;
  seg_bytes_ = header.size();
}

void Journal::PrepareSpare() {
  if (!preallocate_ || spare_ready_) return;
  static const std::array<char, kSpareSlice> kZeros{};
  const std::string& spare = spare_path_;
  try {
    if (spare_fd_ < 0) {
      // A disk without room for two more segments: a spare would fill it, and a group write then fails
      // (ENOSPC makes the journal unusable). Segments grow by appending instead.
      struct statvfs fs {};
      if (::fstatvfs(dir_fd_, &fs) == 0 &&
          static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize < 2 * options_.segment_bytes) {
        throw std::runtime_error("less free space than two segments on the journal's disk");
      }
      spare_fd_ = ::openat(dir_fd_, kSpareName, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (spare_fd_ < 0) ThrowErrno("create " + spare);
      spare_bytes_ = 0;
    }
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kSpareSlice, options_.segment_bytes - spare_bytes_));
    WriteAll(spare_fd_, kZeros.data(), n, spare);
    spare_bytes_ += n;
    if (spare_bytes_ >= options_.segment_bytes) {
      if (::fdatasync(spare_fd_) != 0) ThrowErrno("fdatasync " + spare);
      spare_ready_ = true;
    }
  } catch (const std::exception& e) {
    // Not the journal's failure: segments grow by appending from now on (as with preallocate = false).
    preallocate_ = false;
    if (spare_fd_ >= 0) ::close(spare_fd_);
    spare_fd_ = -1;
    (void)::unlinkat(dir_fd_, kSpareName, 0);
    log_->Write(LogSeverity::kWarn, "journal", {{"preallocation", "off"}, {"error", e.what()}});
  }
}

}  // namespace scangate::storage
