// Tests server/config.h: defaults, durations, environment mapping (command line wins), validation errors,
// secret-file handling and redaction of the start-up description.
#include "server/config.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>

#include "server/version.h"

namespace scangate::server {
namespace {
using namespace std::chrono_literals;

constexpr const char* kUrl = "postgresql://postgres@127.0.0.1:5544/scangate";

// Runs ParseConfig on argv {"scangate", args...}.
ParseOutcome Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"scangate"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseConfig(static_cast<int>(argv.size()), argv.data());
}
Config ParseOk(std::vector<std::string> args) {
  ParseOutcome o = Parse(std::move(args));
  EXPECT_TRUE(o.config.has_value());
  return o.config.value_or(Config{});
}
// The ConfigError message of a rejected command line ("" if accepted).
std::string ParseError(std::vector<std::string> args) {
  try {
    Parse(std::move(args));
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// Sets an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

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
  EXPECT_EQ(c.listen, "0.0.0.0");
  EXPECT_EQ(c.port, 8080);
  EXPECT_GE(c.threads, 1u);
  EXPECT_EQ(c.capacity, 10'000'000u);
  EXPECT_DOUBLE_EQ(c.fp_target, 0.01);
  EXPECT_EQ(c.window, 24h);
  EXPECT_EQ(c.shards, 64u);
  EXPECT_EQ(c.ack, AckMode::kCommit);
  EXPECT_EQ(c.writers, 2u);
  EXPECT_EQ(c.batch_limit, 1024u);
  EXPECT_EQ(c.flush_interval, 2ms);
  EXPECT_EQ(c.queue_limit, 65536u);
  EXPECT_TRUE(c.digest_secret.empty());
  EXPECT_TRUE(c.filter);
  EXPECT_FALSE(c.access_log);
  EXPECT_NE(ParseError({}).find("database-url"), std::string::npos);
}

// Every option parses from the command line, both "--x v" and "--x=v".
TEST(Config, CommandLine) {
  Config c = ParseOk({"--database-url=" + std::string(kUrl), "--listen", "127.0.0.1", "--port", "0", "--threads", "3",
                      "--capacity", "5000", "--fp-target", "0.001", "--window", "15m", "--shards", "8", "--ack",
                      "filter", "--writers", "4", "--batch-limit", "64", "--flush-interval", "500us",
                      "--queue-limit", "100", "--filter", "off", "--access-log=on", "--port-file", "/tmp/p"});
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
  EXPECT_TRUE(c.access_log);
  EXPECT_EQ(c.port_file, "/tmp/p");
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
      {"Listening", {"listen", "port", "threads", "port-file", "admin-listen"}},
      {"PostgreSQL", {"database-url", "writers", "batch-limit", "queue-limit"}},
      {"Filter", {"capacity", "fp-target", "window", "shards", "filter"}},
      {"Acknowledgement", {"ack", "flush-interval"}},
      {"Security", {"tls-cert", "tls-key", "tokens-file", "digest-secret-file"}},
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

// Passwords are redacted in URL, query and keyword/value forms; other parts stay.
TEST(Config, RedactDatabaseUrl) {
  EXPECT_EQ(RedactDatabaseUrl("postgresql://app:hunter2@db:5432/scangate"), "postgresql://app:***@db:5432/scangate");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://postgres@127.0.0.1:5544/scangate?connect_timeout=3"),
            "postgresql://postgres@127.0.0.1:5544/scangate?connect_timeout=3");
  EXPECT_EQ(RedactDatabaseUrl("postgresql://db/scangate?user=a&password=hunter2&sslmode=require"),
            "postgresql://db/scangate?user=a&password=***&sslmode=require");
  EXPECT_EQ(RedactDatabaseUrl("host=db password=hunter2 dbname=x"), "host=db password=*** dbname=x");
}

}  // namespace
}  // namespace scangate::server
