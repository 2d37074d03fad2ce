// Configuration of the scangate binary: command line (Boost.Program_options), environment SCANGATE_<NAME>
// (dashes -> underscores, upper case), the --config file (server/config/config_file.h); precedence command line >
// environment > file > defaults; validation and duration parsing.
// Invariant: a Config returned by ParseConfig is fully validated; secrets never appear in Describe().
// Each default is written once: here (the PostgreSQL writers' in storage/store_options.h); --help prints
// these values (server/config/config.cc). Pure apart from reading the process environment, the config file and the
// secret file; unit-tested in tests/server/config/config_test.cc (the file: tests/server/config/config_file_test.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "server/http/auth.h"
#include "storage/follow/follow_method.h"
#include "storage/store_options.h"

namespace scangate::server {

enum class AckMode : std::uint8_t { kCommit, kFilter };
// --keys: raw = the string as sent is the key; gs1 = a GS1 pack (server/verdict/scan_key.h).
enum class KeysMode : std::uint8_t { kRaw, kGs1 };
// --keys' value as spelled on the command line (and in the digest scheme's record).
inline constexpr std::string_view KeysName(KeysMode k) { return k == KeysMode::kGs1 ? "gs1" : "raw"; }

// --partitions: writers per partition unless --writers is given (server/config/config.cc: measured).
inline constexpr unsigned kPartitionWriters = 1;

struct Config {
  std::string config_file;                 // --config: the file read under the flags and environment; "" = none
  // --listen: resolved, never "auto". Protected mode (docs/security.md "Threat model"): "auto" (the default) is 0.0.0.0
  // with both --tokens-file and --digest-secret-file (or --insecure), else 127.0.0.1; an explicit non-loopback
  // address without both is refused at start unless --insecure.
  std::string listen = "127.0.0.1";
  bool insecure = false;                   // --insecure: serve any address without tokens and a digest secret
  bool protected_mode = true;              // resolved: on loopback, without tokens/secret, not --insecure
  bool listen_auto = true;                 // --listen was auto (protected mode chose the address)
  std::uint16_t port = 8080;               // 0 = ephemeral
  // --max-connections-per-address: open connections one client address (--ipv6-prefix-length) may hold on the main
  // listener; more are closed at accept. 0 = no limit. 1024 covers a proxy in front (HAProxy's maxconn 256
  // per server) and wrk's 256 connections from one host with room to spare.
  std::uint32_t max_connections_per_address = 1024;
  // --ipv6-prefix-length: IPv6 clients sharing their first N bits count as one client for every per-address limit
  // (server/http/address_key.h); link-local and unique local addresses always count whole. 128: each address its
  // own, what a shop LAN needs (every till's SLAAC address shares one /64, every link-local one fe80::/64); 64 or
  // 56 for clients across the internet, where one end site may rotate through its whole prefix.
  unsigned ipv6_prefix_length = 128;
  // --admin-max-connections-per-address: open connections one client address may hold on the admin listener; more
  // are closed at accept. 0 = no limit. 16: Prometheus (1), probes (1-2 at a time) and an operator's browser (6
  // per host) from one host fit; one host holds at most 16 of the listener's 256 slots.
  std::uint32_t admin_max_connections_per_address = 16;
  // --admin-idle-timeout: how long an admin listener's connection may wait for its first or next request. 5 s: the
  // dashboard polls every second (it keeps its connection); Prometheus scrapes every 15 s by default (it reconnects
  // for each: one handshake on a LAN); a host holding idle connections gives them up 12x sooner than at the main
  // port's 60 s.
  std::chrono::milliseconds admin_idle_timeout{5000};
  // --max-body-bytes-in-flight: request body bytes held at once by all connections (server/http/body_budget.h);
  // a body that does not fit gets 503 unread, batches hold at most half. 0 = no limit. 64 MiB: 4 096 bodies at
  // /observe's 16 KiB limit (a real one is ~60 bytes: a million), or 32 full batches beside them.
  std::uint64_t max_body_bytes_in_flight = 64ull * 1024 * 1024;
  std::string port_file;                   // written once listening: "<port>\n"
  unsigned threads = 0;                    // resolved: never 0 after ParseConfig
  std::string database_url;
  // Partitions (issue 23, storage/partitions/partitioned_store.h): the libpq URL of the PL/Proxy proxy database whose
  // cluster `partition_cluster` maps the digests' logical partitions to databases; "" = off (one PostgreSQL at
  // database_url). With it, database_url is optional (the proxy's URL stands in: the journal's identity).
  std::string partitions_url;
  std::string partition_cluster = "scangate";
  std::chrono::milliseconds partition_map_poll{5000};  // how often the map is read again (a moved partition)
  bool partitioned() const { return !partitions_url.empty(); }
  std::uint64_t capacity = 10'000'000;
  double fp_target = 0.01;
  std::chrono::seconds window = std::chrono::hours(24);
  // The de-duplication horizon (--retention): a key observed again within it of its first observation is
  // `duplicate`; a record older than it counts as absent (`new` again) and is deleted by the expiry. 0 = off
  // (records kept for ever). Default: --window; --window defaults to it; window < retention is refused.
  std::chrono::seconds retention = std::chrono::hours(24);
  // --keys=gs1: a pack with an expiry (AI 17) is kept until the end of its expiry month plus this; 365 days by
  // default (the EU FMD keeps records at least a year past expiry), at most 2192 days (docs/api.md "GS1 packs").
  KeysMode keys = KeysMode::kRaw;
  std::chrono::seconds expiry_grace = std::chrono::hours(24 * 365);
  std::uint32_t shards = 64;
  AckMode ack = AckMode::kCommit;
  // The PostgreSQL writers' defaults are the store's own (storage/store_options.h).
  unsigned writers = storage::kDefaultWriters;
  std::size_t batch_limit = storage::kDefaultBatchLimit;
  // The exact store's epochs (storage/epochs/switcher.h): the open epoch closes and the next opens when it holds
  // --epoch-keys live rows or is --epoch-max-age old. 0 / 0 (the default): no switch (one table).
  std::uint64_t epoch_keys = 0;
  std::chrono::seconds epoch_max_age{0};
  // --flush-interval; auto (the default): 20 ms with the journal (server/config/config.cc), else the store's 2 ms.
  std::chrono::microseconds flush_interval = storage::kDefaultFlushInterval;
  std::size_t queue_limit = storage::kDefaultQueueLimit;
  // A request waiting for PostgreSQL longer than this gets 503 (unavailable if its key was still queued
  // and is now withdrawn, outcome-unknown if its transaction was in flight). Also sets the writers'
  // statement_timeout (this + 2 s) and tcp_user_timeout (server/main.cc).
  std::chrono::milliseconds request_timeout{5000};
  // Backpressure: a request that finds the write queue full (--queue-limit) waits up to this long for room
  // (capped by request_timeout: never past its request deadline), then gets 503 unavailable. 0 = 503 at once. A down
  // PostgreSQL answers 503 at once either way.
  std::chrono::milliseconds queue_wait{1000};
  std::string digest_secret_file;
  std::string digest_secret;               // file bytes, one trailing newline stripped; never printed
  // --digest-secret-previous-file (rotation, storage/scheme/scheme_record.h): the secret the database used before
  // --digest-secret-file; "none" = it used plain SHA-256. digest_secret_previous: its bytes ("" for none); never
  // printed.
  std::string digest_secret_previous_file;
  std::string digest_secret_previous;
  bool digest_rotating() const { return !digest_secret_previous_file.empty(); }
  bool filter = true;
  // --recent-keys: bound of the recent set (core/recent_set.h), digests this instance knows are recorded (with
  // the request that recorded each), answered without PostgreSQL; ~48 bytes per key (docs/design.md "The recent set");
  // 0 = off.
  std::uint64_t recent_keys = 1'048'576;
  bool access_log = false;
  // TLS (--tls-cert/--tls-key, both or neither): HTTPS on the main listener, TLS 1.2+ only.
  std::string tls_cert;                    // PEM certificate chain file
  std::string tls_key;                     // PEM private key file; never printed
  // --admin-tls: the admin listener (--admin-listen) serves HTTPS with the same certificate (needs --tls-cert
  // and --admin-listen); off = plain HTTP there (a private address, probes that speak no TLS).
  bool admin_tls = false;
  // mTLS (--tls-client-ca, needs --tls-cert): the main listener requires a client certificate issued by one of
  // these CAs (the handshake fails without one); its subject CN is the caller's terminal, like a token's
  // (server/http/client_certificate.h). --tls-crl: PEM CRLs of those CAs, checked for the client's certificate.
  // --tls-client-routes: the routes a certificate grants without --tokens-file (with it, the token's routes
  // apply and its terminal must be the certificate's). All reloaded with the certificate on SIGHUP.
  std::string tls_client_ca;
  std::string tls_crl;
  std::uint8_t tls_client_routes = kDefaultRoutes;
  // Access control (--tokens-file): accepted bearer tokens (SHA-256 hashes) and their terminals; empty = open.
  // Reloaded on SIGHUP (server/http/token_store.h).
  std::string tokens_file;
  std::vector<Terminal> terminals;         // hashes never printed
  // Per-terminal rate limit (--rate-limit, --rate-burst; server/http/rate_limit.h): requests per second per
  // terminal (tokens on) or per client address (tokens off); 0 = off. Burst: the bucket's size (default: the
  // rate, at least 1).
  std::uint32_t rate_limit = 0;
  std::uint32_t rate_burst = 0;            // resolved: >= 1 when rate_limit > 0
  // --admin-listen ADDR:PORT: /healthz, /readyz, /metrics, /stats only there (plain HTTP); "" = main port.
  std::string admin_listen;
  std::string admin_address;               // parsed from admin_listen
  std::uint16_t admin_port = 0;            // 0 = ephemeral (the "listening" log line names it)
  // --cors-origins: web origins ("scheme://host[:port]", lower case, no default port elision) allowed to
  // call /observe, /observe/batch and /lookup from a browser. Empty = none (requests with any other Origin
  // than scangate's own get 403).
  std::vector<std::string> cors_origins;
  // --allowed-hosts: Host header values (lower case, "host" or "host:port") this service answers to. Empty =
  // any. Set, a request whose Host names another gets 421 host-not-allowed (DNS rebinding), and an Origin of
  // scangate's own is trusted for any listed host; empty, only an address literal or localhost is.
  std::vector<std::string> allowed_hosts;
  // --proxy-protocol-from: addresses or CIDR networks of load balancers that open every connection with a PROXY
  // protocol v2 header (HAProxy send-proxy-v2; server/http/proxy_protocol.h). Empty = none.
  std::vector<std::string> proxy_protocol_from;
  // Durable fast path (ack=filter): filter negatives are journalled + fdatasync'ed before "new" (docs/design.md).
  bool journal = true;                     // --journal on|off; off = in-memory write-behind (loses on a crash)
  // --journal-dir. Empty default: $STATE_DIRECTORY/journal when systemd sets STATE_DIRECTORY (the unit's
  // StateDirectory=), else the flag is required with ack=filter and --journal=on — never the working
  // directory, which two instances (or two databases) run from one folder would share.
  std::string journal_dir;
  std::uint64_t journal_max_bytes = 64ull << 20;  // beyond it requests wait (bounded), then 503
  // The follower (issue 32, storage/follow/follower.h; ack=filter): every digest committed to PostgreSQL — by
  // any instance — is set in this filter within about a probe interval, and a definitely-new is trusted only
  // while that holds to within follow_max_lag (else PostgreSQL decides the key). --follow on|off|logical|poll
  // (on = follow_method's default).
  bool follow = true;
  storage::FollowMethod follow_method = storage::FollowMethod::kPoll;
  // --ack=commit with --follow=poll: the follower also feeds the recent set with every raw key any
  // instance commits, so a repeat recorded elsewhere is answered without a round trip (bench/RESULTS.md "Issue 32:
  // would a follower pay --ack=commit?"). Off unless asked for: it pays behind round robin, not key affinity.
  bool follow_commit = false;
  std::chrono::milliseconds follow_max_lag{1000};  // --follow-max-lag
  // --max-commit-lag (issue 32; following with the journal): while a key this instance answered `new` has waited
  // longer than this for its PostgreSQL commit (so other instances cannot know it yet), new keys are decided in
  // PostgreSQL instead of by the filter, until the journal's oldest uncommitted record is younger. 0 = unbounded.
  std::chrono::milliseconds max_commit_lag{1000};
  // Issue 42, the peers' commit watermark (storage/peers/peer_view.h): a key whose request the peers do not cover
  // waits this long for coverage (capped by request_timeout), then gets 503 + Retry-After. 0 = 503 at once.
  std::chrono::milliseconds peer_wait{1000};
  // --retire-instance=<uuid>: retire that journal owner's rows in every database of the configuration and exit
  // (server/retire_instance.cc); "" = serve.
  std::string retire_instance;
  // W of the peers' argument: a key another instance answered `new` more than this before a request arrived is
  // never `new` for it. --max-commit-lag + --follow-max-lag.
  std::chrono::milliseconds peer_window() const { return max_commit_lag + follow_max_lag; }
  // This instance publishes its watermark: --ack=filter with the journal (a journal owner).
  bool publishes_watermark() const { return ack == AckMode::kFilter && journal; }
  bool following() const { return follow && filter && (ack == AckMode::kFilter || follow_commit); }
  bool tls() const { return !tls_cert.empty(); }
  bool mtls() const { return !tls_client_ca.empty(); }
  bool admin_split() const { return !admin_listen.empty(); }
};

// Invalid configuration: what() names the option and the problem. main() prints it and exits 2.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Outcome of parsing: either run with `config`, or print `help` and exit 0.
struct ParseOutcome {
  std::optional<Config> config;
  std::string help;  // non-empty when --help (the grouped option list) or --version (one line) was given
};

// Parses argv (argv[0] is the program name) and the environment. Throws ConfigError.
ParseOutcome ParseConfig(int argc, const char* const argv[]);

// Durations: a non-negative integer followed by one unit of `units` (e.g. {"s","m","h","d"}):
// "90s", "15m", "24h", "7d", "500us", "2ms". Throws ConfigError naming `option`. server/config/config_values.cc.
std::chrono::nanoseconds ParseDuration(std::string_view text, const std::vector<std::string_view>& units,
                                       std::string_view option);

// The libpq URL (or keyword/value string) as parsed by libpq, rendered "keyword=value ..." with password
// and sslpassword replaced by "***"; "<unparsable>" (nothing of the input) when libpq cannot parse it.
std::string RedactDatabaseUrl(std::string_view url);

// Sets c.window and c.retention from --window (`window_given`: set by the user, not defaulted) and
// --retention ("window" = the default: follow --window; "off"; or a duration, s m h d). --window follows
// --retention when only that is given; both given with window < retention throws ConfigError (the filter would
// forget keys PostgreSQL still counts as seen, and --ack=filter would answer them `new`).
// server/config/config_horizon.cc.
void ParseHorizon(std::string_view window, bool window_given, std::string_view retention, Config& c);

// Sets c.epoch_max_age from --epoch-max-age ("off", or a duration, s m h d, at least 1 m). Throws ConfigError.
// server/config/config_horizon.cc.
void ParseEpochMaxAge(std::string_view max_age, Config& c);

// Sets c.follow and c.follow_method (--follow: on | off | logical | poll; with --ack=commit, poll = follow_commit
// and logical is refused: c.ack must be parsed first), c.follow_max_lag (--follow-max-lag,
// 10ms..60s) and c.max_commit_lag (--max-commit-lag, 0 or 10ms..60s). Throws ConfigError naming the option.
// server/config/config_follow.cc.
void ParseFollow(std::string_view follow, std::string_view max_lag, std::string_view max_commit_lag, Config& c);
// Sets c.peer_wait (--peer-wait, 0..10m) and c.retire_instance (--retire-instance, a UUID or ""). Throws ConfigError
// naming the option. server/config/config_peers.cc.
void ParsePeers(std::string_view peer_wait, std::string_view retire_instance, Config& c);

// Sets c.keys (--keys: raw | gs1) and c.expiry_grace (--expiry-grace: a duration, s m h d, 0..2192d). Throws
// ConfigError. server/config/config_horizon.cc.
void ParseKeys(std::string_view keys, std::string_view grace, Config& c);
// The TLS options as given (--tls-cert, --tls-key, --tls-client-ca, --tls-crl, --tls-client-routes).
struct TlsFlags {
  std::string cert, key, client_ca, crl, client_routes;
};
// Sets c.tls_cert, tls_key, tls_client_ca, tls_crl, tls_client_routes: both or neither of cert and
// key, every file readable now (its PEM is checked by HttpServer), --admin-tls/--tls-client-ca need --tls-cert,
// --tls-crl needs --tls-client-ca, --tls-client-routes needs --tls-client-ca and no --tokens-file. Call after
// ParseAccess, ParseAdminListen and c.admin_tls. Throws ConfigError naming the option. server/config/config_tls.cc.
void ParseTls(const TlsFlags& f, Config& c);
// Sets c.tokens_file and c.terminals (reading --tokens-file), c.rate_limit and c.rate_burst (--rate-burst "rate"
// = the rate). Throws ConfigError naming the option. server/config/config_access.cc.
void ParseAccess(const std::string& tokens_file, std::string_view rate_limit, std::string_view rate_burst, Config& c);
// The per-address limits as given (--max-connections-per-address, --ipv6-prefix-length,
// --admin-max-connections-per-address, --admin-idle-timeout, --max-body-bytes-in-flight).
struct ConnectionFlags {
  std::string max_per_address, ipv6_prefix_length, admin_max_per_address, admin_idle_timeout, max_body_bytes;
};
// Sets the Config fields of `f`, checked. Throws ConfigError naming the option. server/config/config_connections.cc.
void ParseConnectionLimits(const ConnectionFlags& f, Config& c);
// An integer option in min..max. Throws ConfigError naming --`option`. server/config/config_values.cc.
std::uint64_t ParseInteger(std::string_view text, std::string_view option, std::uint64_t min, std::uint64_t max);
// --cors-origins and --allowed-hosts: their lists, lower-cased and checked (server/config/config_access.cc).
std::vector<std::string> ParseCorsOrigins(const std::string& list);
std::vector<std::string> ParseAllowedHosts(const std::string& list);
// --proxy-protocol-from: its addresses and CIDR networks, checked (server/config/config_access.cc).
std::vector<std::string> ParseProxyProtocolFrom(const std::string& list);
// Protected mode: resolves c.listen ("auto") and c.protected_mode from the tokens file, the digest secret and
// --insecure, or throws ConfigError for a non-loopback address without them (server/config/config_access.cc).
void ResolveListen(Config& c);

// Effective configuration for the start-up log line (password redacted, secret only as "set"/"unset").
boost::json::object Describe(const Config& c);

}  // namespace scangate::server
