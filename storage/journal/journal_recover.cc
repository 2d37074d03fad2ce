// Journal start-up (storage/journal/journal.h "Format"): the `meta` identity check and the recovery scan of the
// segments past the checkpoint, truncating a torn tail of the last one. Runs in the constructor, before the
// flusher exists.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "storage/journal/journal.h"
#include "storage/journal/journal_files.h"

namespace scangate::storage {

namespace fs = std::filesystem;
using namespace journal_files;  // NOLINT: the journal's own file plumbing

namespace {
constexpr std::size_t kMaxPayload = kFixedPayload + kMaxJournalSource + kRequestBytes;

bool Exists(int dir_fd, const char* name) { return ::faccessat(dir_fd, name, F_OK, 0) == 0; }
}  // namespace

void Journal::CheckMeta() {
  const std::string expected = MetaContent(options_.identity);
  // The owner's identity (issue 42): kept when present and well formed, else a new one (a journal made before
  // issue 42, or a new journal: a new instance).
  if (Exists(dir_fd_, kInstanceName)) {
    instance_id_ = ReadWhole(dir_fd_, options_.dir, kInstanceName);
    while (!instance_id_.empty() && instance_id_.back() == '\n') instance_id_.pop_back();
  }
  if (!WellFormedInstanceId(instance_id_)) {
    instance_id_ = NewInstanceId();
    WriteFileDurably(dir_fd_, options_.dir, kInstanceName, instance_id_ + "\n");
  }
  if (Exists(dir_fd_, "meta")) {
    const std::string found = ReadWhole(dir_fd_, options_.dir, "meta");
    if (found != expected) {
      std::string theirs = found.rfind(kMetaHeader, 0) == 0 ? found.substr(kMetaHeader.size()) : found;
      while (!theirs.empty() && theirs.back() == '\n') theirs.pop_back();
      throw JournalError("journal directory '" + options_.dir + "' belongs to another database (" + theirs +
                         "), this instance uses " + options_.identity +
                         "; its records must not be replayed here. Point --journal-dir at this database's "
                         "journal or an empty directory.");
    }
    return;
  }
  for (const auto& e : fs::directory_iterator(options_.dir)) {
    std::uint64_t base;
    const std::string name = e.path().filename().string();
    if (ParseSegmentName(name, base) || name == "checkpoint") {
      throw JournalError("journal directory '" + options_.dir + "' holds journal files but no 'meta' file: "
                         "cannot tell which database they belong to; refusing to replay them");
    }
  }
  WriteFileDurably(dir_fd_, options_.dir, "meta", expected);
}

void Journal::Recover() {
  std::uint64_t checkpoint = 0;
  if (Exists(dir_fd_, "checkpoint")) {
    const std::string cp = ReadWhole(dir_fd_, options_.dir, "checkpoint");
    if (cp.size() != kCheckpointBytes || Load<std::uint32_t>(cp.data() + 8) != Crc32c(cp.substr(0, 8))) {
      throw JournalError("journal: corrupt checkpoint file '" + options_.dir + "/checkpoint'");
    }
    checkpoint = Load<std::uint64_t>(cp.data());
  }
  std::vector<std::pair<std::uint64_t, std::string>> found;  // (base, name)
  for (const auto& e : fs::directory_iterator(options_.dir)) {
    std::uint64_t base;
    const std::string name = e.path().filename().string();
    if (ParseSegmentName(name, base)) found.emplace_back(base, name);
  }
  std::sort(found.begin(), found.end());
  const auto unlink = [this](const std::string& name) {
    if (::unlinkat(dir_fd_, name.c_str(), 0) != 0) ThrowErrno("unlink " + options_.dir + "/" + name);
  };
  std::uint64_t end = checkpoint;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const auto& [base, name] = found[i];
    const std::string path = options_.dir + "/" + name;
    const bool last = i + 1 == found.size();
    if (!last && found[i + 1].first <= checkpoint) {  // every record of it is applied
      unlink(name);
      continue;
    }
    const std::string data = ReadWhole(dir_fd_, options_.dir, name);
    if (data.size() < kSegmentHeader || data.compare(0, kSegmentMagic.size(), kSegmentMagic) != 0 ||
        Load<std::uint64_t>(data.data() + 8) != base) {
      if (last && data.size() < kSegmentHeader) {  // torn while being created: it holds no record
        unlink(name);
        continue;
      }
      throw JournalError("journal: segment '" + path + "' has a bad header");
    }
    if (!segments_.empty() && base != end) {
      throw JournalError("journal: segment '" + path + "' does not continue the previous one (gap in the log)");
    }
    std::size_t pos = kSegmentHeader;
    std::uint64_t lsn = base;
    std::size_t records = 0;
    while (pos < data.size()) {
      // Zeros to the end: the unused rest of a pre-zeroed segment, its clean end (a torn write leaves bytes).
      if (std::all_of(data.begin() + static_cast<std::ptrdiff_t>(pos), data.end(), [](char c) { return c == 0; })) {
        break;
      }
      bool good = data.size() - pos >= kRecordHeader;
      std::uint32_t len = 0;
      if (good) {
        len = Load<std::uint32_t>(data.data() + pos);
        good = len >= kFixedPayload && len <= kMaxPayload && data.size() - pos - kRecordHeader >= len;
      }
      if (good) {
        Crc32cAlgo crc;
        crc.process_bytes(data.data() + pos, 4);
        crc.process_bytes(data.data() + pos + kRecordHeader, len);
        // The source length leaves room for nothing or exactly an idempotency record.
        const std::size_t head = kFixedPayload + static_cast<unsigned char>(data[pos + kRecordHeader + 40]);
        good = crc.checksum() == Load<std::uint32_t>(data.data() + pos + 4) &&
               (head == len || head + kRequestBytes == len);
      }
      if (!good) {
        if (!last) {
          throw JournalError("journal: corrupt record at byte " + std::to_string(pos) + " of segment '" + path +
                             "' (not the last segment: this is not a torn write)");
        }
        // A torn tail: the crash hit the write of the last group, which was never acknowledged.
        const std::size_t dropped = data.size() - pos;
        const int fd = ::openat(dir_fd_, name.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0) ThrowErrno("open " + path);
        const bool ok = ::ftruncate(fd, static_cast<off_t>(pos)) == 0 && ::fdatasync(fd) == 0;
        const int err = errno;
        ::close(fd);
        if (!ok) throw std::system_error(err, std::generic_category(), "journal: truncate " + path);
        log_->Write(LogSeverity::kWarn, "journal_truncated",
                    {{"segment", path}, {"offset", pos}, {"bytes_dropped", dropped}});
        break;
      }
      if (lsn >= checkpoint) {
        JournalEntry e;
        const char* p = data.data() + pos + kRecordHeader;
        std::memcpy(e.record.digest.data(), p, 32);
        e.record.time_us = Load<std::int64_t>(p + 32);
        e.record.source.assign(p + kFixedPayload, static_cast<unsigned char>(p[40]));
        if (kFixedPayload + e.record.source.size() < len) {
          e.record.request.emplace();
          std::memcpy(e.record.request->data(), p + kFixedPayload + e.record.source.size(), kRequestBytes);
        }
        e.lsn = lsn;
        recovered_.push_back(std::move(e));  // outstanding too: inserted below, under mu_
      }
      pos += kRecordHeader + len;
      lsn += kRecordHeader + len;
      ++records;
    }
    if (last && records == 0) {  // nothing in it: remove, so a new segment may take its name
      unlink(name);
      end = std::max(end, lsn);
      continue;
    }
    // Kept open: a removed directory is rebuilt from the open segments (journal_heal.cc).
    const int fd = ::openat(dir_fd_, name.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) ThrowErrno("open " + path);
    segments_.push_back(Segment{base, name, fd});
    end = lsn;
  }
  // No other thread exists yet; the lock is for the analysis (and costs one uncontended lock per start).
  const MutexLock lk(&mu_);
  for (const JournalEntry& e : recovered_) AddOutstandingLocked(e.lsn, e.record, kAgeUnknown);  // ascending LSNs
  NoteOldestLocked();
  checkpoint_lsn_ = checkpoint;
  next_lsn_ = durable_lsn_ = std::max(end, checkpoint);
}

}  // namespace scangate::storage
