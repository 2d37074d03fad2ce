// PostgreSQL's binary wire format, the pieces more than one reader needs: its timestamp epoch and big-endian
// integers. Pure functions; any thread.
#pragma once

#include <cstdint>

namespace scangate::storage {

// timestamptz on the wire (binary COPY, binary results, the replication protocol): µs since 2000-01-01T00:00:00Z;
// this is that instant in µs since the Unix epoch.
inline constexpr std::int64_t kPgEpochUs = 946'684'800'000'000;

// The 8 big-endian bytes at `p` as an integer (int8, timestamptz, LSN on the wire).
inline std::uint64_t LoadBe64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace scangate::storage
