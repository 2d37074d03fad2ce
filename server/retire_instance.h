// `scangate --retire-instance=<id>` (issue 42): the operator's one command for a --ack=filter instance gone for
// good with its journal (a host lost): its rows of scangate_instances — in --database-url's database, or in every
// partition of --partitions' map — become `retired` (sql/011 scangate_retire_instance), so the other instances stop
// waiting for the keys it held answered `new` and uncommitted. Those keys (at most the `uncommitted` figure printed,
// answered after `covered_until`) may then be answered `new` a second time: an explicit, logged loss window
// (docs/ha.md "A dead instance"). Prints one JSON line per retired row and a summary.
#pragma once

#include "server/config/config.h"

namespace scangate::server {

// Exit code: 0 when at least one running row was retired, 3 when the instance had no running row (nothing done),
// 1 when a database could not be reached or refused (what was retired elsewhere stays retired: run it again).
int RetireInstance(const Config& config);

}  // namespace scangate::server
