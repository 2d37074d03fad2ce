#include "storage/partitions/partitioned_reader.h"

#include <stdexcept>
#include <utility>

#include "storage/partitions/partition_map.h"

namespace scangate::storage {

PartitionedReader::PartitionedReader(LookupOptions base, const std::vector<std::string>& conninfo) {
  const std::size_t n = conninfo.size();
  if (n == 0 || (n & (n - 1)) != 0) {
    throw std::invalid_argument("PartitionedReader: " + std::to_string(n) + " partitions, not a power of two");
  }
  lookups_.reserve(n);
  for (const std::string& c : conninfo) {
    LookupOptions o = base;
    o.url = c;
    lookups_.push_back(std::make_unique<Lookup>(std::move(o)));
  }
}

PartitionedReader::~PartitionedReader() { Shutdown(); }

void PartitionedReader::Start() {
  for (auto& l : lookups_) l->Start();
}

bool PartitionedReader::Find(const Digest& d, LookupDone done) {
  return lookups_[PartitionOf(d, lookups_.size())]->Find(d, std::move(done));
}

void PartitionedReader::Shutdown() {
  for (auto& l : lookups_) l->Shutdown();
}

void PartitionedReader::Retarget(unsigned p, std::string conninfo) { lookups_.at(p)->Retarget(std::move(conninfo)); }

bool PartitionedReader::up(unsigned p) const { return lookups_.at(p)->up(); }

}  // namespace scangate::storage
