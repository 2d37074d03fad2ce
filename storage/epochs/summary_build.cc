#include "storage/epochs/summary_build.h"

#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/pg/copy_out.h"

namespace scangate::storage {
namespace {

// COPY of a table's one column reads its heap in order, no query to plan; the relation is a plain identifier.
constexpr const char* kCopyPrefix = "COPY ";
constexpr const char* kCopySuffix = " (digest) TO STDOUT (FORMAT binary)";
constexpr std::size_t kMaxIdentifier = 63;  // PostgreSQL's NAMEDATALEN - 1

}  // namespace

bool IsPlainIdentifier(std::string_view name) {
  if (name.empty() || name.size() > kMaxIdentifier || (name[0] >= '0' && name[0] <= '9')) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

EpochSummary BuildEpochSummary(PGconn* conn, std::string_view relation, double bits_per_key) {
  if (!IsPlainIdentifier(relation)) throw std::invalid_argument("BuildEpochSummary: not a plain relation name");
  std::vector<Digest> digests;
  const CopyDigestParser::Sink sink = [&digests](std::span<const Digest> chunk) {
    digests.insert(digests.end(), chunk.begin(), chunk.end());
  };
  const std::string sql = kCopyPrefix + std::string(relation) + kCopySuffix;
  CopyDigestsOut(conn, sql, sink, nullptr, "BuildEpochSummary");
  EpochSummary summary = EpochSummary::ForKeys(digests.size(), bits_per_key);
  for (const Digest& d : digests) summary.Add(d);
  return summary;
}

}  // namespace scangate::storage
