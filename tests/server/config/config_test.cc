// Tests server/config/config.h: defaults, durations, environment mapping (command line wins), validation errors,
// secret-file handling and redaction of the start-up description.
#include "server/config/config.h"
#include "tests/server/config/config_test_util.h"

#include "core/filter.h"

#include <gtest/gtest.h>
#include <boost/json/serialize.hpp>

#include <stdlib.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>

#include "server/version.h"

namespace scangate::server {
namespace {
using namespace std::chrono_literals;

using test_support::kUrl;
using test_support::Parse;
using test_support::ParseError;
using test_support::ParseOk;
using test_support::ScopedEnv;

// One place for each default: a command line giving only the URL yields a default-constructed Config's values
// (--help's defaults are printed from them), and the PostgreSQL writers' are the store's own.
TEST(Config, DefaultsAreConfigs) {
  const Config d;
  const Config c = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(c.listen, d.listen);
  EXPECT_EQ(c.port, d.port);
  EXPECT_EQ(c.port_file, d.port_file);
  EXPECT_EQ(c.capacity, d.capacity);
  EXPECT_EQ(c.fp_target, d.fp_target);
  EXPECT_EQ(c.window, d.window);
  EXPECT_EQ(c.retention, d.retention);
  EXPECT_EQ(c.shards, d.shards);
  EXPECT_EQ(c.ack, d.ack);
  EXPECT_EQ(c.writers, d.writers);
  EXPECT_EQ(c.batch_limit, d.batch_limit);
  EXPECT_EQ(c.flush_interval, d.flush_interval);  // auto with --ack=commit: the store's
  EXPECT_EQ(c.queue_limit, d.queue_limit);
  EXPECT_EQ(c.request_timeout, d.request_timeout);
  EXPECT_EQ(c.queue_wait, d.queue_wait);
  EXPECT_EQ(c.filter, d.filter);
  EXPECT_EQ(c.recent_keys, d.recent_keys);
  EXPECT_EQ(c.access_log, d.access_log);
  EXPECT_EQ(c.journal, d.journal);
  EXPECT_EQ(c.journal_dir, d.journal_dir);
  EXPECT_EQ(c.journal_max_bytes, d.journal_max_bytes);
  EXPECT_EQ(c.admin_listen, d.admin_listen);
  EXPECT_TRUE(c.cors_origins.empty());
  EXPECT_EQ(c.rate_limit, d.rate_limit);
  EXPECT_EQ(c.rate_burst, d.rate_burst);
  EXPECT_TRUE(c.terminals.empty());
  const storage::StoreOptions store;
  EXPECT_EQ(d.writers, store.writers);
  EXPECT_EQ(d.batch_limit, store.batch_limit);
  EXPECT_EQ(d.flush_interval, store.flush_interval);
  EXPECT_EQ(d.queue_limit, store.queue_limit);
  const std::string help = Parse({"--help"}).help;
  EXPECT_NE(help.find("--writers arg (=" + std::to_string(store.writers) + ")"), std::string::npos) << help;
  EXPECT_NE(help.find("--request-timeout arg (=5s)"), std::string::npos) << help;
  EXPECT_NE(help.find("--window arg (=24h)"), std::string::npos) << help;
  EXPECT_NE(help.find("--retention arg (=window)"), std::string::npos) << help;
  EXPECT_NE(help.find("--fp-target arg (=0.01)"), std::string::npos) << help;
}

// Durations: integer + unit from the allowed set; everything else rejected naming the option.
TEST(Config, Durations) {
  const std::vector<std::string_view> long_units = {"s", "m", "h", "d"};
  const std::vector<std::string_view> short_units = {"us", "ms", "s"};
  EXPECT_EQ(ParseDuration("90s", long_units, "window"), 90s);
  EXPECT_EQ(ParseDuration("15m", long_units, "window"), 15min);
  EXPECT_EQ(ParseDuration("24h", long_units, "window"), 24h);
  EXPECT_EQ(ParseDuration("7d", long_units, "window"), 7 * 24h);
  EXPECT_EQ(ParseDuration("500us", short_units, "flush-interval"), 500us);
  EXPECT_EQ(ParseDuration("2ms", short_units, "flush-interval"), 2ms);
  EXPECT_EQ(ParseDuration("1s", short_units, "flush-interval"), 1s);
  for (const char* bad : {"", "s", "10", "-5s", "1.5h", "5 s", "5sec", "5ms", "h24", "99999999999999999999d"}) {
    try {
      ParseDuration(bad, long_units, "window");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--window"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ParseDuration("2h", short_units, "flush-interval"), ConfigError);
}

// Defaults match the contract; only --database-url is required.
TEST(Config, Defaults) {
  Config c = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(c.listen, "127.0.0.1");  // protected mode: no tokens, no digest secret
  EXPECT_TRUE(c.protected_mode);
  EXPECT_EQ(c.port, 8080);
  EXPECT_GE(c.threads, 1u);
  EXPECT_EQ(c.capacity, 10'000'000u);
  EXPECT_DOUBLE_EQ(c.fp_target, 0.01);
  EXPECT_EQ(c.window, 24h);
  EXPECT_EQ(c.retention, 24h);  // the horizon follows the window
  EXPECT_EQ(c.shards, 64u);
  EXPECT_EQ(c.ack, AckMode::kCommit);
  EXPECT_EQ(c.writers, 2u);
  EXPECT_EQ(c.batch_limit, 1024u);
  EXPECT_EQ(c.flush_interval, 2ms);
  EXPECT_EQ(c.queue_limit, 65536u);
  EXPECT_TRUE(c.digest_secret.empty());
  EXPECT_TRUE(c.filter);
  EXPECT_EQ(c.recent_keys, 1'048'576u);
  EXPECT_FALSE(c.access_log);
  EXPECT_NE(ParseError({}).find("database-url"), std::string::npos);
}

// --journal-dir is never the working directory: $STATE_DIRECTORY/journal under systemd, else required with
// ack=filter and the journal on (the error names the flag); other modes need none.
TEST(Config, JournalDirDefaultsToStateDirectoryOrIsRequired) {
  {
    ScopedEnv unset("STATE_DIRECTORY", "");
    const std::string e = ParseError({"--database-url", kUrl, "--ack", "filter"});
    EXPECT_NE(e.find("--journal-dir"), std::string::npos) << e;
    EXPECT_NE(e.find("required"), std::string::npos) << e;
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal-dir", "/srv/j"}).journal_dir, "/srv/j");
    EXPECT_TRUE(ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal", "off"}).journal_dir.empty());
    EXPECT_TRUE(ParseOk({"--database-url", kUrl}).journal_dir.empty());
  }
  {
    ScopedEnv state("STATE_DIRECTORY", "/var/lib/scangate:/var/lib/other");
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter"}).journal_dir, "/var/lib/scangate/journal");
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal-dir", "/srv/j"}).journal_dir, "/srv/j");
  }
  {
    ScopedEnv flag("SCANGATE_JOURNAL_DIR", "/env/j");
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter"}).journal_dir, "/env/j");
  }
}

// --flush-interval=auto (the default) follows the mode: a long lag only where the rows are already durable.
TEST(Config, FlushIntervalFollowsTheJournal) {
  const char* j = "--journal-dir=/tmp/j";
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j}).flush_interval, 20ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal", "off"}).flush_interval, 2ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "commit", "--journal", "on"}).flush_interval, 2ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--flush-interval", "auto"}).flush_interval, 20ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--flush-interval", "3ms"}).flush_interval, 3ms);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--flush-interval", "automatic"}).find("--flush-interval"),
            std::string::npos);
}

// --follow and its two bounds (issue 32): following needs ack=filter and the filter; --follow-max-lag 10ms..60s;
// --max-commit-lag 0 (unbounded) or 10ms..60s, 1s by default.
TEST(Config, FollowAndItsBounds) {
  const char* j = "--journal-dir=/tmp/j";
  const Config d = ParseOk({"--database-url", kUrl, "--ack", "filter", j});
  EXPECT_TRUE(d.following());
  EXPECT_EQ(d.follow_max_lag, 1000ms);
  EXPECT_EQ(d.max_commit_lag, 1000ms);
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "commit"}).following());
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--follow", "off"}).following());
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--filter", "off"}).following());
  EXPECT_EQ(d.follow_method, scangate::storage::FollowMethod::kPoll);  // on = poll
  const Config poll = ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--follow", "poll"});
  EXPECT_TRUE(poll.following());
  EXPECT_EQ(poll.follow_method, scangate::storage::FollowMethod::kPoll);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--follow", "logical"}).follow_method,
            scangate::storage::FollowMethod::kLogical);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--follow", "sometimes"}).find("--follow: expected on, off, logical or poll"),
            std::string::npos);
  // --ack=commit follows only when poll is named (the recent set learns other instances' keys); on is its default.
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "commit"}).following());
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "commit", "--follow", "off"}).following());
  const Config commit_poll = ParseOk({"--database-url", kUrl, "--ack", "commit", "--follow", "poll"});
  EXPECT_TRUE(commit_poll.following());
  EXPECT_TRUE(commit_poll.follow_commit);
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "commit", "--follow", "on"}).follow_commit);
  EXPECT_FALSE(d.follow_commit);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--ack", "commit", "--follow", "logical"}).find("only poll"),
            std::string::npos);
  const Config set = ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--follow-max-lag", "250ms",
                              "--max-commit-lag", "2s"});
  EXPECT_EQ(set.follow_max_lag, 250ms);
  EXPECT_EQ(set.max_commit_lag, 2000ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--max-commit-lag", "0"}).max_commit_lag, 0ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--ack", "filter", j, "--max-commit-lag", "0ms"}).max_commit_lag, 0ms);
  for (const char* bad : {"5ms", "61s", "1m", "soon"}) {
    EXPECT_NE(ParseError({"--database-url", kUrl, "--max-commit-lag", bad}).find("--max-commit-lag"), std::string::npos)
        << bad;
  }
  for (const char* bad : {"0", "0ms", "5ms", "61s"}) {
    EXPECT_NE(ParseError({"--database-url", kUrl, "--follow-max-lag", bad}).find("--follow-max-lag"), std::string::npos)
        << bad;
  }
}

// The peers' settings (issue 42): --peer-wait 0..10m (1 s by default); --retire-instance a UUID (a command) or
// nothing; W = --max-commit-lag + --follow-max-lag; a journal owner publishes, --ack=commit and --journal=off do not.
TEST(Config, Peers) {
  using namespace std::chrono_literals;
  const Config d = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(d.peer_wait, 1000ms);
  EXPECT_TRUE(d.retire_instance.empty());
  EXPECT_EQ(d.peer_window(), 2000ms);
  EXPECT_FALSE(d.publishes_watermark());
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--peer-wait", "0"}).peer_wait, 0ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--peer-wait", "250ms"}).peer_wait, 250ms);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--peer-wait", "11m"}).find("--peer-wait"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--peer-wait", "soon"}).find("peer-wait"), std::string::npos);
  const std::string id = "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b";
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--retire-instance", id}).retire_instance, id);
  for (const char* bad : {"1b4e28ba", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633", "1b4e28ba_2fa1-4d3b-a3f5-ef19b5a7633b",
                          "zb4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b"}) {
    EXPECT_NE(ParseError({"--database-url", kUrl, "--retire-instance", bad}).find("--retire-instance"),
              std::string::npos)
        << bad;
  }
  const Config f = ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal-dir", "/tmp/j", "--max-commit-lag",
                            "300ms", "--follow-max-lag", "200ms"});
  EXPECT_EQ(f.peer_window(), 500ms);
  EXPECT_TRUE(f.publishes_watermark());
  EXPECT_FALSE(ParseOk({"--database-url", kUrl, "--ack", "filter", "--journal", "off"}).publishes_watermark());
}

// Every option parses from the command line, both "--x v" and "--x=v".
TEST(Config, CommandLine) {
  Config c = ParseOk({"--database-url=" + std::string(kUrl), "--listen", "127.0.0.1", "--port", "0", "--threads", "3",
                      "--capacity", "5000", "--fp-target", "0.001", "--window", "15m", "--shards", "8", "--ack",
                      "filter", "--writers", "4", "--batch-limit", "64", "--flush-interval", "500us",
                      "--queue-limit", "100", "--filter", "off", "--access-log=on", "--port-file", "/tmp/p",
                      "--recent-keys", "0", "--journal-dir", "/srv/journal"});
  EXPECT_EQ(c.journal_dir, "/srv/journal");
  EXPECT_EQ(c.listen, "127.0.0.1");
  EXPECT_EQ(c.port, 0);
  EXPECT_EQ(c.threads, 3u);
  EXPECT_EQ(c.capacity, 5000u);
  EXPECT_DOUBLE_EQ(c.fp_target, 0.001);
  EXPECT_EQ(c.window, 15min);
  EXPECT_EQ(c.shards, 8u);
  EXPECT_EQ(c.ack, AckMode::kFilter);
  EXPECT_EQ(c.writers, 4u);
  EXPECT_EQ(c.batch_limit, 64u);
  EXPECT_EQ(c.flush_interval, 500us);
  EXPECT_EQ(c.queue_limit, 100u);
  EXPECT_FALSE(c.filter);
  EXPECT_EQ(c.recent_keys, 0u);
  EXPECT_TRUE(c.access_log);
  EXPECT_EQ(c.port_file, "/tmp/p");
}

// --keys (raw by default, gs1) and --expiry-grace (365d by default, at most 2192d); Describe() names them.
TEST(Config, KeysAndExpiryGrace) {
  Config c = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(c.keys, KeysMode::kRaw);
  EXPECT_EQ(c.expiry_grace, 365 * 24h);
  EXPECT_EQ(Describe(c).at("keys"), "raw");
  c = ParseOk({"--database-url", kUrl, "--keys", "gs1", "--expiry-grace", "30d"});
  EXPECT_EQ(c.keys, KeysMode::kGs1);
  EXPECT_EQ(c.expiry_grace, 30 * 24h);
  EXPECT_EQ(Describe(c).at("expiry_grace_seconds").to_number<std::int64_t>(), 30 * 86400);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--keys", "gs1", "--expiry-grace", "0s"}).expiry_grace, 0s);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--keys", "ean"}).find("--keys"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--expiry-grace", "2193d"}).find("2192d"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--expiry-grace", "1y"}).find("expiry-grace"), std::string::npos);
}

// --epoch-keys (0 = off, the default) and --epoch-max-age (off by default; at least a minute); Describe() names them.
TEST(Config, EpochBounds) {
  Config c = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(c.epoch_keys, 0u);
  EXPECT_EQ(c.epoch_max_age, 0s);
  c = ParseOk({"--database-url", kUrl, "--epoch-keys", "2000000", "--epoch-max-age", "1d"});
  EXPECT_EQ(c.epoch_keys, 2'000'000u);
  EXPECT_EQ(c.epoch_max_age, 24h);
  EXPECT_EQ(Describe(c).at("epoch_keys").to_number<std::uint64_t>(), 2'000'000u);
  EXPECT_EQ(Describe(c).at("epoch_max_age_seconds").to_number<std::int64_t>(), 86400);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--epoch-max-age", "off"}).epoch_max_age, 0s);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--epoch-max-age", "30s"}).find("at least 60s"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--epoch-keys", "-1"}).find("epoch-keys"), std::string::npos);
}

// --partitions (issue 23): off by default; with it --database-url is optional (the proxy's URL stands in, for
// the journal's identity only), the cluster name and the map's poll period are checked, and Describe() redacts the
// proxy URL's password like the database's.
TEST(Config, Partitions) {
  Config c = ParseOk({"--database-url", kUrl});
  EXPECT_FALSE(c.partitioned());
  EXPECT_EQ(c.partition_cluster, "scangate");
  EXPECT_EQ(c.partition_map_poll, 5s);
  EXPECT_FALSE(Describe(c).contains("partition_cluster"));
  const std::string proxy = "postgresql://sg:hunter2@10.0.0.5:6432/scangate_proxy";
  c = ParseOk({"--partitions", proxy, "--partition-cluster", "pos", "--partition-map-poll", "500ms"});
  EXPECT_TRUE(c.partitioned());
  EXPECT_EQ(c.partitions_url, proxy);
  EXPECT_EQ(c.database_url, proxy);
  EXPECT_EQ(c.partition_cluster, "pos");
  EXPECT_EQ(c.partition_map_poll, 500ms);
  EXPECT_EQ(c.writers, kPartitionWriters);  // per partition, 1 unless given
  EXPECT_EQ(ParseOk({"--partitions", proxy, "--writers", "3"}).writers, 3u);
  const auto d = Describe(c);
  EXPECT_EQ(d.at("partition_cluster"), "pos");
  EXPECT_EQ(boost::json::serialize(d).find("hunter2"), std::string::npos);
  EXPECT_NE(ParseError({"--partitions", proxy, "--partition-map-poll", "50ms"}).find("partition-map-poll"),
            std::string::npos);
  EXPECT_NE(ParseError({"--partitions", proxy, "--partition-cluster", ""}).find("partition-cluster"),
            std::string::npos);
  EXPECT_NE(ParseError({"--partitions", "dbname='unterminated"}).find("--partitions"), std::string::npos);
  EXPECT_NE(ParseError({}).find("--database-url"), std::string::npos);
}

// --window and --retention (the de-duplication horizon) default to each other: neither -> 24h both; one
// alone -> the other follows it; off -> no horizon (0), the window its own; both -> window >= retention, a
// shorter window refused with a message naming both flags; Describe() carries retention_seconds.
TEST(Config, RetentionAndWindow) {
  struct Case {
    std::vector<std::string> args;
    std::chrono::seconds window, retention;
  };
  const std::vector<Case> cases = {
      {{}, 24h, 24h},
      {{"--window", "2h"}, 2h, 2h},
      {{"--retention", "30d"}, 30 * 24h, 30 * 24h},
      {{"--retention", "90s"}, 90s, 90s},
      {{"--retention", "off"}, 24h, 0s},
      {{"--retention", "off", "--window", "2h"}, 2h, 0s},
      {{"--window", "2h", "--retention", "2h"}, 2h, 2h},
      {{"--window", "7d", "--retention", "1h"}, 7 * 24h, 1h},
      {{"--retention", "window", "--window", "3h"}, 3h, 3h},
  };
  for (const auto& [args, window, retention] : cases) {
    std::vector<std::string> full = {"--database-url", kUrl};
    full.insert(full.end(), args.begin(), args.end());
    SCOPED_TRACE(testing::PrintToString(args));
    const Config c = ParseOk(full);
    EXPECT_EQ(c.window, window);
    EXPECT_EQ(c.retention, retention);
    EXPECT_EQ(Describe(c).at("retention_seconds").to_number<std::int64_t>(), retention.count());
    EXPECT_EQ(Describe(c).at("window_seconds").to_number<std::int64_t>(), window.count());
  }
  for (const auto& args : {std::vector<std::string>{"--window", "1h", "--retention", "2h"},
                           std::vector<std::string>{"--retention", "2d", "--window", "47h"}}) {
    std::vector<std::string> full = {"--database-url", kUrl};
    full.insert(full.end(), args.begin(), args.end());
    const std::string err = ParseError(full);
    EXPECT_NE(err.find("--window"), std::string::npos) << err;
    EXPECT_NE(err.find("--retention"), std::string::npos) << err;
  }
}

// SCANGATE_RETENTION sets the horizon like the flag: alone the window follows it; with SCANGATE_WINDOW shorter
// it is refused; the command line wins over it.
TEST(Config, RetentionFromEnvironment) {
  ScopedEnv url("SCANGATE_DATABASE_URL", kUrl);
  {
    ScopedEnv retention("SCANGATE_RETENTION", "3d");
    Config c = ParseOk({});
    EXPECT_EQ(c.retention, 3 * 24h);
    EXPECT_EQ(c.window, 3 * 24h);
    c = ParseOk({"--retention", "off"});
    EXPECT_EQ(c.retention, 0s);
    EXPECT_EQ(c.window, 24h);
    ScopedEnv window("SCANGATE_WINDOW", "1d");
    const std::string err = ParseError({});
    EXPECT_NE(err.find("--window"), std::string::npos) << err;
    EXPECT_NE(err.find("--retention"), std::string::npos) << err;
  }
  ScopedEnv off("SCANGATE_RETENTION", "off");
  const Config c = ParseOk({});
  EXPECT_EQ(c.retention, 0s);
  EXPECT_EQ(c.window, 24h);
}

// SCANGATE_<NAME> sets an option; the command line wins over the environment; unrelated SCANGATE_* ignored.
TEST(Config, EnvironmentOverride) {
  ScopedEnv url("SCANGATE_DATABASE_URL", kUrl);
  ScopedEnv port("SCANGATE_PORT", "9999");
  ScopedEnv window("SCANGATE_WINDOW", "7d");
  ScopedEnv flush("SCANGATE_FLUSH_INTERVAL", "1ms");
  ScopedEnv unrelated("SCANGATE_TEST_PG_DIR", "/tmp/x");
  ScopedEnv help("SCANGATE_HELP", "1");
  ScopedEnv version("SCANGATE_VERSION", "1");  // --version, like --help, is a command-line word only
  Config c = ParseOk({});
  EXPECT_EQ(c.database_url, kUrl);
  EXPECT_EQ(c.port, 9999);
  EXPECT_EQ(c.window, 7 * 24h);
  EXPECT_EQ(c.flush_interval, 1ms);
  c = ParseOk({"--port", "1234"});
  EXPECT_EQ(c.port, 1234);
  EXPECT_EQ(c.window, 7 * 24h);
  ScopedEnv bad("SCANGATE_ACK", "maybe");
  EXPECT_NE(ParseError({}).find("--ack"), std::string::npos);
}

// --shards is bounded by the filter's own limit (core/filter_geometry.h kMaxShards), so a value the filter would refuse
// at start-up is rejected by validation with a message naming the option and the range.
TEST(Config, ShardsAboveFilterLimitRejected) {
  static_assert(kMaxShards == 4096, "update the expected message below");
  const std::string err = ParseError({"--database-url", kUrl, "--shards", "8192"});
  EXPECT_NE(err.find("--shards"), std::string::npos) << err;
  EXPECT_NE(err.find("1..4096"), std::string::npos) << err;
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--shards", "4096"}).shards, kMaxShards);
  FilterOptions o;
  o.shards = ParseOk({"--database-url", kUrl, "--shards", "4096"}).shards;
  EXPECT_NO_THROW(FilterGeometry::For(o));  // every accepted value is one the filter takes
}

// Invalid values are rejected with a message naming the option.
TEST(Config, InvalidValues) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--listen", "localhost:80"}, "--listen"},
      {{"--listen", ""}, "--listen"},
      {{"--port", "65536"}, "--port"},
      {{"--port", "-1"}, "--port"},
      {{"--port", "80x"}, "--port"},
      {{"--threads", "100000"}, "--threads"},
      {{"--capacity", "0"}, "--capacity"},
      {{"--fp-target", "0"}, "--fp-target"},
      {{"--fp-target", "0.5"}, "--fp-target"},
      {{"--fp-target", "abc"}, "--fp-target"},
      {{"--window", "0s"}, "--window"},
      {{"--window", "10ms"}, "--window"},
      {{"--retention", "0s"}, "--retention"},
      {{"--retention", "10ms"}, "--retention"},
      {{"--retention", "garbage"}, "--retention"},
      {{"--retention", "-1d"}, "--retention"},
      {{"--retention", "OFF"}, "--retention"},
      {{"--retention", "36526d"}, "--retention"},
      {{"--shards", "3"}, "--shards"},
      {{"--shards", "0"}, "--shards"},
      {{"--ack", "sometimes"}, "--ack"},
      {{"--writers", "0"}, "--writers"},
      {{"--batch-limit", "0"}, "--batch-limit"},
      {{"--flush-interval", "0us"}, "--flush-interval"},
      {{"--flush-interval", "1m"}, "--flush-interval"},
      {{"--flush-interval", "11s"}, "--flush-interval"},
      {{"--queue-limit", "0"}, "--queue-limit"},
      {{"--filter", "yes"}, "--filter"},
      {{"--recent-keys", "-1"}, "--recent-keys"},
      {{"--recent-keys", "1000000001"}, "--recent-keys"},
      {{"--access-log", "1"}, "--access-log"},
      {{"--digest-secret-file", "/nonexistent/secret"}, "--digest-secret-file"},
      {{"--no-such-option", "1"}, "no-such-option"},
  };
  for (const auto& [args, option] : cases) {
    std::vector<std::string> full = {"--database-url", kUrl};
    full.insert(full.end(), args.begin(), args.end());
    const std::string err = ParseError(full);
    EXPECT_NE(err.find(option), std::string::npos) << args[0] << " " << args[1] << ": " << err;
  }
}

// --help returns the option list instead of a config: every option, under its topic group, groups in order.
TEST(Config, Help) {
  ParseOutcome o = Parse({"--help"});
  EXPECT_FALSE(o.config.has_value());
  EXPECT_NE(o.help.find("SCANGATE_"), std::string::npos);
  EXPECT_EQ(o.help.rfind(VersionLine(), 0), 0u) << o.help;
  const std::vector<std::pair<std::string, std::vector<std::string>>> groups = {
      {"Listening", {"listen", "port", "threads", "port-file", "max-connections-per-address", "ipv6-prefix-length",
                     "max-body-bytes-in-flight", "admin-listen", "admin-max-connections-per-address",
                     "admin-idle-timeout"}},
      {"PostgreSQL", {"database-url", "writers", "batch-limit", "queue-limit", "queue-wait", "request-timeout"}},
      {"Filter", {"capacity", "fp-target", "window", "retention", "shards", "filter", "recent-keys"}},
      {"Acknowledgement", {"ack", "flush-interval", "journal", "journal-dir", "journal-max-bytes", "follow", "follow-max-lag",
                           "max-commit-lag", "peer-wait", "retire-instance"}},
      {"Security", {"tls-cert", "tls-key", "admin-tls", "tls-client-ca", "tls-crl", "tls-client-routes", "tokens-file", "rate-limit", "rate-burst", "cors-origins", "allowed-hosts",
                    "proxy-protocol-from", "insecure", "digest-secret-file", "digest-secret-previous-file"}},
      {"Operations", {"access-log", "help", "version"}},
  };
  std::size_t previous = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& [caption, options] = groups[g];
    const std::size_t at = o.help.find("\n" + caption + ":\n");
    ASSERT_NE(at, std::string::npos) << caption << " missing:\n" << o.help;
    EXPECT_GT(at, previous) << caption << " out of order";
    previous = at;
    const std::size_t next = g + 1 < groups.size() ? o.help.find("\n" + groups[g + 1].first + ":\n") : o.help.size();
    for (const std::string& option : options) {
      const std::size_t pos = o.help.find("--" + option + " ", at);
      EXPECT_TRUE(pos != std::string::npos && pos < next) << "--" << option << " not under " << caption;
    }
  }
}

// --version prints one line, "scangate <project version> (commit <hex or unknown>[, <build type>])", instead of
// a config, whatever else is given.
TEST(Config, Version) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--version"},
                                               std::vector<std::string>{"--database-url", kUrl, "--version"}}) {
    ParseOutcome o = Parse(args);
    EXPECT_FALSE(o.config.has_value());
    EXPECT_EQ(o.help, VersionLine() + "\n");
  }
  EXPECT_FALSE(ProjectVersion().empty());
  EXPECT_EQ(VersionLine().rfind("scangate " + std::string(ProjectVersion()) + " (commit ", 0), 0u) << VersionLine();
  EXPECT_FALSE(GitCommit().empty());
  // The start-up log line names the build too.
  EXPECT_NE(boost::json::serialize(Describe(ParseOk({"--database-url", kUrl}))).find(VersionLine()),
            std::string::npos);
}

// The secret file's bytes minus one trailing newline key the digest; an empty file is rejected; the
// description says only that a secret is set.
TEST(Config, SecretFileAndRedaction) {
  const std::string path = ::testing::TempDir() + "/scangate_config_test_secret";
  {
    std::ofstream(path, std::ios::binary) << "s3cr3t-value\n";
  }
  Config c = ParseOk({"--database-url", "postgresql://app:hunter2@db:5432/scangate?sslmode=require",
                      "--digest-secret-file", path});
  EXPECT_EQ(c.digest_secret, "s3cr3t-value");
  const std::string described = boost::json::serialize(Describe(c));
  EXPECT_EQ(described.find("s3cr3t"), std::string::npos) << described;
  EXPECT_EQ(described.find("hunter2"), std::string::npos) << described;
  EXPECT_NE(described.find("\"digest_secret\":\"set\""), std::string::npos) << described;
  {
    std::ofstream(path, std::ios::binary) << "\n";
  }
  EXPECT_NE(ParseError({"--database-url", kUrl, "--digest-secret-file", path}).find("empty"), std::string::npos);
  std::remove(path.c_str());
}

// --digest-secret-previous-file (issue 55): read like the secret file, or "none" (the database used plain SHA-256);
// the same secret as --digest-secret-file is refused; the description says only set / none / unset.
TEST(Config, PreviousSecretFile) {
  const std::string cur = ::testing::TempDir() + "/scangate_config_test_secret_cur";
  const std::string prev = ::testing::TempDir() + "/scangate_config_test_secret_prev";
  std::ofstream(cur, std::ios::binary) << "new-s3cr3t\n";
  std::ofstream(prev, std::ios::binary) << "old-s3cr3t\n";
  Config c = ParseOk({"--database-url", kUrl, "--digest-secret-file", cur, "--digest-secret-previous-file", prev});
  EXPECT_TRUE(c.digest_rotating());
  EXPECT_EQ(c.digest_secret_previous, "old-s3cr3t");
  const std::string described = boost::json::serialize(Describe(c));
  EXPECT_EQ(described.find("s3cr3t"), std::string::npos) << described;
  EXPECT_NE(described.find("\"digest_secret_previous\":\"set\""), std::string::npos) << described;
  Config none = ParseOk({"--database-url", kUrl, "--digest-secret-file", cur, "--digest-secret-previous-file", "none"});
  EXPECT_TRUE(none.digest_rotating());
  EXPECT_EQ(none.digest_secret_previous, "");
  EXPECT_NE(boost::json::serialize(Describe(none)).find("\"digest_secret_previous\":\"none\""), std::string::npos);
  EXPECT_FALSE(ParseOk({"--database-url", kUrl}).digest_rotating());
  EXPECT_NE(ParseError({"--database-url", kUrl, "--digest-secret-file", cur, "--digest-secret-previous-file", cur})
                .find("the same secret"),
            std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--digest-secret-previous-file", "none"}).find("the same secret"),
            std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--digest-secret-previous-file", "/nonexistent/prev"})
                .find("--digest-secret-previous-file"),
            std::string::npos);
  std::remove(cur.c_str());
  std::remove(prev.c_str());
}

// --tokens-file: terminals and routes are read at start-up; a bad line names the file and line, never the
// hash; the description says how many tokens, never which.
TEST(Config, TokensFileTerminals) {
  const std::string path = ::testing::TempDir() + "/scangate_config_test_tokens";
  const std::string hex(64, 'a');
  {
    std::ofstream(path, std::ios::binary) << "# tills\n" << hex << " till-01 observe,batch\n" << std::string(64, 'b') << "\n";
  }
  Config c = ParseOk({"--database-url", kUrl, "--tokens-file", path});
  ASSERT_EQ(c.terminals.size(), 2u);
  EXPECT_EQ(c.terminals[0].id, "till-01");
  EXPECT_EQ(c.terminals[0].routes, kRouteBitObserve | kRouteBitBatch);
  EXPECT_EQ(c.terminals[1].id, std::string(12, 'b'));
  EXPECT_EQ(c.terminals[1].routes, kRouteBitObserve);
  const std::string described = boost::json::serialize(Describe(c));
  EXPECT_EQ(described.find(hex), std::string::npos) << described;
  EXPECT_EQ(described.find("till-01"), std::string::npos) << described;
  EXPECT_NE(described.find("\"tokens\":2"), std::string::npos) << described;
  {
    std::ofstream(path, std::ios::binary) << hex << " till/01\n";
  }
  const std::string err = ParseError({"--database-url", kUrl, "--tokens-file", path});
  EXPECT_NE(err.find("--tokens-file: '" + path + "' line 1:"), std::string::npos) << err;
  EXPECT_EQ(err.find(hex.substr(0, 12)), std::string::npos) << err;
  std::remove(path.c_str());
  EXPECT_NE(ParseError({"--database-url", kUrl, "--tokens-file", path}).find("cannot read"), std::string::npos);
}

// Issue 33: --max-body-bytes-in-flight (64 MiB by default, 0 = no limit), flag or environment, in Describe.
TEST(Config, MaxBodyBytesInFlight) {
  EXPECT_EQ(ParseOk({"--database-url", kUrl}).max_body_bytes_in_flight, 64u * 1024 * 1024);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--max-body-bytes-in-flight=4096"}).max_body_bytes_in_flight, 4096u);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--max-body-bytes-in-flight=0"}).max_body_bytes_in_flight, 0u);
  {
    ScopedEnv env("SCANGATE_MAX_BODY_BYTES_IN_FLIGHT", "1000000");
    EXPECT_EQ(ParseOk({"--database-url", kUrl}).max_body_bytes_in_flight, 1'000'000u);
  }
  const std::string described =
      boost::json::serialize(Describe(ParseOk({"--database-url", kUrl, "--max-body-bytes-in-flight=8192"})));
  EXPECT_NE(described.find("\"max_body_bytes_in_flight\":8192"), std::string::npos) << described;
  EXPECT_NE(ParseError({"--database-url", kUrl, "--max-body-bytes-in-flight", "-1"}).find("--max-body-bytes-in-flight"),
            std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--max-body-bytes-in-flight", "64M"}).find("--max-body-bytes-in-flight"),
            std::string::npos);
}

// Issue 43: --ipv6-prefix-length (128, 32..128), --admin-max-connections-per-address (16, 0 = no limit) and
// --admin-idle-timeout (5s, 100ms..10m), flag or environment, in Describe.
TEST(Config, PerAddressLimits) {
  const Config d = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(d.ipv6_prefix_length, 128u);
  EXPECT_EQ(d.admin_max_connections_per_address, 16u);
  EXPECT_EQ(d.admin_idle_timeout, 5s);
  const Config c = ParseOk({"--database-url", kUrl, "--ipv6-prefix-length=64", "--admin-max-connections-per-address=0",
                            "--admin-idle-timeout=1500ms"});
  EXPECT_EQ(c.ipv6_prefix_length, 64u);
  EXPECT_EQ(c.admin_max_connections_per_address, 0u);
  EXPECT_EQ(c.admin_idle_timeout, 1500ms);
  {
    ScopedEnv env("SCANGATE_ADMIN_IDLE_TIMEOUT", "30s");
    EXPECT_EQ(ParseOk({"--database-url", kUrl}).admin_idle_timeout, 30s);
  }
  const std::string described = boost::json::serialize(Describe(c));
  EXPECT_NE(described.find("\"ipv6_prefix_length\":64"), std::string::npos) << described;
  EXPECT_NE(described.find("\"admin_idle_timeout_ms\":1500"), std::string::npos) << described;
  for (const char* bad : {"--ipv6-prefix-length=31", "--ipv6-prefix-length=129", "--admin-idle-timeout=50ms",
                          "--admin-idle-timeout=11m", "--admin-idle-timeout=5", "--admin-max-connections-per-address=-1"}) {
    const std::string flag = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(ParseError({"--database-url", kUrl, bad}).find(flag), std::string::npos) << bad;
  }
}

// --rate-limit (0 = off) and --rate-burst (default: the rate), from the command line or the environment.
TEST(Config, RateLimit) {
  Config c = ParseOk({"--database-url", kUrl, "--rate-limit", "5"});
  EXPECT_EQ(c.rate_limit, 5u);
  EXPECT_EQ(c.rate_burst, 5u);
  c = ParseOk({"--database-url", kUrl, "--rate-limit=20", "--rate-burst=50"});
  EXPECT_EQ(c.rate_limit, 20u);
  EXPECT_EQ(c.rate_burst, 50u);
  {
    ScopedEnv env("SCANGATE_RATE_LIMIT", "7");
    c = ParseOk({"--database-url", kUrl});
    EXPECT_EQ(c.rate_limit, 7u);
    EXPECT_EQ(c.rate_burst, 7u);
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--rate-limit", "3"}).rate_limit, 3u);  // the command line wins
  }
  c = ParseOk({"--database-url", kUrl, "--rate-limit", "0"});
  EXPECT_EQ(c.rate_limit, 0u);
  EXPECT_EQ(c.rate_burst, 0u);
  const std::string described = boost::json::serialize(Describe(ParseOk({"--database-url", kUrl, "--rate-limit", "9"})));
  EXPECT_NE(described.find("\"rate_limit\":9"), std::string::npos) << described;
  EXPECT_NE(ParseError({"--database-url", kUrl, "--rate-limit", "-1"}).find("--rate-limit"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--rate-limit", "1.5"}).find("--rate-limit"), std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--rate-limit", "5", "--rate-burst", "0"}).find("--rate-burst"),
            std::string::npos);
  EXPECT_NE(ParseError({"--database-url", kUrl, "--rate-burst", "5"}).find("needs --rate-limit"), std::string::npos);
}

// Passwords are redacted by libpq's own parser (PQconninfoParse) in URI, query and keyword/value forms;
// the other options stay, rendered as keyword=value.
TEST(Config, RedactDatabaseUrl) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://app:hunter2@db:5432/scangate"),
            "user=app password=*** dbname=scangate host=db port=5432");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://postgres@127.0.0.1:5544/scangate?connect_timeout=3"),
            "user=postgres connect_timeout=3 dbname=scangate host=127.0.0.1 port=5544");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db/scangate?user=a&password=hunter2&sslmode=require"),
            "user=a password=*** dbname=scangate host=db sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("host=db password=hunter2 dbname=x"), "password=*** dbname=x host=db");
}

// Forms the former hand-written redaction leaked: spaces around '=', a quoted value with a space, a
// %-escaped URI password, sslpassword; none of the secret's characters may survive.
TEST(Config, RedactDatabaseUrlNeverLeaks) {
  const struct {
    const char* url;
    const char* secret;
  } cases[] = {
      {"host=db password = hunter2 dbname=x", "hunter2"},
      {"host=db password='a b' dbname=x", "b'"},
      {"host=db password='a b' dbname=x", "a b"},
      {"host=db  password =\t'a\\'b c' user=app", "b c"},
      {"postgresql://app:hun%74er2@db/scangate", "hunter2"},
      {"postgresql://app:hun%74er2@db/scangate", "hun%74er2"},
      {"postgres://db/x?password=p%20w&user=u", "p w"},
      {"host=db sslpassword=keypass sslkey=/k.pem", "keypass"},
      {"postgresql://db/x?sslpassword=keypass", "keypass"},
  };
  for (const auto& c : cases) {
    const std::string r = RedactDatabaseUrl(c.url);
    EXPECT_EQ(r.find(c.secret), std::string::npos) << c.url << " -> " << r;
    EXPECT_NE(r.find("password=***"), std::string::npos) << c.url << " -> " << r;
  }
  // No password at all: nothing masked, options kept (passfile-free forms).
  EXPECT_EQ(RedactDatabaseUrl("host=/run/postgresql dbname=scangate user=app"),
            "user=app dbname=scangate host=/run/postgresql");
  EXPECT_EQ(RedactDatabaseUrl("postgresql:///scangate"), "dbname=scangate");
  // Quoted values with spaces are rendered quoted, so the line still reads as one conninfo.
  EXPECT_EQ(RedactDatabaseUrl("host=db application_name='till gate'"), "host=db application_name='till gate'");
}

// A string libpq cannot parse is logged as "<unparsable>", nothing of its content; ParseConfig rejects it
// (exit 2) without echoing it either.
TEST(Config, UnparsableDatabaseUrl) {
  for (const char* bad : {"host=db password hunter2", "host=db hunter2=1", "postgresql://db/x?hunter2=1",
                          "postgresql://%zzhunter2@db/x", "host='hunter2"}) {
    EXPECT_EQ(RedactDatabaseUrl(bad), "<unparsable>") << bad;
    const std::string e = ParseError({"--database-url", bad});
    EXPECT_NE(e.find("--database-url"), std::string::npos) << e;
    EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  }
}

// The configuration line of a keyword/value URL with spaces around '=' carries no password.
TEST(Config, DescribeRedactsKeywordForm) {
  Config c = ParseOk({"--database-url", "host=db password = hunter2 dbname=x"});
  const std::string described = boost::json::serialize(Describe(c));
  EXPECT_EQ(described.find("hunter2"), std::string::npos) << described;
}

// --request-timeout: default 5 s, duration syntax ms/s/m, bounded to 100ms..10m, env equivalent.
TEST(Config, RequestTimeout) {
  EXPECT_EQ(ParseOk({"--database-url", kUrl}).request_timeout, 5s);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--request-timeout", "250ms"}).request_timeout, 250ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--request-timeout=2m"}).request_timeout, 2min);
  {
    ScopedEnv env("SCANGATE_REQUEST_TIMEOUT", "3s");
    EXPECT_EQ(ParseOk({"--database-url", kUrl}).request_timeout, 3s);
    EXPECT_EQ(ParseOk({"--database-url", kUrl, "--request-timeout", "7s"}).request_timeout, 7s);
  }
  for (const char* bad : {"0s", "99ms", "11m", "5", "5us", "1h", "-1s", "1.5s"}) {
    EXPECT_NE(ParseError({"--database-url", kUrl, "--request-timeout", bad}).find("--request-timeout"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(Parse({"--help"}).help.find("--request-timeout"), std::string::npos);
  EXPECT_NE(boost::json::serialize(Describe(ParseOk({"--database-url", kUrl}))).find("\"recent_keys\":1048576"),
            std::string::npos);
  EXPECT_NE(boost::json::serialize(Describe(ParseOk({"--database-url", kUrl}))).find("\"request_timeout_ms\":5000"),
            std::string::npos);
}

}  // namespace
}  // namespace scangate::server

namespace scangate::server {
namespace {

// --cors-origins / SCANGATE_CORS_ORIGINS: comma-separated exact origins, lower-cased; default none.
TEST(Config, CorsOrigins) {
  const std::string url = std::string("--database-url=") + kUrl;
  EXPECT_TRUE(ParseOk({url}).cors_origins.empty());
  Config c = ParseOk({url, "--cors-origins", " HTTPS://Pos.Example.com , http://127.0.0.1:3000,"});
  EXPECT_EQ(c.cors_origins, (std::vector<std::string>{"https://pos.example.com", "http://127.0.0.1:3000"}));
  EXPECT_EQ(Describe(c).at("cors_origins").as_array().size(), 2u);
  {
    ScopedEnv env("SCANGATE_CORS_ORIGINS", "http://a.test:8080");
    EXPECT_EQ(ParseOk({url}).cors_origins, std::vector<std::string>{"http://a.test:8080"});
  }
  for (const char* bad : {"*", "pos.example.com", "https://pos.example.com/", "ftp://x", "https://", "http://a b",
                          "https://u@host"}) {
    EXPECT_NE(ParseError({url, std::string("--cors-origins=") + bad}).find("--cors-origins"), std::string::npos) << bad;
  }
}

// Protected mode (issue 33): --listen=auto is 0.0.0.0 only with both --tokens-file and --digest-secret-file (or
// --insecure), else 127.0.0.1; an explicit non-loopback address without both is refused naming the missing
// flags, unless --insecure (a bare flag, on|off, SCANGATE_INSECURE); loopback addresses are always allowed.
TEST(Config, ProtectedMode) {
  const std::string url = std::string("--database-url=") + kUrl;
  const std::string dir = ::testing::TempDir();
  const std::string tokens = dir + "/protected_tokens", secret = dir + "/protected_secret";
  std::ofstream(tokens) << std::string(64, 'a') << " till-1\n";
  std::ofstream(secret) << "a-secret\n";
  EXPECT_EQ(ParseOk({url, "--tokens-file=" + tokens, "--digest-secret-file=" + secret}).listen, "0.0.0.0");
  EXPECT_FALSE(ParseOk({url, "--tokens-file=" + tokens, "--digest-secret-file=" + secret}).protected_mode);
  EXPECT_EQ(ParseOk({url, "--tokens-file=" + tokens}).listen, "127.0.0.1");
  EXPECT_EQ(ParseOk({url, "--insecure"}).listen, "0.0.0.0");
  EXPECT_FALSE(ParseOk({url, "--insecure"}).protected_mode);
  EXPECT_EQ(ParseOk({url, "--listen=::1"}).listen, "::1");
  EXPECT_EQ(ParseOk({url, "--listen=127.0.0.2"}).listen, "127.0.0.2");
  std::string e = ParseError({url, "--listen=0.0.0.0"});
  EXPECT_NE(e.find("--tokens-file (or --tls-client-ca) and --digest-secret-file"), std::string::npos) << e;
  EXPECT_NE(e.find("--insecure"), std::string::npos) << e;
  e = ParseError({url, "--listen=10.0.0.5", "--tokens-file=" + tokens});
  EXPECT_NE(e.find("without --digest-secret-file"), std::string::npos) << e;
  e = ParseError({url, "--listen=::", "--digest-secret-file=" + secret});
  EXPECT_NE(e.find("without --tokens-file ("), std::string::npos) << e;
  EXPECT_EQ(ParseOk({url, "--listen=10.0.0.5", "--insecure=on"}).listen, "10.0.0.5");
  EXPECT_EQ(ParseOk({url, "--listen=10.0.0.5", "--tokens-file=" + tokens, "--digest-secret-file=" + secret}).listen,
            "10.0.0.5");
  {
    ScopedEnv env("SCANGATE_INSECURE", "on");
    EXPECT_EQ(ParseOk({url, "--listen=0.0.0.0"}).listen, "0.0.0.0");
  }
  EXPECT_NE(ParseError({url, "--insecure=maybe"}).find("--insecure"), std::string::npos);
  EXPECT_TRUE(Describe(ParseOk({url})).at("protected_mode").as_bool());
}

// --allowed-hosts / SCANGATE_ALLOWED_HOSTS: comma-separated Host values, lower-cased; default none (any Host).
TEST(Config, AllowedHosts) {
  const std::string url = std::string("--database-url=") + kUrl;
  EXPECT_TRUE(ParseOk({url}).allowed_hosts.empty());
  Config c = ParseOk({url, "--allowed-hosts", " POS-GW.shop.lan , 10.0.0.5:8080,[fd00::5],"});
  EXPECT_EQ(c.allowed_hosts, (std::vector<std::string>{"pos-gw.shop.lan", "10.0.0.5:8080", "[fd00::5]"}));
  EXPECT_EQ(Describe(c).at("allowed_hosts").as_array().size(), 3u);
  {
    ScopedEnv env("SCANGATE_ALLOWED_HOSTS", "a.test");
    EXPECT_EQ(ParseOk({url}).allowed_hosts, std::vector<std::string>{"a.test"});
  }
  for (const char* bad : {"*", "http://pos.example.com", "host/path", "u@host", ":8080", "a b"}) {
    EXPECT_NE(ParseError({url, std::string("--allowed-hosts=") + bad}).find("--allowed-hosts"), std::string::npos) << bad;
  }
}

// --queue-wait: default 1 s, 0 allowed (503 at once), duration syntax ms/s, at most 10 m, in Describe.
TEST(Config, QueueWait) {
  EXPECT_EQ(ParseOk({"--database-url", kUrl}).queue_wait, 1s);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--queue-wait", "0s"}).queue_wait, 0ms);
  EXPECT_EQ(ParseOk({"--database-url", kUrl, "--queue-wait=250ms"}).queue_wait, 250ms);
  {
    ScopedEnv env("SCANGATE_QUEUE_WAIT", "3s");
    EXPECT_EQ(ParseOk({"--database-url", kUrl}).queue_wait, 3s);
  }
  for (const char* bad : {"11m", "5", "5us", "1h", "-1s", "1.5s"}) {
    EXPECT_NE(ParseError({"--database-url", kUrl, "--queue-wait", bad}).find("--queue-wait"), std::string::npos)
        << bad;
  }
  EXPECT_NE(boost::json::serialize(Describe(ParseOk({"--database-url", kUrl}))).find("\"queue_wait_ms\":1000"),
            std::string::npos);
}

}  // namespace
}  // namespace scangate::server
