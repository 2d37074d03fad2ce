// Tests storage/pg/conninfo.h: the safety options are added to URI and keyword=value strings unless the
// string (or libpq's environment variable) sets them; nothing set by the user is overridden or lost;
// redaction and parse errors never carry a secret. Pure: libpq parsing only, no server.
#include "storage/pg/conninfo.h"

#include <gtest/gtest.h>

#include <stdlib.h>

#include <libpq-fe.h>

#include <map>
#include <memory>
#include <string>

namespace scangate::storage {
namespace {
using namespace std::chrono_literals;

// keyword -> value as libpq parses `conninfo` (fails the test when it does not parse).
std::map<std::string, std::string> Parsed(const std::string& conninfo) {
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> opts(PQconninfoParse(conninfo.c_str(), &err),
                                                                   &PQconninfoFree);
  if (!opts) {
    ADD_FAILURE() << "libpq cannot parse " << conninfo << ": " << (err ? err : "");
    PQfreemem(err);
    return {};
  }
  std::map<std::string, std::string> out;
  for (const PQconninfoOption* o = opts.get(); o->keyword != nullptr; ++o) {
    if (o->val != nullptr) out[o->keyword] = o->val;
  }
  return out;
}

ConnectionDefaults Defaults() {
  ConnectionDefaults d;
  d.statement_timeout = 7000ms;
  d.tcp_user_timeout = 10000ms;
  return d;
}

// Unset options get scangate's values; the user's own options stay as they were (URI form, %-escapes).
TEST(Conninfo, AddsDefaultsToUri) {
  const auto p = Parsed(WithConnectionDefaults("postgresql://app:p%20w@db:5433/scangate?sslmode=require", Defaults()));
  EXPECT_EQ(p.at("user"), "app");
  EXPECT_EQ(p.at("password"), "p w");
  EXPECT_EQ(p.at("host"), "db");
  EXPECT_EQ(p.at("port"), "5433");
  EXPECT_EQ(p.at("dbname"), "scangate");
  EXPECT_EQ(p.at("sslmode"), "require");
  EXPECT_EQ(p.at("application_name"), "scangate");
  EXPECT_EQ(p.at("keepalives"), "1");
  EXPECT_EQ(p.at("keepalives_idle"), "10");
  EXPECT_EQ(p.at("keepalives_interval"), "3");
  EXPECT_EQ(p.at("keepalives_count"), "3");
  EXPECT_EQ(p.at("tcp_user_timeout"), "10000");
  EXPECT_EQ(p.at("connect_timeout"), "10");
  EXPECT_EQ(p.at("options"), "-c statement_timeout=7000");
}

// Keyword form with spaces around '=' and a quoted value; explicit values win over the defaults.
TEST(Conninfo, KeepsExplicitValues) {
  const auto p = Parsed(WithConnectionDefaults(
      "host=db password = 'a b\\'c' keepalives_idle=60 tcp_user_timeout=0 application_name='my app' "
      "connect_timeout=3 options='-c search_path=x'",
      Defaults()));
  EXPECT_EQ(p.at("password"), "a b'c");
  EXPECT_EQ(p.at("keepalives_idle"), "60");
  EXPECT_EQ(p.at("tcp_user_timeout"), "0");
  EXPECT_EQ(p.at("application_name"), "my app");
  EXPECT_EQ(p.at("connect_timeout"), "3");
  EXPECT_EQ(p.at("keepalives_interval"), "3");
  // The user's options are kept and statement_timeout is added to them...
  EXPECT_EQ(p.at("options"), "-c search_path=x -c statement_timeout=7000");
  // ... unless they set it themselves.
  const auto q = Parsed(WithConnectionDefaults("host=db options='-c statement_timeout=0'", Defaults()));
  EXPECT_EQ(q.at("options"), "-c statement_timeout=0");
  // keepalives=0 is the user's choice too.
  EXPECT_EQ(Parsed(WithConnectionDefaults("host=db keepalives=0", Defaults())).at("keepalives"), "0");
}

// libpq's environment variables count as set by the user (PGAPPNAME, PGOPTIONS, PGCONNECT_TIMEOUT).
TEST(Conninfo, EnvironmentCountsAsExplicit) {
  setenv("PGAPPNAME", "from-env", 1);
  setenv("PGOPTIONS", "-c work_mem=8MB", 1);
  const auto p = Parsed(WithConnectionDefaults("host=db", Defaults()));
  unsetenv("PGAPPNAME");
  unsetenv("PGOPTIONS");
  EXPECT_EQ(p.count("application_name"), 0u);
  EXPECT_EQ(p.at("options"), "-c work_mem=8MB -c statement_timeout=7000");
}

// Zero statement/tcp timeouts add nothing for them.
TEST(Conninfo, ZeroMeansNone) {
  ConnectionDefaults d;
  const auto p = Parsed(WithConnectionDefaults("host=db", d));
  EXPECT_EQ(p.count("options"), 0u);
  EXPECT_EQ(p.count("tcp_user_timeout"), 0u);
  EXPECT_EQ(p.at("keepalives"), "1");
}

// Unparsable strings throw without echoing the input; redaction masks password and sslpassword.
TEST(Conninfo, ErrorsAndRedactionCarryNoSecret) {
  try {
    WithConnectionDefaults("host=db password hunter2", Defaults());
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ConninfoParseError("host=db"), "");
  EXPECT_EQ(ConninfoParseError("host=db hunter2=x").find("hunter2"), std::string::npos);
  EXPECT_NE(ConninfoParseError("host=db hunter2=x"), "");
  EXPECT_EQ(RedactConninfo("host=db password=hunter2 sslpassword=k"), "password=*** host=db sslpassword=***");
  EXPECT_EQ(RedactConninfo("host='db"), "<unparsable>");
}

}  // namespace
}  // namespace scangate::storage
