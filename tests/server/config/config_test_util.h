// Helpers shared by the configuration tests (config_test.cc, config_file_test.cc): ParseConfig on an argv
// built from strings, the accepted Config or the ConfigError's message, and a scoped environment variable.
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "server/config/config.h"

namespace scangate::server::test_support {

inline constexpr const char* kUrl = "postgresql://postgres@127.0.0.1:5544/scangate";

// Runs ParseConfig on argv {"scangate", args...}.
inline ParseOutcome Parse(std::vector<std::string> args) {
  std::vector<const char*> argv = {"scangate"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseConfig(static_cast<int>(argv.size()), argv.data());
}
inline Config ParseOk(std::vector<std::string> args) {
  ParseOutcome o = Parse(std::move(args));
  EXPECT_TRUE(o.config.has_value());
  return o.config.value_or(Config{});
}
// The ConfigError message of a rejected command line ("" if accepted).
inline std::string ParseError(std::vector<std::string> args) {
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
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace scangate::server::test_support
