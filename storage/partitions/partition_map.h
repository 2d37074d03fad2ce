// The partition map of a partitioned exact store (issue 23): which logical partition a digest belongs to
// (PartitionOf, the C++ twin of sql/007's scangate_partition_hash & (count - 1), PL/Proxy's RUN ON rule), and
// where each partition lives — read from PL/Proxy's cluster definition (a foreign server of the plproxy
// wrapper, options p0 .. p<count-1>) in the proxy database.
// Invariant: PartitionOf agrees bit for bit with `scangate_partition_hash(d) & (count - 1)` in SQL, so
// scangate's direct writes and the PL/Proxy functions put a digest on the same partition; a map is valid only
// with every pN for N < count present and count a power of two. Nothing here logs a password.
// Use: storage/partitions/partitioned_store.h reads the map at start and on every poll; tools and tests use
// PartitionOf.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/digest.h"

namespace scangate::storage {

// The partition of a digest: big-endian int4 of bytes 4..7, & (count - 1). count a power of two.
// (Bytes 4..7, not 0..3: the store's writer route uses bytes 0..3, so a partition's keys still spread over its
// writers.) Pure; safe from any thread.
unsigned PartitionOf(const Digest& d, std::size_t count);

struct PartitionMap {
  std::vector<std::string> conninfo;  // index = logical partition; libpq connection strings
  bool operator==(const PartitionMap&) const = default;
};

// PL/Proxy's srvoptions ("p0=...", "connection_lifetime=1800", ...): the pN entries, N = 0..count-1 all
// present, count a power of two >= 1; other options ignored. Throws std::invalid_argument (message says why).
PartitionMap ParsePartitionOptions(const std::vector<std::string>& srvoptions);

// Reads the foreign server `cluster` of the plproxy wrapper in the proxy database. Throws (pqxx errors,
// std::invalid_argument, std::runtime_error "no PL/Proxy cluster named ..."). Opens and closes its own
// connection; safe from any thread.
PartitionMap ReadPartitionMap(const std::string& proxy_conninfo, const std::string& cluster);

// A connstr for logs: host, port, dbname only (never a password). "<unparsable>" when libpq cannot parse it.
std::string DescribeConninfo(const std::string& conninfo);

// "p3": partition 3's name in log lines (a Store's "partition" field), /metrics labels and /stats.
std::string PartitionLabel(std::size_t partition);

}  // namespace scangate::storage
