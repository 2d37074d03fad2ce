#include "server/app.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <utility>

#include <pqxx/except>

#include "core/thread_name.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/log.h"
#include "server/metrics/filter_rotation_log.h"
#include "server/metrics/filter_telemetry.h"
#include "server/metrics/metrics.h"
#include "server/storage_readers.h"
#include "server/verdict/service.h"
#include "storage/journal/journal_drain.h"
#include "storage/pg/conninfo.h"
#include "storage/start/startup.h"

namespace scangate::server {
namespace {
namespace net = boost::asio;
namespace json = boost::json;

constexpr auto kDrainDeadline = std::chrono::seconds(10);     // in-flight requests at shutdown
constexpr auto kWarmRetryDelay = std::chrono::seconds(1);  // after a failed warm load
// Start-up retry of a transient cause (PostgreSQL down or starting, database missing), under the one
// start-up retry policy (storage/start/startup.h): one attempt, one log line, then wait 250 ms, 500 ms, ... up to 8 s (a cluster restart takes seconds; 8 s caps the extra
// wait after it is back). A permanent cause (StartError::permanent) exits kExitStartup at once.
constexpr auto kStartBackoffMin = std::chrono::milliseconds(250);
constexpr auto kStartBackoffMax = std::chrono::seconds(8);
constexpr auto kIdentityRetryPause = std::chrono::seconds(1);  // the journal's identity query, connection lost
// The writers' statement_timeout is this much above --request-timeout: a statement still running when
// every request in its batch has been answered (deadline) is cancelled soon after, freeing the writer;
// cancelling earlier would turn a slow-but-working database into errors the deadline already covers.
constexpr auto kStatementTimeoutMargin = std::chrono::seconds(2);
// tcp_user_timeout: at least this, and never below the statement_timeout (a slow statement is not a
// dead peer; unacknowledged data for this long is).
constexpr auto kTcpUserTimeoutMin = std::chrono::seconds(10);
// systemd: until READY=1, every start-up retry and maintenance tick extends the unit's start timeout by this
// much (EXTEND_TIMEOUT_USEC): a start-up that still makes progress (waiting for PostgreSQL, warm-loading) is
// not killed, one stuck for this long is. Above kStartBackoffMax (the longest pause between two messages).
constexpr auto kStartTimeoutExtension = std::chrono::seconds(30);
static_assert(kStartTimeoutExtension > kStartBackoffMax, "a retry pause must not outlast the extension");

// Open-file limit: one descriptor per connection; raise the soft limit to the hard one.
void RaiseNoFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      Log(LogLevel::kWarn, "rlimit", {{"error", std::strerror(errno)}});
    }
  }
}

// Writes "<port>\n" atomically (temp file + rename) so a poller never reads a partial number.
void WritePortFile(const std::string& path, std::uint16_t port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << '\n';
    if (!out) throw std::runtime_error("cannot write --port-file " + path);
  }
  std::filesystem::rename(tmp, path);
}

// Thrown by the warm load's sink at shutdown: abandons the load.
struct WarmAborted {};

storage::StoreOptions MakeStoreOptions(const Config& config) {
  storage::StoreOptions o;
  o.url = config.database_url;
  o.writers = config.writers;
  o.batch_limit = config.batch_limit;
  o.flush_interval = config.flush_interval;
  o.queue_limit = config.queue_limit;
  o.retention = config.retention;
  // Rows may carry their own horizon (keep_until); with --retention=off nothing expires, packs included.
  o.pack_horizons = config.keys == KeysMode::kGs1 && config.retention.count() > 0;
  o.log = StorageLogSink();  // one log stream: storage's events go through server::Log
  o.statement_timeout = config.request_timeout + kStatementTimeoutMargin;
  o.tcp_user_timeout = std::max<std::chrono::milliseconds>(kTcpUserTimeoutMin, o.statement_timeout);
  // One connection attempt per Store::Start(); the backoff and the log line per attempt are App's.
  o.start_timeout = std::chrono::milliseconds(0);
  return o;
}

// The store: --partitions' map (read from the PL/Proxy database, watched for moved partitions), or one partition:
// --database-url.
storage::PartitionedStoreOptions MakePartitionedOptions(const Config& config, const storage::StoreOptions& base) {
  storage::PartitionedStoreOptions o;
  o.base = base;
  if (config.partitioned()) {
    storage::ConnectionDefaults d;
    d.statement_timeout = base.statement_timeout;
    d.tcp_user_timeout = base.tcp_user_timeout;
    d.application_name = "scangate-partition-map";
    o.proxy_url = storage::WithConnectionDefaults(config.partitions_url, d);
    o.cluster = config.partition_cluster;
    o.map_poll = config.partition_map_poll;
  } else {
    o.fixed_map = storage::PartitionMap{{config.database_url}};
  }
  return o;
}
}  // namespace

App::App(Config config) : config_(std::move(config)), store_options_(MakeStoreOptions(config_)) {}

App::~App() {
  if (warm_.joinable()) {
    stop_requested_.store(true);
    warm_.join();
  }
  // A start-up that failed half-way: the followers and watches feed the peers' views, destroyed before them.
  StopFollowers();
  StopPeerReaders();
}

int App::Run() {
  RaiseNoFileLimit();
  if (auto exit = MakeFilter()) return *exit;
  // Signals are caught from here on (a SIGTERM while waiting for PostgreSQL exits cleanly).
  signals_.add(SIGINT);
  signals_.add(SIGTERM);
  signals_.add(SIGHUP);  // reload --tokens-file
  WaitForSignal();
  if (auto exit = StartStore()) return *exit;
  if (stop_requested_.load()) return 0;
  if (auto exit = CheckDigestScheme()) return *exit;
  if (stop_requested_.load()) {
    store_->Shutdown();
    return 0;
  }
  StartClocks();
  MakePeerViews();
  if (auto exit = StartFollowers()) {
    store_->Shutdown();
    return *exit;
  }
  if (auto exit = OpenJournal()) return *exit;
  if (stop_requested_.load()) {
    store_->Shutdown();
    return 0;
  }
  if (auto exit = StartPeers()) {
    // Refused (another live process holds this journal's identity): nothing was served; the journal's replay
    // is committed and checkpointed as at any stop; the rows are not touched (they are the other process's).
    StopFollowers();
    StopClocks();
    StopPeerReaders();
    if (journal_) journal_->StopAppends();
    store_->Shutdown();
    if (journal_) journal_->Close();
    StopPublishers(/*clean=*/false);
    return *exit;
  }
  StartReaders();
  if (auto exit = Listen()) return *exit;
  StartWarmLoad();
  ScheduleMaintenance();
  ReportReadiness();  // at once: a quick warm start need not wait for the first tick
  if (!stop_requested_.load()) main_ioc_.run();
  Shutdown();
  return 0;
}

void App::WaitForSignal() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo == SIGHUP) {
      ReloadTokens();
      ReloadTls();
      return WaitForSignal();
    }
    Log(LogLevel::kInfo, "shutdown", {{"phase", "signal"}, {"signal", signo}});
    notify_.Stopping("stopping: draining in-flight requests");
    stop_requested_.store(true);
    main_ioc_.stop();
  });
}

bool App::PauseUnlessStopped(std::chrono::milliseconds pause) {
  notify_.ExtendStartTimeout(kStartTimeoutExtension);  // still trying: systemd keeps waiting
  main_ioc_.run_for(pause);  // returns early when SIGTERM/SIGINT stops it
  return !stop_requested_.load();
}

std::optional<int> App::MakeFilter() {
  FilterOptions fo;
  fo.capacity = config_.capacity;
  fo.fp_target = config_.fp_target;
  fo.window = config_.window;
  fo.shards = config_.shards;
  try {
    filter_ = std::make_unique<ShardedFilter>(fo);
  } catch (const std::invalid_argument& e) {
    std::cerr << "scangate: invalid filter configuration: " << e.what() << "\n";
    return kExitConfig;
  }
  const FilterGeometry& geo = filter_->geometry();
  json::object fields = Describe(config_);
  fields["filter_memory_bytes"] = geo.memory_bytes;
  fields["filter_bits_per_key"] = geo.bits_per_key;
  fields["filter_k"] = geo.k;
  fields["filter_design_fp"] = geo.design_fp;
  Log(LogLevel::kInfo, "config", std::move(fields));
  if (config_.keys == KeysMode::kGs1 && config_.ack == AckMode::kFilter) {
    Log(LogLevel::kWarn, "keys",
        {{"note", "--keys=gs1 with --ack=filter: every new pack is decided in PostgreSQL (answered like "
                  "--ack=commit); a pack is kept until its expiry plus --expiry-grace, longer than the filter "
                  "remembers, so its 'definitely new' cannot be trusted"}});
  }
  try {
    digester_ = config_.digest_secret.empty() ? Digester::Sha256() : Digester::HmacSha256(config_.digest_secret);
    if (config_.digest_rotating()) {
      previous_digester_ = config_.digest_secret_previous.empty() ? Digester::Sha256()
                                                                   : Digester::HmacSha256(config_.digest_secret_previous);
      previous_scheme_ = SchemeOf(*previous_digester_, KeysName(config_.keys));
    }
    scheme_ = SchemeOf(*digester_, KeysName(config_.keys));
    // sql/014's fence: every writer connection carries this scheme's fingerprint.
    store_options_.digest_scheme_option = storage::SchemeOption(*scheme_);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "digest"}, {"what", e.what()}});
    return kExitStartup;
  }
  return std::nullopt;
}

std::optional<int> App::StartStore() {
  int attempts = 0;
  try {
    const bool started = storage::RetryWithBackoff(
        storage::RetryPolicy{kStartBackoffMin, kStartBackoffMax, std::nullopt},
        [this, &attempts](int attempt, std::chrono::milliseconds retry_in) {
          attempts = attempt;
          std::string cause, sqlstate;
          try {
            store_ = std::make_unique<storage::PartitionedStore>(MakePartitionedOptions(config_, store_options_));
            // A moved partition: its readers follow its writers (the store has retargeted those already).
            store_->OnRetarget([this](unsigned p, const std::string& conninfo) {
              if (StorageReaders* r = retarget_readers_.load()) r->Retarget(p, conninfo);
              RetargetFollower(p, conninfo);
              RetargetPeers(p, conninfo);
            });
            store_->Start();
            return true;
          } catch (const storage::StartError& e) {
            if (e.permanent()) throw;
            cause = e.what();
            sqlstate = e.sqlstate();
          } catch (const std::exception& e) {
            cause = e.what();
          }
          Log(LogLevel::kWarn, "pg_state",
              {{"state", "down"}, {"error", cause}, {"sqlstate", sqlstate}, {"attempt", attempt},
               {"retry_in_ms", retry_in.count()}});
          notify_.Status("starting: waiting for PostgreSQL (attempt " + std::to_string(attempt) + ")");
          store_.reset();
          return false;
        },
        [this](std::chrono::milliseconds pause) { return PauseUnlessStopped(pause); });
    if (!started) return 0;  // stopped by a signal while waiting
  } catch (const storage::StartError& e) {
    Log(LogLevel::kError, "startup_failed",
        {{"error", e.what()}, {"sqlstate", e.sqlstate()}, {"attempt", attempts}, {"exit_code", kExitStartup}});
    return kExitStartup;
  }
  Log(LogLevel::kInfo, "pg_state", {{"state", "up"}});
  return std::nullopt;
}

// ack=filter durable fast path: open the journal (refusing a foreign or busy directory), replay what it holds
// past its checkpoint into the filter and PostgreSQL, before the first request is taken.
std::optional<int> App::OpenJournal() {
  if (config_.ack != AckMode::kFilter || !config_.journal) return std::nullopt;
  try {
    storage::JournalOptions jo;
    jo.dir = config_.journal_dir;
    jo.max_bytes = config_.journal_max_bytes;
    jo.retention = config_.retention;  // recovered records past the horizon are skipped
    jo.partitions = static_cast<unsigned>(store_->partitions());  // --max-commit-lag per partition
    jo.clocks = clocks_.get();  // the horizon by PostgreSQL's clock
    jo.log = store_options_.log;  // one log stream
    // The identity of the database the journal belongs to; PostgreSQL answered Store::Start() a moment ago,
    // so a failure here is retried like the start itself.
    storage::ConnectionDefaults identity_defaults;  // timeouts and keepalives, as every connection
    identity_defaults.statement_timeout = store_options_.statement_timeout;
    identity_defaults.tcp_user_timeout = store_options_.tcp_user_timeout;
    identity_defaults.application_name = "scangate-journal";
    const bool identified = storage::RetryWithBackoff(
        storage::RetryPolicy{kIdentityRetryPause, kIdentityRetryPause, std::nullopt},
        [&](int, std::chrono::milliseconds) {
          try {
            jo.identity = storage::JournalDrain::QueryIdentity(config_.database_url, identity_defaults);
            return true;
          } catch (const pqxx::broken_connection& e) {
            Log(LogLevel::kWarn, "pg_state", {{"state", "down"}, {"error", e.what()}});
            return false;
          }
        },
        [this](std::chrono::milliseconds pause) { return PauseUnlessStopped(pause); });
    if (!identified) return std::nullopt;  // stopped by a signal: Run() sees the stop
    notify_.Status("starting: replaying the journal");
    journal_ = std::make_unique<storage::JournalDrain>(*store_, jo);
    journal_->Start([this](std::span<const Digest> digests) { filter_->InsertBatchConcurrently(digests); });
    const auto js = journal_->Stats();
    Log(LogLevel::kInfo, "journal", {{"dir", config_.journal_dir},
                                     {"recovered", js.recovered},
                                     {"recovered_expired", js.recovered_expired}});
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "journal"}, {"what", e.what()}});
    journal_.reset();
    store_->Shutdown();
    return kExitStartup;
  }
  return std::nullopt;
}

// The Service, and the readers that never queue behind the writers: POST /lookup and the BRIN summarizer,
// each on a connection of its own that reconnects by itself.
void App::StartReaders() {
  metrics_ = std::make_unique<Metrics>(config_.threads);
  service_ = std::make_unique<Service>(config_, *digester_, *filter_, *store_, *metrics_, journal_.get());
  service_->AttachClocks(clocks_.get());
  StorageReaderOptions ro;
  ro.retention = config_.retention;
  ro.pack_horizons = store_options_.pack_horizons;  // rows past their own keep_until
  ro.epoch_keys = config_.epoch_keys;
  ro.epoch_max_age = config_.epoch_max_age;
  ro.lookup_defaults.statement_timeout = store_options_.statement_timeout;
  ro.lookup_defaults.tcp_user_timeout = store_options_.tcp_user_timeout;
  ro.maintenance_defaults.statement_timeout = store_options_.warm_statement_timeout;
  ro.maintenance_defaults.tcp_user_timeout = store_options_.tcp_user_timeout;
  ro.log = store_options_.log;
  ro.clocks = clocks_.get();
  readers_ = std::make_unique<StorageReaders>(*store_, std::move(ro));
  retarget_readers_.store(readers_.get());
  readers_->Start();
  AttachFollowers();
  AttachPeers();
  AttachDigestScheme();
  service_->AttachStorageStats([this](MetricsSnapshot& s) {
    readers_->Fill(s);
    FillSchemeStats(s);
    for (const auto& f : followers_) s.followers.emplace_back(f->label(), f->Stats());
    FillPeerStats(s);
    FillClockStats(s);
  });
}

std::optional<int> App::Listen() {
  router_ = std::make_unique<Router>(config_, *service_, readers_->lookups());
  server_ = std::make_unique<HttpServer>(config_, *router_, *metrics_);
  try {
    server_->Start();
    if (!config_.port_file.empty()) WritePortFile(config_.port_file, server_->port());
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "listen"}, {"what", e.what()}});
    server_->Stop();
    if (journal_) journal_->StopAppends();
    store_->Shutdown();
    readers_->Shutdown();
    return kExitStartup;
  }
  json::object fields{{"address", config_.listen}, {"port", server_->port()}, {"threads", config_.threads},
                      {"tls", config_.tls()}};
  if (config_.admin_split()) {
    fields["admin_address"] = config_.admin_address;
    fields["admin_port"] = server_->admin_port();
    fields["admin_tls"] = config_.admin_tls;
  }
  Log(LogLevel::kInfo, "listening", std::move(fields));
  if (config_.protected_mode && config_.listen_auto) {
    Log(LogLevel::kWarn, "protected_mode",
        {{"message", "listening on loopback only: without --tokens-file and --digest-secret-file scangate does not "
                     "serve the network; set both (then it listens on 0.0.0.0), or --listen=ADDR --insecure "
                     "(docs/security.md 'Threat model')"}});
  }
  notify_.Status("starting: listening on port " + std::to_string(server_->port()) + ", warm start");
  return std::nullopt;
}

// Warm start: every digest PostgreSQL saw within the window goes into the filter; until then every key takes
// the exact path. Retries while PostgreSQL is unreachable; abandoned at shutdown.
void App::StartWarmLoad() {
  warm_ = std::thread([this] {
    SetThreadName("sg-warm-start");
    storage::RetryWithBackoff(
        storage::RetryPolicy{kWarmRetryDelay, kWarmRetryDelay, std::nullopt},
        [this](int, std::chrono::milliseconds retry_in) {
          if (stop_requested_.load()) return true;  // abandoned at shutdown
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const std::uint64_t keys = store_->WarmLoad(WarmWindow(), [this](std::span<const Digest> chunk) {
              if (stop_requested_.load()) throw WarmAborted{};
              filter_->InsertBatchConcurrently(chunk);
              filter_->PublishPendingInserts();  // a stream thread's pending counts die with it otherwise
            });
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            service_->MarkWarm();
            Log(LogLevel::kInfo, "warm_start", {{"keys", keys}, {"seconds", seconds}});
            return true;
          } catch (const WarmAborted&) {
            return true;
          } catch (const std::exception& e) {
            Log(LogLevel::kWarn, "warm_start",
                {{"error", e.what()},
                 {"retry_in_seconds", std::chrono::duration_cast<std::chrono::seconds>(retry_in).count()}});
            return false;
          }
        },
        [this](std::chrono::milliseconds pause) {  // abandoned at shutdown: looks at the flag every tenth
          for (int i = 0; i < 10 && !stop_requested_.load(); ++i) std::this_thread::sleep_for(pause / 10);
          return !stop_requested_.load();
        });
  });
}

void App::ReportReadiness() {
  notify_.Watchdog();  // this tick ran: the main event loop is alive
  const bool ready = service_->ready();
  if (ready && !notify_.ready_sent()) {
    notify_.Ready("ready: serving on port " + std::to_string(server_->port()));
  } else if (!notify_.ready_sent()) {
    notify_.ExtendStartTimeout(kStartTimeoutExtension);  // warm start or journal replay still running
  } else if (ready != ready_reported_) {
    notify_.Status(ready ? "ready: serving on port " + std::to_string(server_->port())
                         : std::string(store_->serving() ? "not ready: journal replay" : "not ready: PostgreSQL down"));
  }
  ready_reported_ = ready;
}

void App::Shutdown() {
  Log(LogLevel::kInfo, "shutdown", {{"phase", "draining"}});
  server_->BeginShutdown();
  const bool drained = server_->WaitDrained(std::chrono::steady_clock::now() + kDrainDeadline);
  if (!drained) Log(LogLevel::kWarn, "shutdown", {{"phase", "drain deadline passed; closing remaining connections"}});
  stop_requested_.store(true);
  warm_.join();
  StopFollowers();
  StopClocks();
  StopPeerReaders();
  if (journal_) journal_->StopAppends();  // flushes the last group, hands it to the store
  store_->Shutdown();
  if (journal_) journal_->Close();  // final checkpoint: what the store committed
  StopPublishers(/*clean=*/true);   // the rows stopped, unless keys stayed uncommitted (issue 42)
  server_->Stop();
  readers_->Shutdown();
  const storage::StoreStats st = store_->Stats();
  Log(LogLevel::kInfo, "shutdown",
      {{"phase", "done"}, {"keys_written", st.keys_written}, {"write_behind_lost", st.write_behind_lost}});
}

}  // namespace scangate::server
