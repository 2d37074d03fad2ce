// The peers table's SQL (issue 42, sql/011_scangate_instances.sql), shared by the statements that read it — the
// poll follower's poll and the logical follower's probe (storage/follow/), --ack=commit's PeerWatch — and
// parsed by PeerView (storage/peers/peer_view.h). The rows are read as ONE JSON text in the reading statement
// itself, so they come from that statement's snapshot: the one the follower's keys come from.
#pragma once

#include <string>

namespace scangate::storage {

// A scalar subquery: the rows of logical partition `partition` that are running, or stopped or retired within
// the last minute (so a reader logs how a peer left), as a JSON array of
//   {"id": uuid, "state": text, "lag_us": now() - covered_until, "age_us": now() - heartbeat_at,
//    "uncommitted": int8, "host": text, "pid": int4, "incarnation": uuid or null (sql/015: the process holding it),
//    "clock": bool (sql/016: covered_until was computed under the database's current clock epoch, and is not past
//             this statement's now() by more than a second — a step back nobody has reported yet)}
// with both durations in µs of the statement's now() — PostgreSQL's clock only, no instance's. '[]' when none.
// A row whose "clock" is false covers nothing (storage/peers/watermark_publisher.h, THE CLOCK EPOCH).
inline std::string PeersJsonSql(unsigned partition) {
  return "(SELECT coalesce(json_agg(json_build_object("
         "'id', instance_id, 'state', state, "
         "'lag_us', (extract(epoch FROM now() - covered_until) * 1000000)::int8, "
         "'age_us', (extract(epoch FROM now() - heartbeat_at) * 1000000)::int8, "
         "'uncommitted', uncommitted, 'host', host, 'pid', pid, 'incarnation', incarnation, "
         "'clock', coalesce(clock_epoch = (SELECT scangate_clock_epoch_now()), false) "
         "AND covered_until <= now() + interval '1 second')), '[]')::text FROM scangate_instances "
         "WHERE partition = " +
         std::to_string(partition) +
         " AND (state = 'running' OR heartbeat_at > now() - interval '1 minute' "
         "OR retired_at > now() - interval '1 minute'))";
}

}  // namespace scangate::storage
