// Tests server/config/config_file.h through ParseConfig: file values apply, SCANGATE_* environment overrides the file
// and the command line overrides both, comments and blank lines, on/off options, errors (unknown key with file and
// line, bad line, unreadable file) that never quote a value, the password redacted, and deploy/scangate.conf
// naming every flag of --help with its default.
#include "server/config/config_file.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/json/serialize.hpp>

#include "server/config/config.h"
#include "tests/server/config/config_test_util.h"

namespace scangate::server {
namespace {
using namespace std::chrono_literals;

using test_support::kUrl;
using test_support::Parse;
using test_support::ParseError;
using test_support::ParseOk;
using test_support::ScopedEnv;

// A config file under the test's temp folder (one name per object), removed at the end of the test.
class TempConfig {
 public:
  explicit TempConfig(const std::string& text)
      : path_(::testing::TempDir() + "/scangate_config_file_test_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(++count_) +
              ".conf") {
    std::ofstream(path_, std::ios::binary) << text;
  }
  ~TempConfig() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int count_ = 0;
  std::string path_;
};

// Values in the file apply; options it does not name keep their defaults.
TEST(ConfigFile, ValuesApply) {
  TempConfig f("database-url = " + std::string(kUrl) + "\nport = 9191\nshards = 128\nrequest-timeout = 2s\n");
  const Config c = ParseOk({"--config", f.path()});
  EXPECT_EQ(c.database_url, kUrl);
  EXPECT_EQ(c.port, 9191);
  EXPECT_EQ(c.shards, 128u);
  EXPECT_EQ(c.request_timeout, 2s);
  EXPECT_EQ(c.capacity, Config{}.capacity);
  EXPECT_EQ(c.config_file, f.path());
}

// Precedence: command line > SCANGATE_* environment > file > defaults, per option.
TEST(ConfigFile, EnvironmentThenCommandLineOverride) {
  TempConfig f("database-url = " + std::string(kUrl) + "\nport = 9191\nwriters = 3\nbatch-limit = 77\n");
  {
    ScopedEnv port("SCANGATE_PORT", "9292");
    ScopedEnv writers("SCANGATE_WRITERS", "5");
    const Config c = ParseOk({"--config", f.path(), "--writers", "7"});
    EXPECT_EQ(c.port, 9292);        // environment over file
    EXPECT_EQ(c.writers, 7u);       // command line over environment and file
    EXPECT_EQ(c.batch_limit, 77u);  // file over default
  }
  EXPECT_EQ(ParseOk({"--config", f.path()}).port, 9191);
}

// SCANGATE_CONFIG names the file like --config; --config wins over it.
TEST(ConfigFile, PathFromEnvironment) {
  TempConfig f("database-url = " + std::string(kUrl) + "\nport = 9393\n");
  TempConfig g("database-url = " + std::string(kUrl) + "\nport = 9494\n");
  ScopedEnv config("SCANGATE_CONFIG", f.path().c_str());
  EXPECT_EQ(ParseOk({}).port, 9393);
  EXPECT_EQ(ParseOk({"--config", g.path()}).port, 9494);
}

// '#' comments (whole-line and trailing), blank lines, indentation and spaces around '=' are ignored.
TEST(ConfigFile, CommentsAndBlankLines) {
  TempConfig f("# scangate\n\n   \n  database-url=" + std::string(kUrl) +
               "   # trailing comment\n\t# port = 1\nthreads   =   3\r\n");
  const Config c = ParseOk({"--config", f.path()});
  EXPECT_EQ(c.database_url, kUrl);
  EXPECT_EQ(c.port, Config{}.port);
  EXPECT_EQ(c.threads, 3u);
}

// On/off options take the same words as on the command line, and a bad word is refused naming the option.
TEST(ConfigFile, OnOffOptions) {
  TempConfig f("database-url = " + std::string(kUrl) + "\naccess-log = on\nfilter = off\n");
  const Config c = ParseOk({"--config", f.path()});
  EXPECT_TRUE(c.access_log);
  EXPECT_FALSE(c.filter);
  EXPECT_TRUE(ParseOk({"--config", f.path(), "--filter=on"}).filter);
  TempConfig bad("database-url = " + std::string(kUrl) + "\naccess-log = yes\n");
  EXPECT_NE(ParseError({"--config", bad.path()}).find("--access-log: expected on or off"), std::string::npos);
}

// An unknown key is refused naming the key, the file and the line, and not its value.
TEST(ConfigFile, UnknownKey) {
  TempConfig f("database-url = " + std::string(kUrl) + "\n\n# note\ndatabase-pasword = hunter2\n");
  const std::string e = ParseError({"--config", f.path()});
  EXPECT_NE(e.find(f.path() + " line 4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown option 'database-pasword'"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
}

// Lines po would refuse are refused with their number only: a line without '=' may hold the password.
TEST(ConfigFile, BadLinesNameTheLineNotItsText) {
  TempConfig no_eq("database-url postgresql://app:hunter2@db/scangate\n");
  std::string e = ParseError({"--config", no_eq.path()});
  EXPECT_NE(e.find(no_eq.path() + " line 1: expected 'name = value'"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  TempConfig section("[server]\nport = 1\n");
  EXPECT_NE(ParseError({"--config", section.path()}).find("line 1: sections are not used"), std::string::npos);
  TempConfig twice("port = 1\n\nport = 2\n");
  EXPECT_NE(ParseError({"--config", twice.path()}).find("line 3: 'port' is given twice"), std::string::npos);
  for (const char* key : {"config", "help", "version"}) {
    TempConfig f(std::string(key) + " = x\n");
    EXPECT_NE(ParseError({"--config", f.path()}).find("'" + std::string(key) + "' cannot be set in a config file"),
              std::string::npos)
        << key;
  }
}

// A missing file or a directory is a clear error; --help does not read the file.
TEST(ConfigFile, UnreadableFile) {
  const std::string missing = ::testing::TempDir() + "/scangate_config_file_test_missing.conf";
  EXPECT_NE(ParseError({"--config", missing}).find("--config: cannot read '" + missing + "'"), std::string::npos);
  EXPECT_NE(ParseError({"--config", ::testing::TempDir()}).find("is a directory"), std::string::npos);
  EXPECT_FALSE(Parse({"--config", missing, "--help"}).help.empty());
}

// The file's database password is redacted in the start-up description like a flag's, in both URL forms.
TEST(ConfigFile, PasswordRedacted) {
  for (const char* url : {"postgresql://app:hunter2@db:5432/scangate", "host=db password=hunter2 dbname=x"}) {
    TempConfig f(std::string("database-url = ") + url + "\n");
    const Config c = ParseOk({"--config", f.path()});
    EXPECT_EQ(c.database_url, url);
    const std::string described = boost::json::serialize(Describe(c));
    EXPECT_EQ(described.find("hunter2"), std::string::npos) << described;
    EXPECT_NE(described.find("password=***"), std::string::npos) << described;
    EXPECT_NE(described.find(f.path()), std::string::npos) << described;  // which file was read
  }
}

#ifdef SCANGATE_SOURCE_DIR
// deploy/scangate.conf names every option of --help (but help, version, config) as "# name = default", and,
// uncommented, parses to a default Config: the example cannot drift from the flags or their defaults.
TEST(ConfigFile, ExampleNamesEveryFlagWithItsDefault) {
  std::ifstream in(std::string(SCANGATE_SOURCE_DIR) + "/deploy/scangate.conf");
  ASSERT_TRUE(in) << "deploy/scangate.conf";
  std::ostringstream uncommented;
  std::set<std::string> named;
  const std::regex option_line(R"(^# ?([a-z][a-z0-9-]*) =(.*)$)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, option_line)) {
      named.insert(m[1]);
      if (m[1] != "database-url") uncommented << m[1] << " =" << m[2] << "\n";
    }
  }
  const std::string help = Parse({"--help"}).help;
  const std::regex flag(R"(\n  --([a-z][a-z0-9-]*))");
  std::set<std::string> flags;
  for (auto it = std::sregex_iterator(help.begin(), help.end(), flag); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if (name != "help" && name != "version" && name != "config") flags.insert(name);
  }
  ASSERT_GT(flags.size(), 20u) << help;
  EXPECT_EQ(named, flags);
  TempConfig f(uncommented.str());
  const Config c = ParseOk({"--config", f.path(), "--database-url", kUrl});
  const Config d = ParseOk({"--database-url", kUrl});
  EXPECT_EQ(boost::json::serialize(Describe(c)),
            std::regex_replace(boost::json::serialize(Describe(d)), std::regex("\"config\":\"\""),
                               "\"config\":\"" + f.path() + "\""));
}
#endif

}  // namespace
}  // namespace scangate::server
