// App: the scangate process. It owns every long-lived part and the order they start and stop in; main()
// only parses the command line and hands over (userver's components, Seastar's app_template).
// Start-up: filter and digester -> the store's Start() (retried until PostgreSQL answers — every partition's, with
// --partitions, after the map was read from the PL/Proxy database; a permanent cause exits)
// -> the journal (ack=filter: opened and replayed before the first request) -> Service, lookups, BRIN
// summarizer -> listen (so /healthz answers at once) -> warm start on a background thread, then "warm".
// The main thread runs a small io_context for signals and the 1 s maintenance timer (filter rotation,
// pg_state transitions, telemetry); SIGHUP rereads --tokens-file (the tokens in force stay when it fails).
// Shutdown on SIGTERM/SIGINT: stop accepting, drain in-flight requests
// (<= kDrainDeadline), flush the journal and the Store's write-behind, final checkpoint, stop the I/O threads.
// Under systemd (Type=notify, server/systemd_notify.h): STATUS= at each start-up step, READY=1 at the first
// maintenance tick that finds Service::ready() (what /readyz answers 200 on), WATCHDOG=1 from every maintenance
// tick (so only while the main event loop runs), STOPPING=1 when the signal arrives.
// Invariant: nothing is torn down before what uses it — the reverse of the start-up order.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/boot_clock.h"
#include "core/digest.h"
#include "core/digest_scheme.h"
#include "core/filter.h"
#include "core/mutex.h"
#include "server/config/config.h"
#include "server/systemd_notify.h"
#include "storage/clock/pg_clock.h"
#include "storage/clock/pg_clock_reader.h"
#include "storage/follow/follower.h"
#include "storage/partitions/partitioned_reader.h"
#include "storage/partitions/partitioned_store.h"
#include "storage/peers/peer_view.h"
#include "storage/peers/presence.h"
#include "storage/peers/peer_watch.h"
#include "storage/peers/watermark_publisher.h"
#include "storage/scheme/scheme_record.h"
#include "storage/scheme/scheme_watch.h"

namespace scangate::storage {
class JournalDrain;
}  // namespace scangate::storage

namespace scangate::server {

class Metrics;
struct MetricsSnapshot;
class Service;
class Router;
class HttpServer;
class FilterRotationLog;
class StorageReaders;

// Process exit codes.
inline constexpr int kExitStartup = 1;  // PostgreSQL refused for good, the journal or the listener failed
inline constexpr int kExitConfig = 2;   // bad flags or filter geometry

class App {
 public:
  explicit App(Config config);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Starts everything, serves until SIGTERM/SIGINT, shuts down; returns the process exit code. Call once,
  // from the main thread.
  int Run();

 private:
  // Each start-up step returns an exit code when the process must stop now (nullopt: go on).
  std::optional<int> MakeFilter();
  std::optional<int> StartStore();
  // The digest scheme (issue 55, server/app_scheme.cc; storage/scheme/scheme_record.h): checked in (and recorded
  // by) every partition's database once the store started, before anything is written; a mismatch exits
  // kExitConfig with digest_scheme_mismatch; a rotation it starts waits kRotationSettle before serving.
  std::optional<int> CheckDigestScheme();
  // With the Service: the rotation's previous-digest reads, --ack=filter's SchemeWatch (its lease on the scheme),
  // and /stats' digest_scheme.
  void AttachDigestScheme();
  void FillSchemeStats(MetricsSnapshot& s) const;
  std::optional<int> OpenJournal();
  void StartReaders();
  std::optional<int> Listen();
  void StartWarmLoad();
  // --follow (server/app_follow.cc): one follower per database, started before the warm start reads the window
  // (exit code when a database's settings refuse it: wal_level, the role); the Service's freshness check and
  // the metrics' samples; stopped before the store.
  std::optional<int> StartFollowers();
  void AttachFollowers();
  void StopFollowers();
  // PostgreSQL's clocks (server/app_clock.cc): one reader per database, started after the store, before the
  // journal and the Service read them; stopped with the followers.
  void StartClocks();
  void StopClocks();
  // The peers' commit watermark (issue 42, server/app_peers.cc; storage/peers/peer_view.h). MakePeerViews before
  // the followers start (they feed the views of --ack=filter); ConfigurePeers adds the peers' rows to follower p's
  // statement; StartPeers once the journal is open (its id, the publishers; --ack=commit's watches; the reader of
  // keys the peers do not cover); AttachPeers once the Service exists; StopPeerReaders with the followers;
  // StopPublishers after the store shut down (a clean stop marks the rows stopped).
  void MakePeerViews();
  void ConfigurePeers(storage::FollowerOptions& fo, unsigned partition);
  // Exit code when this journal's identity is held by another live process (issue 55: the lease,
  // storage/peers/watermark_publisher.h): waits for every publisher's first claim before serving.
  std::optional<int> StartPeers();
  void AttachPeers();
  void RetargetPeers(unsigned partition, const std::string& conninfo);
  void FillPeerStats(MetricsSnapshot& s) const;
  void FillClockStats(MetricsSnapshot& s) const;  // app_clock.cc: the clock readers' steps (issue 55)
  void StopPeerReaders();
  void StopPublishers(bool clean);
  // The window the warm start and the followers' reloads read: --window, capped by --retention.
  std::chrono::seconds WarmWindow() const;
  void ScheduleMaintenance();
  // Logs host_resumed when the host was suspended since the last tick (BootClock::Suspended grew). Main thread.
  void NoteSuspension();
  // systemd: the watchdog ping, READY=1 once ready, STATUS= at each readiness change. Main thread.
  void ReportReadiness();
  void Shutdown();
  // SIGINT/SIGTERM: stop; SIGHUP: ReloadTokens and ReloadTls, then wait again.
  void WaitForSignal();
  void ReloadTokens();
  void ReloadTls();
  // Waits `pause` on the main io_context (signals keep being handled); false when a stop was requested.
  bool PauseUnlessStopped(std::chrono::milliseconds pause);

  const Config config_;
  storage::StoreOptions store_options_;  // the writers' options (per partition); the readers derive their bounds from them
  boost::asio::io_context main_ioc_{1};  // signals and the maintenance timer
  boost::asio::signal_set signals_{main_ioc_};
  boost::asio::steady_timer tick_{main_ioc_};
  std::atomic<bool> stop_requested_{false};
  bool pg_up_ = true;  // the last pg_state logged by the maintenance timer
  SystemdNotifier notify_;
  bool ready_reported_ = false;  // the readiness in the last STATUS= sent
  std::chrono::nanoseconds suspended_ = BootClock::Suspended();  // at the last maintenance tick

  std::unique_ptr<ShardedFilter> filter_;
  std::optional<Digester> digester_;
  // --digest-secret-previous-file: the digester of the secret the database rotated from (issue 55).
  std::optional<Digester> previous_digester_;
  // The digest schemes of both (core/digest_scheme.h), computed once with them.
  std::optional<DigestScheme> scheme_, previous_scheme_;
  // Each partition's scheme row as CheckDigestScheme left it (index = partition), for /stats and the metric.
  std::vector<storage::RecordedScheme> schemes_;
  std::unique_ptr<storage::SchemeWatch> scheme_watch_;  // --ack=filter
  // The exact store: one partition on --database-url, or the partitions of --partitions' map (storage/partitions/partitioned_store.h).
  std::unique_ptr<storage::PartitionedStore> store_;
  // One PostgreSQL clock per partition (storage/clock/pg_clock.h), read by the Service and the journal: made before
  // them, destroyed after them. Its readers are retargeted like the followers (followers_mu_).
  std::unique_ptr<storage::PgClocks> clocks_;
  std::vector<std::unique_ptr<storage::PgClockReader>> clock_readers_;
  std::unique_ptr<storage::JournalDrain> journal_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<StorageReaders> readers_;  // lookups, BRIN summarizers, expiries: one set per partition
  // readers_ for the store's retarget listener (the map watcher's thread): published before readers_->Start(), so a
  // partition moved at any time reaches them (StorageReaders::Retarget before Start is a no-op; Start reads the
  // new string). Outlived by the watcher: the store stops it before the readers are shut down.
  std::atomic<StorageReaders*> retarget_readers_{nullptr};
  // --follow: one per partition (index = partition), made once, before the first is started. The store's retarget
  // listener reaches them under followers_mu_: StartFollowers reads each partition's connection string and
  // publishes the followers under it, so a partition moved at any time reaches its follower — before its Start()
  // (which then connects there) or after it (the follower drops the connection it opened).
  std::vector<std::unique_ptr<storage::Follower>> followers_;
  Mutex followers_mu_;
  bool followers_retargetable_ ABSL_GUARDED_BY(followers_mu_) = false;  // cleared before they stop
  bool clocks_retargetable_ ABSL_GUARDED_BY(followers_mu_) = false;     // clock_readers_, likewise
  // The listener's part for the followers and the clock readers: partition p moved to `conninfo`.
  void RetargetFollower(unsigned p, const std::string& conninfo);
  // --ack=commit with --follow: the Service the followers feed (null until AttachFollowers, and after
  // StopFollowers).
  std::atomic<Service*> learning_service_{nullptr};
  // Issue 42: one view per partition (--ack=filter following, or --ack=commit), a publisher per partition (a journal
  // owner), --ack=commit's watches, and the reader of keys the peers do not cover. Fixed once started; published to
  // the retarget listener like the followers (peers_retargetable_).
  std::vector<std::unique_ptr<storage::PeerView>> peer_views_;
  std::vector<std::unique_ptr<storage::WatermarkPublisher>> publishers_;
  // Issue 55: one presence lock per partition (storage/peers/presence.h): shared, or exclusive for --ack=filter
  // --journal=off, which is refused beside any other instance. Released last (StopPublishers).
  std::vector<std::unique_ptr<storage::InstancePresence>> presence_;
  // This process's incarnation (issue 55): a random UUID per start, the holder of this instance's rows.
  std::string incarnation_;
  std::vector<std::unique_ptr<storage::PeerWatch>> peer_watches_;
  std::unique_ptr<storage::PartitionedReader> peer_reader_;
  std::atomic<bool> peers_retargetable_{false};
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<FilterRotationLog> rotation_log_;
  std::thread warm_;
};

}  // namespace scangate::server
