// Connection strings of scangate's PostgreSQL connections, parsed by libpq itself (PQconninfoParse: URI
// and keyword=value forms, quoting, %-escapes). Two jobs: add the options that keep a connection from
// hanging silently (statement_timeout, tcp_user_timeout, TCP keepalives, connect_timeout,
// application_name) where the user set none, and render a copy for logs with every secret masked.
// Invariant: a password (or sslpassword) never appears in anything returned or thrown here.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

namespace scangate::storage {

// What WithConnectionDefaults adds. Each applies only when neither the connection string nor the
// matching libpq environment variable (PGCONNECT_TIMEOUT, PGAPPNAME, PGOPTIONS, ...) sets it.
struct ConnectionDefaults {
  std::chrono::milliseconds statement_timeout{0};  // "-c statement_timeout=<ms>" in options; 0 = none added
  std::chrono::milliseconds tcp_user_timeout{0};   // unacknowledged data: the kernel drops the connection; 0 = none
  // Idle connection probing: a dead peer (no RST) is found after idle + interval * count seconds.
  int keepalives_idle_s = 10;
  int keepalives_interval_s = 3;
  int keepalives_count = 3;
  int connect_timeout_s = 10;  // a connect to an unreachable host (SYNs dropped) gives up after this
  std::string application_name = "scangate";  // pg_stat_activity.application_name
  // Appended to options whatever the user set there: scangate's own settings, e.g. the writers' digest scheme
  // ("-c scangate.digest_scheme=<hex>", storage/scheme/scheme_record.h). "" = none.
  std::string extra_options;
};

// The parsed `conninfo` as a keyword=value string with the defaults appended. Throws
// std::invalid_argument (with libpq's reason, quoted fragments of the input removed) when libpq cannot
// parse it.
std::string WithConnectionDefaults(std::string_view conninfo, const ConnectionDefaults& defaults);

// The parsed options as "keyword=value ..." with password and sslpassword values replaced by "***";
// "<unparsable>" (nothing of the input) when libpq cannot parse it. For logs.
std::string RedactConninfo(std::string_view conninfo);

// Why libpq rejects `conninfo` ("" when it parses), with every quoted fragment replaced by "...", so a
// secret next to a syntax error is not echoed.
std::string ConninfoParseError(std::string_view conninfo);

}  // namespace scangate::storage
