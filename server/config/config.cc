#include "server/config/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>

#include "core/filter.h"  // kMaxShards: one limit for the filter and the --shards check
#include "server/config/config_file.h"
#include "server/version.h"
#include "storage/pg/conninfo.h"

namespace scangate::server {
namespace po = boost::program_options;

namespace {

constexpr std::string_view kEnvPrefix = "SCANGATE_";
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kMaxWriters = 64;
constexpr std::size_t kMaxBatchLimit = 100'000;
constexpr auto kMaxFlushInterval = std::chrono::seconds(10);
// --flush-interval=auto. Without the journal the lag is what a crash loses: keep it short. With the journal
// the rows are durable before their answer, so the lag only sizes PostgreSQL's transactions. Measured (bench/
// RESULTS-history.md "Write-behind lag"): at 64 connections 2 ms makes ~75-175-row transactions and 20 ms ~700-row
// ones: PostgreSQL CPU per request -13-30 %, 2xx/s +5-9 %, p99 +10-25 % (3.5 -> 4.3 ms); at 256 connections,
// where the writers make several-hundred-row transactions anyway, no measurable change. 25-50 ms: up to +45 % p99.
constexpr std::chrono::microseconds kMemoryFlushInterval = storage::kDefaultFlushInterval;
constexpr std::chrono::microseconds kJournalFlushInterval{20000};
// --request-timeout bounds: below 100 ms a healthy group commit (one fsync, ~7-10 ms here, more under
// load) would start to time out; above 10 min a client is better served by its own timeout.
constexpr auto kMinRequestTimeout = std::chrono::milliseconds(100);
constexpr auto kMaxRequestTimeout = std::chrono::minutes(10);
// --recent-keys above this (~48 GB at ~48 bytes per key) is a typo, not a plan.
constexpr std::uint64_t kMaxRecentKeys = 1'000'000'000;

template <typename T>
T ParseUnsigned(const std::string& text, std::string_view option, T min, T max) {
  return static_cast<T>(ParseInteger(text, option, min, max));
}

double ParseFraction(const std::string& text, std::string_view option) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || !(v > 0.0) || !(v < 0.5)) {
    throw ConfigError("--" + std::string(option) + ": expected a number in (0, 0.5), got '" + text + "'");
  }
  return v;
}

bool ParseOnOff(const std::string& text, std::string_view option) {
  if (text == "on") return true;
  if (text == "off") return false;
  throw ConfigError("--" + std::string(option) + ": expected on or off, got '" + text + "'");
}

std::string ReadSecretFile(const std::string& path, std::string_view option = "digest-secret-file") {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--" + std::string(option) + ": cannot read '" + path + "'");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.empty()) throw ConfigError("--" + std::string(option) + ": '" + path + "' is empty");
  return s;
}

// "ADDR:PORT", "[v6]:PORT".
void ParseAdminListen(Config& c) {
  const std::string& s = c.admin_listen;
  const std::size_t colon = s.rfind(':');
  auto fail = [&s]() {
    return ConfigError("--admin-listen: expected ADDR:PORT (e.g. 127.0.0.1:9090 or [::1]:9090), got '" + s + "'");
  };
  if (colon == std::string::npos || colon == 0) throw fail();
  std::string addr = s.substr(0, colon);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  boost::system::error_code ec;
  boost::asio::ip::make_address(addr, ec);
  if (ec) throw fail();
  c.admin_address = addr;
  c.admin_port = ParseUnsigned<std::uint16_t>(s.substr(colon + 1), "admin-listen", 0, 65535);
}

// A default duration in --help's syntax: whole seconds as "Ns", else "Nms".
std::string FormatMillis(std::chrono::milliseconds v) {
  return v.count() % 1000 == 0 && v.count() != 0 ? std::to_string(v.count() / 1000) + "s"
                                                  : std::to_string(v.count()) + "ms";
}

// A default fraction in --help's syntax: shortest form ("0.01", not "0.010000").
std::string FormatFraction(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The options, in the groups `scangate --help` prints, in that order. A new flag goes into the group an
// operator would look in first.
po::options_description Options() {
  // Every default is Config's own (server/config/config.h; the PostgreSQL ones are storage/store_options.h's), shown
  // here in the syntax the option takes, so --help and a default-constructed Config cannot disagree.
  const Config d;
  auto s = [](std::string def) { return po::value<std::string>()->default_value(std::move(def)); };
  auto n = [&s](auto v) { return s(std::to_string(v)); };
  auto on_off = [&s](bool v) { return s(v ? "on" : "off"); };
  po::options_description listening("Listening");
  listening.add_options()
      ("listen", s("auto"), "listen address; auto = 0.0.0.0 with --tokens-file and --digest-secret-file (or "
                            "--insecure), else 127.0.0.1 (protected mode: docs/security.md 'Threat model')")
      ("port", n(d.port), "TCP port; 0 = ephemeral")
      ("threads", n(d.threads), "I/O threads (one io_context each); 0 = hardware cores")
      ("port-file", s(d.port_file), "write the listening port (and a newline) to this file once listening")
      ("max-connections-per-address", n(d.max_connections_per_address),
       "open connections one client address may hold on the main port; more are closed at accept; 0 = no limit")
      ("ipv6-prefix-length", n(d.ipv6_prefix_length),
       "IPv6 clients sharing their first N bits (32..128) are one client for the per-address limits (connections, "
       "rate limit, failed authentication); 128 = each address (a shop LAN); link-local and unique local "
       "addresses always count whole")
      ("max-body-bytes-in-flight", n(d.max_body_bytes_in_flight),
       "request body bytes held at once by all connections; a body that does not fit gets 503 unread (batches "
       "hold at most half); 0 = no limit")
      ("admin-listen", s(d.admin_listen), "ADDR:PORT of a separate listener (plain HTTP unless --admin-tls) for "
                                          "/healthz, /readyz, /metrics, /stats, /dashboard (then 404 on the main "
                                          "port; /observe* not served there)")
      ("admin-max-connections-per-address", n(d.admin_max_connections_per_address),
       "open connections one client address may hold on the admin listener (256 in all); 0 = no limit")
      ("admin-idle-timeout", s(FormatMillis(d.admin_idle_timeout)),
       "an admin listener connection waiting longer for its first or next request is closed; units ms s m, "
       "100ms..10m");
  po::options_description postgres("PostgreSQL");
  postgres.add_options()
      ("database-url", s(d.database_url), "libpq URL of PostgreSQL (required, unless --partitions is given)")
      ("partitions", s(d.partitions_url), "libpq URL of the PL/Proxy proxy database whose cluster maps the keys' "
                                          "partitions to PostgreSQL databases (docs/ha.md \"Past one "
                                          "PostgreSQL\"); empty = one PostgreSQL at --database-url")
      ("partition-cluster", s(d.partition_cluster), "--partitions: the PL/Proxy cluster (foreign server) name")
      ("partition-map-poll", s(FormatMillis(d.partition_map_poll)), "--partitions: how often the partition map "
                                                                    "is read again; units ms s m, 100ms..10m")
      ("epoch-keys", n(d.epoch_keys), "close the exact store's open epoch (a table of its own) and open the next when "
                                      "it holds this many keys, so inserts touch only recent keys; size it so the "
                                      "open epoch's primary key stays well inside PostgreSQL's cache "
                                      "(docs/operations.md \"Epochs\"); 0 = off")
      ("epoch-max-age", s("off"), "close the open epoch when it is this old, however few keys it holds; units s m h "
                                  "d (at least 1m), or off")
      ("writers", n(d.writers), "PostgreSQL writer threads (one connection each); with --partitions, per "
                                "partition, and 1 unless given")
      ("batch-limit", n(d.batch_limit), "max keys per PostgreSQL transaction")
      ("queue-limit", n(d.queue_limit), "max queued PostgreSQL items; beyond it requests wait (--queue-wait), "
                                        "then 503")
      ("queue-wait", s(FormatMillis(d.queue_wait)), "how long a request waits for room in a full write queue "
                                                    "before 503 + Retry-After; 0 = 503 at once; units ms s, 0..10m "
                                                    "(capped by --request-timeout)")
      ("request-timeout", s(FormatMillis(d.request_timeout)), "a request waiting for PostgreSQL longer than this "
                                                              "gets 503 + Retry-After (unavailable, or "
                                                              "outcome-unknown if its transaction was in flight); "
                                                              "units ms s m, 100ms..10m");
  po::options_description filter("Filter");
  filter.add_options()
      ("capacity", n(d.capacity), "expected distinct keys per window (whole filter)")
      ("fp-target", s(FormatFraction(d.fp_target)), "false-positive target of a filter query, in (0, 0.5)")
      ("window", s(std::to_string(std::chrono::duration_cast<std::chrono::hours>(d.window).count()) + "h"),
       "filter generation lifetime and warm-start window; units s m h d (e.g. 24h, 7d). Default: --retention "
       "when that is set, else 24h; must be at least --retention")
      ("retention", s("window"), "de-duplication horizon: a key seen again within it of its first sighting is "
                                 "'duplicate', an older record counts as absent and is deleted from PostgreSQL; "
                                 "units s m h d, or off (keep every record for ever). Default: the --window")
      ("keys", s("raw"), "raw (the key string as sent is the key) or gs1 (a GS1 element string or Digital Link: "
                         "the pack's GTIN + serial is the key, lot and expiry are checked against its record)")
      ("expiry-grace", s("365d"), "--keys=gs1: a pack with an expiry date (AI 17) is kept until the end of its "
                                  "expiry month plus this (at least --retention); units s m h d, at most 2192d")
      ("shards", n(d.shards), "filter shards, a power of two")
      ("filter", on_off(d.filter), "on|off; off = every key takes the exact path (benchmarks)")
      ("recent-keys", n(d.recent_keys), "keys this instance knows are recorded, kept in memory (~48 bytes each) "
                                        "to answer repeats without PostgreSQL; 0 = off");
  po::options_description ack("Acknowledgement");
  ack.add_options()
      ("ack", s(d.ack == AckMode::kFilter ? "filter" : "commit"),
       "commit: 'new' only after PostgreSQL commit; filter: 'new' from the filter once journalled, written behind "
       "to PostgreSQL")
      ("flush-interval", s("auto"), "max write-behind lag (ack=filter); units us ms s; auto = 20ms with the "
                                    "journal (its rows are durable already), 2ms with --journal=off (the loss window)")
      ("journal", on_off(d.journal), "on|off (ack=filter): on = a filter negative is answered 'new' only once "
                                     "fsynced in a local journal; off = in-memory write-behind, which a crash can "
                                     "lose")
      ("journal-dir", s(d.journal_dir), "journal directory (ack=filter, --journal=on); one per instance and "
                                        "database. Default: $STATE_DIRECTORY/journal when set (systemd "
                                        "StateDirectory=), else required")
      ("journal-max-bytes", n(d.journal_max_bytes), "journal bytes not yet committed in PostgreSQL; beyond it "
                                                    "requests wait (bounded), then 503")
      ("follow", on_off(d.follow), "on|off|logical|poll (ack=filter): follow every digest committed to PostgreSQL "
                                   "by any instance, so a key new at one instance is a duplicate at the others; "
                                   "logical = logical decoding (wal_level=logical, a replication role), poll = a "
                                   "query per interval (nothing to configure), on = poll; off = this filter "
                                   "knows only this instance's keys and its warm start; with --ack=commit "
                                   "only poll follows: it feeds the recent set (round robin)")
      ("follow-max-lag", s(FormatMillis(d.follow_max_lag)), "ack=filter with --follow: past this staleness the "
                                                              "filter's 'definitely new' is not trusted and "
                                                              "PostgreSQL decides; ms s, 10ms..60s")
      ("max-commit-lag", s(FormatMillis(d.max_commit_lag)), "ack=filter with --follow and the journal: while a key "
                                                            "answered 'new' has waited longer for its commit, new "
                                                            "keys are decided in PostgreSQL; 0 = unbounded")
      ("peer-wait", s(FormatMillis(d.peer_wait)), "a key another instance may hold answered 'new' and uncommitted "
                                                  "(its commit watermark lags) waits this long for it, then gets "
                                                  "503 + Retry-After; 0 = 503 at once; ms s, 0..10m (capped by "
                                                  "--request-timeout)")
      ("retire-instance", s(""), "UUID: retire that --ack=filter instance (gone for good with its journal) in every "
                                 "database of this configuration, so the others stop waiting for its uncommitted "
                                 "keys (an explicit loss window), and exit");
  po::options_description security("Security");
  security.add_options()
      ("tls-cert", s(d.tls_cert),
       "PEM certificate (chain) file: serve HTTPS (TLS 1.2+) on the main port; needs --tls-key")
      ("tls-key", s(d.tls_key), "PEM private key file of --tls-cert")
      ("admin-tls", s("off"), "on|off; on = the admin listener (--admin-listen) serves HTTPS too, with the same "
                              "certificate (needs --tls-cert)")
      ("tls-client-ca", s(""), "PEM file of the CAs that issue terminals' certificates: the main port requires a "
                               "client certificate from them (mTLS); its subject CN is the terminal (needs "
                               "--tls-cert; docs/security.md 'Client certificates')")
      ("tls-crl", s(""), "PEM file of CRLs of the --tls-client-ca CAs: a revoked client certificate is refused; "
                         "reloaded with the certificate on SIGHUP")
      ("tls-client-routes", s("observe"), "routes a client certificate grants without --tokens-file: a "
                                          "comma-separated subset of observe,batch,lookup,audit")
      ("tokens-file", s(d.tokens_file),
       "accepted bearer tokens, one per line: '<sha256-hex> [<terminal-id> [<routes>]]' (# comments, blank "
       "lines allowed; docs/security.md 'Terminals'); when set, /observe* and /lookup need "
       "'Authorization: Bearer <token>' and record the token's terminal as the source. Reloaded on SIGHUP")
      ("rate-limit", s("0"), "requests per second per terminal (tokens on) or per client address; over it: 429 "
                             "+ Retry-After; 0 = off")
      ("rate-burst", s("rate"), "the rate limit's bucket size (requests allowed at once); default: the rate")
      ("cors-origins", s(""), "comma-separated web origins (e.g. https://pos.example.com,http://127.0.0.1:3000) "
                              "allowed to call /observe, /observe/batch, /lookup from a browser; requests with "
                              "any other Origin header (except scangate's own) get 403")
      ("allowed-hosts", s(""), "comma-separated Host header values this service answers to (e.g. "
                               "pos-gw.shop.lan,10.0.0.5:8080); a request naming another Host gets 421 (DNS "
                               "rebinding); set, a page of scangate's own origin may call it; default: any Host")
      ("proxy-protocol-from", s(""), "comma-separated addresses or CIDR networks (e.g. 127.0.0.1,10.0.0.0/24) of "
                                     "load balancers that open each connection with a PROXY protocol v2 header "
                                     "(HAProxy send-proxy-v2): limits then see the client's address; a connection "
                                     "from them without one is closed")
      ("insecure", po::value<std::string>()->default_value("off")->implicit_value("on"),
       "on|off; on = serve a non-loopback --listen without --tokens-file and --digest-secret-file (anyone who "
       "reaches the port may record and look up keys; unkeyed digests of short keys can be brute-forced)")
      ("digest-secret-file", s(d.digest_secret_file),
       "HMAC-SHA256 digests keyed with this file's bytes (one trailing newline stripped); default plain SHA-256")
      ("digest-secret-previous-file", s(d.digest_secret_previous_file),
       "rotation: the digest secret the database used before --digest-secret-file (the same form; 'none' = plain "
       "SHA-256): keys recorded under it stay duplicates until /stats digest_scheme.previous_needed_until");
  po::options_description operations("Operations");
  operations.add_options()
      ("access-log", on_off(d.access_log), "on|off; one JSON line per request: method, path, status, latency")
      ("config", s(d.config_file), "config file of 'name = value' lines (these long names, '#' comments); the "
                                   "command line and SCANGATE_* environment override it")
      ("help", "print this help and exit")
      ("version", "print the version and the git commit it was built from, and exit");
  po::options_description all("Options (each also read from env SCANGATE_<NAME>, e.g. SCANGATE_DATABASE_URL,"
                              " and from --config; the command line wins, then the environment)");
  all.add(listening).add(postgres).add(filter).add(ack).add(security).add(operations);
  return all;
}

// --journal-dir's default: under systemd's StateDirectory= (STATE_DIRECTORY, colon-separated when the unit
// names several: the first), else none — the journal is this instance's and this database's, so the working
// directory (shared by every run started there) is no default.
std::string DefaultJournalDir() {
  const char* state = std::getenv("STATE_DIRECTORY");
  std::string dir = state != nullptr ? std::string(state) : std::string();
  dir = dir.substr(0, dir.find(':'));
  if (dir.empty()) {
    throw ConfigError("--journal-dir (or SCANGATE_JOURNAL_DIR) is required with --ack=filter and --journal=on: "
                      "the journal belongs to one instance and one database, e.g. --journal-dir=/var/lib/scangate/"
                      "journal (under systemd, StateDirectory= makes $STATE_DIRECTORY/journal the default)");
  }
  return dir + "/journal";
}

}  // namespace

ParseOutcome ParseConfig(int argc, const char* const argv[]) {
  const po::options_description desc = Options();
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    // Command line first: po::store never overwrites a value already stored, so the command line wins.
    po::store(po::parse_environment(desc,
                                    [&desc](const std::string& var) -> std::string {
                                      if (var.rfind(kEnvPrefix, 0) != 0) return "";
                                      std::string name = var.substr(kEnvPrefix.size());
                                      for (char& c : name) {
                                        c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                                      }
                                      if (name == "help" || name == "version" ||
                                          desc.find_nothrow(name, false) == nullptr) {
                                        return "";
                                      }
                                      return name;
                                    }),
              vm);
    // The file last, under both; not read for --help or --version.
    if (vm.count("help") == 0 && vm.count("version") == 0 && !vm["config"].as<std::string>().empty()) {
      StoreConfigFile(vm["config"].as<std::string>(), desc, vm);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  ParseOutcome out;
  if (vm.count("help") != 0) {
    std::ostringstream os;
    os << VersionLine() << ": has this scan key been seen before? (Bloom fast path in front of PostgreSQL)\n"
       << "Usage: scangate --database-url URL [options]\n\n" << desc;
    out.help = os.str();
    return out;
  }
  if (vm.count("version") != 0) {
    out.help = VersionLine() + "\n";
    return out;
  }
  auto str = [&vm](const char* name) { return vm[name].as<std::string>(); };

  Config c;
  c.config_file = str("config");
  c.listen = str("listen");
  if (c.listen != "auto") {
    boost::system::error_code ec;
    boost::asio::ip::make_address(c.listen, ec);
    if (ec) throw ConfigError("--listen: expected an IPv4 or IPv6 address or auto, got '" + c.listen + "'");
  }
  c.port = ParseUnsigned<std::uint16_t>(str("port"), "port", 0, 65535);
  c.port_file = str("port-file");
  ParseConnectionLimits({str("max-connections-per-address"), str("ipv6-prefix-length"),
                         str("admin-max-connections-per-address"), str("admin-idle-timeout"),
                         str("max-body-bytes-in-flight")},
                        c);  // server/config/config_connections.cc
  c.threads = ParseUnsigned<unsigned>(str("threads"), "threads", 0, kMaxThreads);
  if (c.threads == 0) c.threads = std::max(1u, std::thread::hardware_concurrency());
  c.database_url = str("database-url");
  c.partitions_url = str("partitions");
  c.partition_cluster = str("partition-cluster");
  if (c.partition_cluster.empty()) throw ConfigError("--partition-cluster: must not be empty");
  {
    const auto poll = ParseDuration(str("partition-map-poll"), {"ms", "s", "m"}, "partition-map-poll");
    if (poll < std::chrono::milliseconds(100) || poll > std::chrono::minutes(10)) {
      throw ConfigError("--partition-map-poll: must be in 100ms..10m, got '" + str("partition-map-poll") + "'");
    }
    c.partition_map_poll = std::chrono::duration_cast<std::chrono::milliseconds>(poll);
  }
  if (c.database_url.empty()) c.database_url = c.partitions_url;  // the journal's identity, and nothing else
  if (c.database_url.empty()) {
    throw ConfigError("--database-url (or SCANGATE_DATABASE_URL) is required, e.g. "
                      "postgresql://postgres@127.0.0.1:5544/scangate (or --partitions with a PL/Proxy database)");
  }

  c.capacity = ParseUnsigned<std::uint64_t>(str("capacity"), "capacity", 1, std::uint64_t{1} << 40);
  c.fp_target = ParseFraction(str("fp-target"), "fp-target");
  ParseHorizon(str("window"), !vm["window"].defaulted(), str("retention"), c);
  c.epoch_keys = ParseUnsigned<std::uint64_t>(str("epoch-keys"), "epoch-keys", 0, std::uint64_t{1} << 40);
  ParseEpochMaxAge(str("epoch-max-age"), c);
  ParseKeys(str("keys"), str("expiry-grace"), c);
  c.shards = ParseUnsigned<std::uint32_t>(str("shards"), "shards", 1, scangate::kMaxShards);
  if ((c.shards & (c.shards - 1)) != 0) {
    throw ConfigError("--shards: must be a power of two, got " + std::to_string(c.shards));
  }
  const std::string ack = str("ack");
  if (ack == "commit") c.ack = AckMode::kCommit;
  else if (ack == "filter") c.ack = AckMode::kFilter;
  else throw ConfigError("--ack: expected commit or filter, got '" + ack + "'");
  c.writers = ParseUnsigned<unsigned>(str("writers"), "writers", 1, kMaxWriters);
  // --partitions: --writers counts per partition, and one by default there. The in-flight keys are split over
  // partitions x writers, and small transactions cost PostgreSQL the most: at 64 connections one writer per
  // partition doubled the keys per transaction and cut PostgreSQL's CPU per request by a third (109.5 -> 74.1 µs,
  // bench/RESULTS.md "Issue 23").
  if (c.partitioned() && vm["writers"].defaulted()) c.writers = kPartitionWriters;
  c.batch_limit = ParseUnsigned<std::size_t>(str("batch-limit"), "batch-limit", 1, kMaxBatchLimit);
  c.queue_limit = ParseUnsigned<std::size_t>(str("queue-limit"), "queue-limit", 1, std::size_t{1} << 30);
  const auto request_timeout = ParseDuration(str("request-timeout"), {"ms", "s", "m"}, "request-timeout");
  if (request_timeout < kMinRequestTimeout || request_timeout > kMaxRequestTimeout) {
    throw ConfigError("--request-timeout: must be in 100ms..10m, got '" + str("request-timeout") + "'");
  }
  c.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(request_timeout);
  const auto queue_wait = ParseDuration(str("queue-wait"), {"ms", "s"}, "queue-wait");
  if (queue_wait > kMaxRequestTimeout) {  // above --request-timeout it is capped by it (server/verdict/service.h)
    throw ConfigError("--queue-wait: must be in 0..10m, got '" + str("queue-wait") + "'");
  }
  c.queue_wait = std::chrono::duration_cast<std::chrono::milliseconds>(queue_wait);
  c.digest_secret_file = str("digest-secret-file");
  if (!c.digest_secret_file.empty()) c.digest_secret = ReadSecretFile(c.digest_secret_file);
  c.digest_secret_previous_file = str("digest-secret-previous-file");
  if (!c.digest_secret_previous_file.empty() && c.digest_secret_previous_file != "none") {
    c.digest_secret_previous = ReadSecretFile(c.digest_secret_previous_file, "digest-secret-previous-file");
  }
  if (c.digest_rotating() && c.digest_secret_previous == c.digest_secret) {
    throw ConfigError("--digest-secret-previous-file: the same secret as --digest-secret-file (a rotation needs "
                      "the secret the database used before)");
  }
  c.filter = ParseOnOff(str("filter"), "filter");
  c.recent_keys = ParseUnsigned<std::uint64_t>(str("recent-keys"), "recent-keys", 0, kMaxRecentKeys);
  c.access_log = ParseOnOff(str("access-log"), "access-log");
  ParseAccess(str("tokens-file"), str("rate-limit"), str("rate-burst"), c);  // server/config/config_access.cc
  c.journal = ParseOnOff(str("journal"), "journal");
  if (str("flush-interval") == "auto") {
    c.flush_interval = c.ack == AckMode::kFilter && c.journal ? kJournalFlushInterval : kMemoryFlushInterval;
  } else {
    const auto flush = ParseDuration(str("flush-interval"), {"us", "ms", "s"}, "flush-interval");
    if (flush < std::chrono::microseconds(1) || flush > kMaxFlushInterval) {
      throw ConfigError("--flush-interval: must be in 1us..10s or auto, got '" + str("flush-interval") + "'");
    }
    c.flush_interval = std::chrono::duration_cast<std::chrono::microseconds>(flush);
  }
  c.journal_dir = str("journal-dir");
  if (c.journal_dir.empty() && c.ack == AckMode::kFilter && c.journal) c.journal_dir = DefaultJournalDir();
  c.journal_max_bytes =
      ParseUnsigned<std::uint64_t>(str("journal-max-bytes"), "journal-max-bytes", 1u << 16, std::uint64_t{1} << 40);
  ParseFollow(str("follow"), str("follow-max-lag"), str("max-commit-lag"), c);  // server/config/config_follow.cc
  ParsePeers(str("peer-wait"), str("retire-instance"), c);  // server/config/config_peers.cc
  c.admin_listen = str("admin-listen");
  if (c.admin_split()) ParseAdminListen(c);
  c.admin_tls = ParseOnOff(str("admin-tls"), "admin-tls");
  ParseTls({str("tls-cert"), str("tls-key"), str("tls-client-ca"), str("tls-crl"), str("tls-client-routes")},
           c);  // server/config/config_tls.cc
  c.cors_origins = ParseCorsOrigins(str("cors-origins"));
  c.allowed_hosts = ParseAllowedHosts(str("allowed-hosts"));
  c.proxy_protocol_from = ParseProxyProtocolFrom(str("proxy-protocol-from"));
  c.insecure = ParseOnOff(str("insecure"), "insecure");
  ResolveListen(c);
  // Checked last, so a placeholder URL does not hide the other options' errors.
  if (const std::string why = storage::ConninfoParseError(c.partitions_url); c.partitioned() && !why.empty()) {
    throw ConfigError("--partitions: not a valid libpq URI or keyword=value string: " + why);
  }
  if (const std::string why = storage::ConninfoParseError(c.database_url); !why.empty()) {
    throw ConfigError("--database-url: not a valid libpq URI or keyword=value string: " + why);
  }
  out.config = std::move(c);
  return out;
}

}  // namespace scangate::server
