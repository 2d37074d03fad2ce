// File plumbing shared by the journal's translation units (storage/journal/journal.cc, journal_recover.cc,
// journal_heal.cc): the on-disk constants of the format described in storage/journal/journal.h, errno-throwing
// write helpers and durable small-file writes. Every path is relative to the journal's directory fd
// (openat/renameat), so a removed or replaced directory never receives a write meant for the old one.
// Internal to the journal: nothing outside storage/journal*.cc includes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include <boost/crc.hpp>

namespace scangate::storage::journal_files {

inline constexpr std::string_view kSegmentMagic = "SGJNL001";
inline constexpr std::size_t kSegmentHeader = 16;         // magic + base LSN
inline constexpr std::size_t kRecordHeader = 8;           // u32 length + u32 CRC32C
inline constexpr std::size_t kFixedPayload = 32 + 8 + 1;  // digest, time, source length
inline constexpr std::size_t kRequestBytes = 16;          // the optional idempotency record after the source
inline constexpr std::string_view kMetaHeader = "scangate-journal 1\n";
inline constexpr std::size_t kCheckpointBytes = 12;  // u64 LSN + u32 CRC32C
inline constexpr const char* kSpareName = "spare.tmp";  // the next segment, being zero-filled
inline constexpr const char* kProbeName = "probe.tmp";  // the heal probe's scratch file
inline constexpr const char* kInstanceName = "instance";  // the owner's identity (issue 42)

using Crc32cAlgo = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

// Throws std::system_error(errno) with "journal: <what>".
[[noreturn]] void ThrowErrno(const std::string& what);
// Writes all `n` bytes at the file position (EINTR retried); throws on an error (ENOSPC, EIO).
void WriteAll(int fd, const char* data, std::size_t n, const std::string& what);
// "<16 hex>.seg" of a segment starting at `base`; ParseSegmentName is its inverse (false for other names).
std::string SegmentName(std::uint64_t base);
bool ParseSegmentName(const std::string& name, std::uint64_t& base);
// The whole file `name` in the directory `dir_fd` (`dir` names it in errors).
std::string ReadWhole(int dir_fd, const std::string& dir, const std::string& name);
// Writes `data` to dir/name atomically and durably: temporary file, fdatasync, rename, fsync of the directory.
void WriteFileDurably(int dir_fd, const std::string& dir, const std::string& name, const std::string& data);
// A fault's cause for logs and /readyz: "ENOSPC: No space left on device (journal: write segment)" for a
// std::system_error, else what() as it is.
std::string FaultCause(const std::exception& e);
// A random (version 4) UUID in its text form, e.g. "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b" (std::random_device).
std::string NewInstanceId();
// `id` is a UUID's text form (36 characters, lower-case hex and dashes at 8-4-4-4-12).
bool WellFormedInstanceId(std::string_view id);
// The `meta` file's content for `identity`.
inline std::string MetaContent(const std::string& identity) { return std::string(kMetaHeader) + identity + "\n"; }

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof v];
  std::memcpy(buf, &v, sizeof v);
  out.append(buf, sizeof v);
}

}  // namespace scangate::storage::journal_files
