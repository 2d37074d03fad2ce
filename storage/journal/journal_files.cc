#include "storage/journal/journal_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <system_error>

namespace scangate::storage::journal_files {

void ThrowErrno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), "journal: " + what);
}

void WriteAll(int fd, const char* data, std::size_t n, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      ThrowErrno("write " + what);
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

std::string FaultCause(const std::exception& e) {
  const auto* se = dynamic_cast<const std::system_error*>(&e);
  if (se == nullptr || se->code().category() != std::generic_category()) return e.what();
  const char* name = ::strerrordesc_np(se->code().value()) != nullptr ? ::strerrorname_np(se->code().value()) : nullptr;
  std::string what = se->what();  // "journal: write segment: No space left on device"
  if (const auto colon = what.rfind(": "); colon != std::string::npos) what.resize(colon);
  return std::string(name != nullptr ? name : "errno " + std::to_string(se->code().value())) + ": " +
         se->code().message() + " (" + what + ")";
}

std::string NewInstanceId() {
  std::random_device rd;  // getrandom(2)
  unsigned char b[16];
  for (int i = 0; i < 16; i += 4) {
    const std::uint32_t w = rd();
    std::memcpy(b + i, &w, 4);
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // variant 1
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(kHex[b[i] >> 4]);
    s.push_back(kHex[b[i] & 15]);
  }
  return s;
}

bool WellFormedInstanceId(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (id[i] == '-')) return false;
    if (!dash && !((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
  }
  return true;
}

std::string SegmentName(std::uint64_t base) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx.seg", static_cast<unsigned long long>(base));
  return buf;
}

bool ParseSegmentName(const std::string& name, std::uint64_t& base) {
  if (name.size() != 20 || name.substr(16) != ".seg") return false;
  base = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    int v;
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else return false;
    base = base << 4 | static_cast<std::uint64_t>(v);
  }
  return true;
}

std::string ReadWhole(int dir_fd, const std::string& dir, const std::string& name) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowErrno("cannot read " + dir + "/" + name);
  std::string out;
  char buf[64 << 10];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "journal: cannot read " + dir + "/" + name);
    }
    if (r == 0) break;
    out.append(buf, static_cast<std::size_t>(r));
  }
  ::close(fd);
  return out;
}

void WriteFileDurably(int dir_fd, const std::string& dir, const std::string& name, const std::string& data) {
  const std::string tmp = name + ".tmp";
  const int fd = ::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ThrowErrno("open " + dir + "/" + tmp);
  try {
    WriteAll(fd, data.data(), data.size(), dir + "/" + tmp);
    if (::fdatasync(fd) != 0) ThrowErrno("fdatasync " + dir + "/" + tmp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) ThrowErrno("rename " + dir + "/" + tmp);
  if (::fsync(dir_fd) != 0) ThrowErrno("fsync " + dir);
}

}  // namespace scangate::storage::journal_files
