#include "server/retire_instance.h"

#include <iostream>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>
#include <pqxx/pqxx>

#include "server/log.h"
#include "storage/partitions/partition_map.h"
#include "storage/pg/conninfo.h"

namespace scangate::server {
namespace {
constexpr const char* kRetireSql =
    "SELECT partition, covered_until::text, heartbeat_at::text, uncommitted FROM scangate_retire_instance($1::uuid)";
}  // namespace

int RetireInstance(const Config& config) {
  storage::ConnectionDefaults d;
  d.statement_timeout = config.request_timeout;
  d.application_name = "scangate-retire";
  std::vector<std::string> databases;
  try {
    if (config.partitioned()) {
      databases = storage::ReadPartitionMap(storage::WithConnectionDefaults(config.partitions_url, d),
                                            config.partition_cluster)
                      .conninfo;
    } else {
      databases.push_back(config.database_url);
    }
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "instance_retired", {{"instance", config.retire_instance}, {"error", e.what()}});
    return 1;
  }
  int retired = 0;
  bool failed = false;
  for (std::size_t i = 0; i < databases.size(); ++i) {
    // The same database may hold several partitions' rows (a map naming one server twice): each database once is
    // enough (the function retires every row of the instance), twice is harmless.
    try {
      pqxx::connection conn(storage::WithConnectionDefaults(databases[i], d));
      pqxx::work tx(conn);
      const pqxx::result r = tx.exec_params(kRetireSql, config.retire_instance);
      tx.commit();
      for (const auto& row : r) {
        ++retired;
        Log(LogLevel::kWarn, "instance_retired",
            {{"instance", config.retire_instance},
             {"database", storage::DescribeConninfo(databases[i])},
             {"partition", row[0].as<int>()},
             {"covered_until", row[1].c_str()},
             {"heartbeat_at", row[2].c_str()},
             {"uncommitted", row[3].as<std::int64_t>()},
             {"note", "the other instances stop waiting for this instance: keys it answered new after covered_until "
                      "and did not commit (at most 'uncommitted' at its last heartbeat) may be answered new again"}});
      }
    } catch (const std::exception& e) {
      failed = true;
      Log(LogLevel::kError, "instance_retired",
          {{"instance", config.retire_instance}, {"database", storage::DescribeConninfo(databases[i])},
           {"error", e.what()}});
    }
  }
  std::cout << boost::json::serialize(boost::json::object{{"instance", config.retire_instance}, {"retired_rows", retired},
                                                          {"complete", !failed}})
            << "\n";
  if (failed) return 1;
  return retired > 0 ? 0 : 3;
}

}  // namespace scangate::server
