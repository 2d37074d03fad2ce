// PartitionedReader: POST /lookup's reader over a partitioned exact store (storage/partitions/partitioned_store.h) —
// one Lookup (storage/read/lookup.h) per logical partition, each on its partition's database, and Find routed to the
// one that PartitionOf(digest) names.
// Invariant: a digest is read only on the partition its writes go to (the same PartitionOf and map), so a
// Lookup answer means what it means for one database; a partition that is down refuses (503) its own
// digests only. Retarget(p, ...) follows a map change (the PartitionedStore's OnRetarget listener calls it).
// Use: instead of one Lookup when the server runs with --partitions; Start() once, Shutdown() before exit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/digest.h"
#include "storage/read/lookup.h"

namespace scangate::storage {

class PartitionedReader final : public DigestReader {
 public:
  // One Lookup per entry of `conninfo` (index = partition; a power of two), each with `base`'s options and
  // its partition's connection string as url. Throws std::invalid_argument when the count is not a power of two.
  PartitionedReader(LookupOptions base, const std::vector<std::string>& conninfo);
  ~PartitionedReader() override;  // calls Shutdown()
  PartitionedReader(const PartitionedReader&) = delete;
  PartitionedReader& operator=(const PartitionedReader&) = delete;

  // Every partition's Lookup::Start (one connection attempt each; failures are retried by their threads).
  void Start();
  // Lookup::Find on the partition of `d`. Thread-safe.
  bool Find(const Digest& d, LookupDone done) override;
  // Every partition's Lookup::Shutdown. Idempotent.
  void Shutdown();

  // Partition `p`'s reads go to `conninfo` from the next one on. Thread-safe; p < partitions().
  void Retarget(unsigned p, std::string conninfo);
  // Partition `p`'s reader is connected. Thread-safe; p < partitions().
  bool up(unsigned p) const;
  std::size_t partitions() const { return lookups_.size(); }

 private:
  std::vector<std::unique_ptr<Lookup>> lookups_;
};

}  // namespace scangate::storage
