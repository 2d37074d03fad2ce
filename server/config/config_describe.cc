// Describe(): the effective configuration as the start-up `config` log line shows it (server/config/config.h). Its own
// unit so that the option table and its parsing (server/config/config.cc) keep one job. Invariant: no secret is ever
// written — the database password redacted, the digest secret and the tokens only as "set" / a count.
#include <boost/json/array.hpp>

#include "server/config/config.h"
#include "server/version.h"
#include "storage/pg/conninfo.h"

namespace scangate::server {

std::string RedactDatabaseUrl(std::string_view url) { return storage::RedactConninfo(url); }

boost::json::object Describe(const Config& c) {
  boost::json::object o;
  o["version"] = VersionLine();
  o["config"] = c.config_file;
  o["listen"] = c.listen;
  o["port"] = c.port;
  o["port_file"] = c.port_file;
  o["threads"] = c.threads;
  o["database_url"] = RedactDatabaseUrl(c.database_url);
  o["partitions"] = RedactDatabaseUrl(c.partitions_url);
  if (c.partitioned()) {
    o["partition_cluster"] = c.partition_cluster;
    o["partition_map_poll_ms"] = c.partition_map_poll.count();
  }
  o["capacity"] = c.capacity;
  o["fp_target"] = c.fp_target;
  o["window_seconds"] = c.window.count();
  o["retention_seconds"] = c.retention.count();  // 0 = off
  o["keys"] = KeysName(c.keys);
  if (c.keys == KeysMode::kGs1) o["expiry_grace_seconds"] = c.expiry_grace.count();
  o["shards"] = c.shards;
  o["ack"] = c.ack == AckMode::kCommit ? "commit" : "filter";
  o["epoch_keys"] = c.epoch_keys;                        // 0 = no size bound
  o["epoch_max_age_seconds"] = c.epoch_max_age.count();  // 0 = no age bound
  o["writers"] = c.writers;
  o["batch_limit"] = c.batch_limit;
  o["flush_interval_us"] = c.flush_interval.count();
  o["queue_limit"] = c.queue_limit;
  o["request_timeout_ms"] = c.request_timeout.count();
  o["queue_wait_ms"] = c.queue_wait.count();
  o["digest"] = c.digest_secret.empty() ? "sha256" : "hmac-sha256";
  o["digest_secret"] = c.digest_secret.empty() ? "unset" : "set";
  o["digest_secret_previous"] = !c.digest_rotating() ? "unset" : c.digest_secret_previous.empty() ? "none" : "set";
  o["filter"] = c.filter ? "on" : "off";
  o["recent_keys"] = c.recent_keys;
  o["access_log"] = c.access_log ? "on" : "off";
  o["tls"] = c.tls() ? "on" : "off";
  o["admin_tls"] = c.admin_tls;
  o["tls_cert"] = c.tls_cert;
  o["tls_client_ca"] = c.tls_client_ca;
  o["tls_crl"] = c.tls_crl;
  o["tokens"] = c.terminals.size();   // how many, never which
  o["tokens_file"] = c.tokens_file;
  o["rate_limit"] = c.rate_limit;
  o["rate_burst"] = c.rate_burst;
  o["admin_listen"] = c.admin_listen;
  o["cors_origins"] = boost::json::array(c.cors_origins.begin(), c.cors_origins.end());
  o["insecure"] = c.insecure;
  o["max_connections_per_address"] = c.max_connections_per_address;
  o["ipv6_prefix_length"] = c.ipv6_prefix_length;
  o["admin_max_connections_per_address"] = c.admin_max_connections_per_address;
  o["admin_idle_timeout_ms"] = c.admin_idle_timeout.count();
  o["max_body_bytes_in_flight"] = c.max_body_bytes_in_flight;
  o["protected_mode"] = c.protected_mode;
  o["allowed_hosts"] = boost::json::array(c.allowed_hosts.begin(), c.allowed_hosts.end());
  o["proxy_protocol_from"] = boost::json::array(c.proxy_protocol_from.begin(), c.proxy_protocol_from.end());
  o["journal"] = c.ack == AckMode::kFilter ? (c.journal ? "on" : "off") : "unused";
  o["journal_dir"] = c.journal_dir;
  o["journal_max_bytes"] = c.journal_max_bytes;
  o["follow"] = c.following() ? storage::FollowMethodName(c.follow_method) : (c.ack == AckMode::kFilter ? "off" : "unused");
  o["follow_max_lag_ms"] = c.follow_max_lag.count();
  o["max_commit_lag_ms"] = c.max_commit_lag.count();
  o["peer_wait_ms"] = c.peer_wait.count();
  return o;
}

}  // namespace scangate::server
