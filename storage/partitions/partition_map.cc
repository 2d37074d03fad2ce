#include "storage/partitions/partition_map.h"

#include <libpq-fe.h>

#include <charconv>
#include <memory>
#include <stdexcept>
#include <string_view>

#include <pqxx/pqxx>

namespace scangate::storage {
namespace {

// The cluster's options as PL/Proxy itself finds them: the foreign server of the plproxy wrapper by name.
constexpr const char* kPartitionMapSql =
    "SELECT s.srvoptions FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w ON w.oid = s.srvfdw "
    "WHERE w.fdwname = 'plproxy' AND s.srvname = $1";

// PL/Proxy caps a cluster at this many partitions; it also bounds what a typo ("p99999999") can allocate.
constexpr std::size_t kMaxPartitions = 1u << 16;

// "p<digits>" -> the index; false for any other option name.
bool PartitionIndex(std::string_view key, std::size_t& index) {
  if (key.size() < 2 || key[0] != 'p') return false;
  const char* first = key.data() + 1;
  const char* last = key.data() + key.size();
  if (key.size() > 2 && key[1] == '0' && key[2] >= '0' && key[2] <= '9') {
    // "p01": partition 1 or not? Refused rather than guessed differently from PL/Proxy.
    throw std::invalid_argument("partition map: option " + std::string(key) + " has a leading zero");
  }
  const auto [end, ec] = std::from_chars(first, last, index);
  return ec == std::errc() && end == last;
}

struct ConninfoOptionsFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

}  // namespace

unsigned PartitionOf(const Digest& d, std::size_t count) {
  const std::uint32_t hash = (std::uint32_t{d[4]} << 24) | (std::uint32_t{d[5]} << 16) |
                             (std::uint32_t{d[6]} << 8) | std::uint32_t{d[7]};
  return static_cast<unsigned>(hash & static_cast<std::uint32_t>(count - 1));
}

PartitionMap ParsePartitionOptions(const std::vector<std::string>& srvoptions) {
  std::vector<std::string> slots;
  std::vector<bool> seen;
  for (const std::string& option : srvoptions) {
    const auto eq = option.find('=');  // the first '=': the value may hold more ("host=... port=...")
    if (eq == std::string::npos) continue;
    std::size_t index = 0;
    if (!PartitionIndex(std::string_view(option).substr(0, eq), index)) continue;
    if (index >= kMaxPartitions) {
      throw std::invalid_argument("partition map: option p" + std::to_string(index) + " is beyond " +
                                  std::to_string(kMaxPartitions - 1));
    }
    if (index >= slots.size()) {
      slots.resize(index + 1);
      seen.resize(index + 1, false);
    }
    if (seen[index]) throw std::invalid_argument("partition map: p" + std::to_string(index) + " given twice");
    seen[index] = true;
    slots[index] = option.substr(eq + 1);
  }
  if (slots.empty()) throw std::invalid_argument("partition map: no p0, p1, ... options");
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (!seen[i]) {
      throw std::invalid_argument("partition map: p" + std::to_string(i) + " is missing (options up to p" +
                                  std::to_string(slots.size() - 1) + " are given)");
    }
  }
  if ((slots.size() & (slots.size() - 1)) != 0) {
    throw std::invalid_argument("partition map: " + std::to_string(slots.size()) +
                                " partitions, not a power of two");
  }
  return PartitionMap{std::move(slots)};
}

PartitionMap ReadPartitionMap(const std::string& proxy_conninfo, const std::string& cluster) {
  pqxx::connection c(proxy_conninfo);
  pqxx::nontransaction tx(c);
  const pqxx::result r = tx.exec_params(kPartitionMapSql, cluster);
  if (r.empty()) throw std::runtime_error("no PL/Proxy cluster named \"" + cluster + "\"");
  std::vector<std::string> options;
  if (!r[0][0].is_null()) {
    pqxx::array_parser parser(r[0][0].c_str());
    for (;;) {
      const auto [juncture, value] = parser.get_next();
      if (juncture == pqxx::array_parser::juncture::done) break;
      if (juncture == pqxx::array_parser::juncture::string_value) options.push_back(value);
    }
  }
  return ParsePartitionOptions(options);
}

std::string PartitionLabel(std::size_t partition) {
  std::string s(1, 'p');  // appended, not "p" + ...: GCC 12 warns falsely (-Wrestrict) on that form
  s += std::to_string(partition);
  return s;
}

std::string DescribeConninfo(const std::string& conninfo) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoOptionsFree> options(PQconninfoParse(conninfo.c_str(), &error));
  if (error != nullptr) PQfreemem(error);
  if (!options) return "<unparsable>";
  std::string out;
  for (const std::string_view key : {"host", "port", "dbname"}) {
    for (const PQconninfoOption* o = options.get(); o->keyword != nullptr; ++o) {
      if (o->val == nullptr || key != o->keyword) continue;
      if (!out.empty()) out += ' ';
      out += std::string(key) + '=' + o->val;
    }
  }
  return out;
}

}  // namespace scangate::storage
