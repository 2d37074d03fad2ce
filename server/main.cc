// scangate: the HTTP service binary. Start-up order: config -> filter -> Store::Start() (retries until
// PostgreSQL answers) -> listen (so /healthz answers at once) -> warm start in a background thread, then
// "warm". The main thread runs a small io_context for signals and the 1 s maintenance timer (filter
// rotation, pg_state transitions). Shutdown on SIGTERM/SIGINT: stop accepting, drain in-flight requests
// (<= kDrainDeadline), Store::Shutdown() (flushes write-behind), stop the I/O threads, exit 0.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <pqxx/except>

#include "core/digest.h"
#include "core/filter.h"
#include "core/thread_name.h"
#include "server/config.h"
#include "server/filter_rotation_log.h"
#include "server/filter_telemetry.h"
#include "server/http_server.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/service.h"
#include "storage/brin_summarizer.h"
#include "storage/pg/conninfo.h"
#include "storage/journal_drain.h"
#include "storage/lookup.h"
#include "storage/startup.h"
#include "storage/store.h"

namespace {
namespace net = boost::asio;
namespace json = boost::json;
using namespace scangate;
using namespace scangate::server;

constexpr int kExitConfig = 2;
constexpr int kExitStartup = 1;
constexpr auto kDrainDeadline = std::chrono::seconds(10);        // in-flight requests at shutdown
constexpr auto kMaintenancePeriod = std::chrono::seconds(1);     // filter rotation, pg_state check, telemetry
static_assert(kMaintenancePeriod == FilterTelemetry::kRefreshPeriod, "/stats promises this staleness bound");
constexpr auto kWarmRetryDelay = std::chrono::seconds(1);        // after a failed warm load
// Start-up retry of a transient cause (PostgreSQL down or starting, database missing): one attempt, one
// log line, then wait 250 ms, 500 ms, ... up to 8 s (a cluster restart takes seconds; 8 s caps the extra
// wait after it is back). A permanent cause (StartError::permanent) exits kExitStartup at once.
constexpr auto kStartBackoffMin = std::chrono::milliseconds(250);
constexpr auto kStartBackoffMax = std::chrono::seconds(8);
// The writers' statement_timeout is this much above --request-timeout: a statement still running when
// every request in its batch has been answered (deadline) is cancelled soon after, freeing the writer;
// cancelling earlier would turn a slow-but-working database into errors the deadline already covers.
constexpr auto kStatementTimeoutMargin = std::chrono::seconds(2);
// tcp_user_timeout: at least this, and never below the statement_timeout (a slow statement is not a
// dead peer; unacknowledged data for this long is).
constexpr auto kTcpUserTimeoutMin = std::chrono::seconds(10);

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

struct WarmAborted {};

}  // namespace

int main(int argc, char** argv) {
  RaiseNoFileLimit();
  Config config;
  try {
    ParseOutcome parsed = ParseConfig(argc, argv);
    if (!parsed.config) {
      std::cout << parsed.help;
      return 0;
    }
    config = std::move(*parsed.config);
  } catch (const ConfigError& e) {
    std::cerr << "scangate: " << e.what() << "\n(see scangate --help)\n";
    return kExitConfig;
  }

  FilterOptions filter_options;
  filter_options.capacity = config.capacity;
  filter_options.fp_target = config.fp_target;
  filter_options.window = config.window;
  filter_options.shards = config.shards;
  std::unique_ptr<ShardedFilter> filter;
  try {
    filter = std::make_unique<ShardedFilter>(filter_options);
  } catch (const std::invalid_argument& e) {
    std::cerr << "scangate: invalid filter configuration: " << e.what() << "\n";
    return kExitConfig;
  }
  const FilterGeometry& geo = filter->geometry();
  {
    json::object fields = Describe(config);
    fields["filter_memory_bytes"] = geo.memory_bytes;
    fields["filter_bits_per_key"] = geo.bits_per_key;
    fields["filter_k"] = geo.k;
    fields["filter_design_fp"] = geo.design_fp;
    Log(LogLevel::kInfo, "config", std::move(fields));
  }
  std::optional<Digester> digester;
  try {
    digester = config.digest_secret.empty() ? Digester::Sha256() : Digester::HmacSha256(config.digest_secret);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "digest"}, {"what", e.what()}});
    return kExitStartup;
  }

  // Signals are caught from here on (a SIGTERM while waiting for PostgreSQL exits cleanly).
  net::io_context main_ioc{1};
  net::signal_set signals(main_ioc, SIGINT, SIGTERM);
  std::atomic<bool> stop_requested{false};
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    Log(LogLevel::kInfo, "shutdown", {{"phase", "signal"}, {"signal", signo}});
    stop_requested.store(true);
    main_ioc.stop();
  });

  storage::StoreOptions store_options;
  store_options.url = config.database_url;
  store_options.writers = config.writers;
  store_options.batch_limit = config.batch_limit;
  store_options.flush_interval = config.flush_interval;
  store_options.queue_limit = config.queue_limit;
  store_options.log = StorageLogSink();  // one log stream: storage's events go through server::Log
  store_options.statement_timeout = config.request_timeout + kStatementTimeoutMargin;
  store_options.tcp_user_timeout = std::max<std::chrono::milliseconds>(
      kTcpUserTimeoutMin, store_options.statement_timeout);
  // One connection attempt per Store::Start(); the backoff (storage/startup.h) and the log line per attempt
  // are here.
  store_options.start_timeout = std::chrono::milliseconds(0);
  std::unique_ptr<storage::Store> store;
  int attempts = 0;
  try {
    const bool started = storage::RetryWithBackoff(
        storage::RetryPolicy{kStartBackoffMin, kStartBackoffMax, std::nullopt},
        [&](int attempt, std::chrono::milliseconds retry_in) {
          attempts = attempt;
          std::string cause, sqlstate;
          try {
            store = std::make_unique<storage::Store>(store_options);
            store->Start();
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
          store.reset();
          return false;
        },
        [&](std::chrono::milliseconds pause) {
          main_ioc.run_for(pause);  // returns early when SIGTERM/SIGINT stops it
          return !stop_requested.load();
        });
    if (!started) return 0;
  } catch (const storage::StartError& e) {
    Log(LogLevel::kError, "startup_failed",
        {{"error", e.what()}, {"sqlstate", e.sqlstate()}, {"attempt", attempts}, {"exit_code", kExitStartup}});
    return kExitStartup;
  }
  Log(LogLevel::kInfo, "pg_state", {{"state", "up"}});

  // ack=filter durable fast path: open the journal (refusing a foreign or busy directory), replay what it
  // holds past its checkpoint into the filter and PostgreSQL, before the first request is taken.
  std::unique_ptr<storage::JournalDrain> journal;
  constexpr auto kIdentityRetryPause = std::chrono::seconds(1);  // QueryIdentity after a lost connection
  if (config.ack == AckMode::kFilter && config.journal) {
    try {
      storage::JournalOptions jo;
      jo.dir = config.journal_dir;
      jo.max_bytes = config.journal_max_bytes;
      jo.log = store_options.log;  // one log stream
      // The identity of the database the journal belongs to; PostgreSQL answered Store::Start() a moment ago,
      // so a failure here is retried like the start itself.
      const bool identified = storage::RetryWithBackoff(
          storage::RetryPolicy{kIdentityRetryPause, kIdentityRetryPause, std::nullopt},
          [&](int, std::chrono::milliseconds) {
            try {
              jo.identity = storage::JournalDrain::QueryIdentity(config.database_url);
              return true;
            } catch (const pqxx::broken_connection& e) {
              Log(LogLevel::kWarn, "pg_state", {{"state", "down"}, {"error", e.what()}});
              return false;
            }
          },
          [&](std::chrono::milliseconds pause) {
            main_ioc.run_for(pause);  // returns early when SIGTERM/SIGINT stops it
            return !stop_requested.load();
          });
      if (!identified) {
        store->Shutdown();
        return 0;
      }
      journal = std::make_unique<storage::JournalDrain>(*store, jo, Service::JournalDeliver());
      journal->Start([&](std::span<const Digest> digests) { filter->InsertBatchConcurrently(digests); });
      const auto js = journal->Stats();
      Log(LogLevel::kInfo, "journal", {{"dir", config.journal_dir}, {"recovered", js.recovered}});
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "error", {{"where", "journal"}, {"what", e.what()}});
      journal.reset();
      store->Shutdown();
      return kExitStartup;
    }
  }

  Metrics metrics(config.threads);
  Service service(config, *digester, *filter, *store, metrics, journal.get());
  // POST /lookup reads on its own connection (never behind the writers); reconnects by itself.
  storage::ConnectionDefaults lookup_defaults;
  lookup_defaults.statement_timeout = store_options.statement_timeout;
  lookup_defaults.tcp_user_timeout = store_options.tcp_user_timeout;
  lookup_defaults.application_name = "scangate-lookup";
  storage::Lookup lookups(
      storage::LookupOptions{storage::WithConnectionDefaults(config.database_url, lookup_defaults)});
  lookups.Start();
  // The first_seen BRIN index is summarized from here (sql/003: autosummarize cannot keep up), on its own
  // connection; a pass may read every range a long outage of it left, hence the warm load's long bound.
  storage::ConnectionDefaults brin_defaults;
  brin_defaults.statement_timeout = store_options.warm_statement_timeout;
  brin_defaults.tcp_user_timeout = store_options.tcp_user_timeout;
  brin_defaults.application_name = "scangate-brin";
  storage::BrinSummarizerOptions brin_options;
  brin_options.conninfo = storage::WithConnectionDefaults(config.database_url, brin_defaults);
  brin_options.log = store_options.log;
  storage::BrinSummarizer brin(std::move(brin_options));
  brin.Start();
  service.AttachBrinSummarizer(&brin);
  Router router(config, service, &lookups);
  HttpServer server(config, router, metrics);
  try {
    server.Start();
    if (!config.port_file.empty()) WritePortFile(config.port_file, server.port());
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "error", {{"where", "listen"}, {"what", e.what()}});
    server.Stop();
    if (journal) journal->StopAppends();
    store->Shutdown();
    return kExitStartup;
  }
  {
    json::object fields{{"address", config.listen}, {"port", server.port()}, {"threads", config.threads},
                        {"tls", config.tls()}};
    if (config.admin_split()) {
      fields["admin_address"] = config.admin_address;
      fields["admin_port"] = server.admin_port();
    }
    Log(LogLevel::kInfo, "listening", std::move(fields));
  }

  // Warm start: every digest PostgreSQL saw within the window goes into the filter; until then every key
  // takes the exact path. Retries while PostgreSQL is unreachable; abandoned at shutdown.
  std::thread warm([&] {
    SetThreadName("sg-warm-start");
    storage::RetryWithBackoff(
        storage::RetryPolicy{kWarmRetryDelay, kWarmRetryDelay, std::nullopt},
        [&](int, std::chrono::milliseconds retry_in) {
          const auto t0 = std::chrono::steady_clock::now();
          try {
            const std::uint64_t keys = store->WarmLoad(config.window, [&](std::span<const Digest> chunk) {
              if (stop_requested.load()) throw WarmAborted{};
              filter->InsertBatchConcurrently(chunk);
              filter->PublishPendingInserts();  // a stream thread's pending counts die with it otherwise
            });
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            service.MarkWarm();
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
        [&](std::chrono::milliseconds pause) {  // abandoned at shutdown: looks at the flag every tenth
          for (int i = 0; i < 10 && !stop_requested.load(); ++i) std::this_thread::sleep_for(pause / 10);
          return !stop_requested.load();
        });
  });

  // Maintenance: filter rotation, pg_state transitions and the filter telemetry sample, once a second on
  // the main thread.
  net::steady_timer tick(main_ioc);
  bool pg_up = true;
  FilterRotationLog rotation_log(*filter);
  std::function<void()> schedule = [&] {
    tick.expires_after(kMaintenancePeriod);
    tick.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      filter->RotateExpired(std::chrono::steady_clock::now());
      service.RefreshTelemetry();  // after rotating: the sample shows the new generations
      rotation_log.Poll();  // one filter_rotation line per shard that rotated for capacity
      const bool up = store->up();
      if (up != pg_up) {
        pg_up = up;
        Log(up ? LogLevel::kInfo : LogLevel::kWarn, "pg_state", {{"state", up ? "up" : "down"}});
      }
      schedule();
    });
  };
  schedule();
  if (!stop_requested.load()) main_ioc.run();

  Log(LogLevel::kInfo, "shutdown", {{"phase", "draining"}});
  server.BeginShutdown();
  const bool drained = server.WaitDrained(std::chrono::steady_clock::now() + kDrainDeadline);
  if (!drained) Log(LogLevel::kWarn, "shutdown", {{"phase", "drain deadline passed; closing remaining connections"}});
  stop_requested.store(true);
  warm.join();
  if (journal) journal->StopAppends();  // flushes the last group, hands it to the store
  store->Shutdown();
  if (journal) journal->Close();  // final checkpoint: what the store committed
  server.Stop();
  lookups.Shutdown();
  brin.Shutdown();
  const storage::StoreStats st = store->Stats();
  Log(LogLevel::kInfo, "shutdown",
      {{"phase", "done"}, {"keys_written", st.keys_written}, {"write_behind_lost", st.write_behind_lost}});
  return 0;
}
