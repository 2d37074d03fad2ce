#include "storage/pg/conninfo.h"

#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include <libpq-fe.h>

namespace scangate::storage {
namespace {

struct OptionsFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using OptionsPtr = std::unique_ptr<PQconninfoOption, OptionsFree>;

// Parses with libpq; on failure returns null and sets `error` (libpq's message, quoted fragments removed).
OptionsPtr Parse(std::string_view conninfo, std::string* error) {
  const std::string s(conninfo);
  char* err = nullptr;
  OptionsPtr opts(PQconninfoParse(s.c_str(), &err));
  if (!opts) {
    std::string msg = err != nullptr ? err : "out of memory";
    if (err != nullptr) PQfreemem(err);
    // libpq quotes the offending fragment ("missing \"=\" after \"hunter2\" ..."): never echo it (a
    // quoted "=" alone is libpq's own syntax and is kept).
    std::string clean;
    std::string fragment;
    bool quoted = false;
    for (const char c : msg) {
      if (c == '"') {
        if (quoted) clean += fragment == "=" ? "\"=\"" : "\"...\"";
        fragment.clear();
        quoted = !quoted;
      } else if (quoted) {
        fragment += c;
      } else if (c != '\n') {
        clean += c;
      }
    }
    if (error != nullptr) *error = clean;
  }
  return opts;
}

bool IsSecret(std::string_view keyword) { return keyword == "password" || keyword == "sslpassword"; }

// keyword=value with libpq's keyword/value quoting: single quotes when needed, \ and ' escaped.
void AppendPair(std::string& out, std::string_view keyword, std::string_view value) {
  if (!out.empty()) out += ' ';
  out += keyword;
  out += '=';
  const bool plain = !value.empty() && value.find_first_of(" \t\n\r\f\v'\\") == std::string_view::npos;
  if (plain) {
    out += value;
    return;
  }
  out += '\'';
  for (const char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
}

}  // namespace

std::string ConninfoParseError(std::string_view conninfo) {
  std::string error;
  return Parse(conninfo, &error) ? std::string() : error;
}

std::string RedactConninfo(std::string_view conninfo) {
  OptionsPtr opts = Parse(conninfo, nullptr);
  if (!opts) return "<unparsable>";
  std::string out;
  for (const PQconninfoOption* o = opts.get(); o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    AppendPair(out, o->keyword, IsSecret(o->keyword) ? "***" : o->val);
  }
  return out;
}

std::string WithConnectionDefaults(std::string_view conninfo, const ConnectionDefaults& d) {
  std::string error;
  OptionsPtr opts = Parse(conninfo, &error);
  if (!opts) throw std::invalid_argument("invalid PostgreSQL connection string: " + error);
  std::string out;
  const char* options_env = nullptr;  // PGOPTIONS applies only when the string sets no options
  std::vector<std::string> set_by_user;
  std::string options_value;
  bool options_given = false;
  for (const PQconninfoOption* o = opts.get(); o->keyword != nullptr; ++o) {
    const std::string_view kw = o->keyword;
    const bool from_env = o->val == nullptr && o->envvar != nullptr && std::getenv(o->envvar) != nullptr;
    if (o->val != nullptr || from_env) set_by_user.emplace_back(kw);
    if (kw == "options") {
      if (o->val != nullptr) {
        options_given = true;
        options_value = o->val;
      } else if (o->envvar != nullptr) {
        options_env = std::getenv(o->envvar);
      }
      continue;  // rebuilt below
    }
    if (o->val != nullptr) AppendPair(out, kw, o->val);
  }
  const auto user_set = [&set_by_user](std::string_view kw) {
    for (const auto& s : set_by_user) {
      if (s == kw) return true;
    }
    return false;
  };
  const auto add = [&](std::string_view kw, const std::string& value) {
    if (!user_set(kw)) AppendPair(out, kw, value);
  };
  if (!d.application_name.empty()) add("application_name", d.application_name);
  if (d.connect_timeout_s > 0) add("connect_timeout", std::to_string(d.connect_timeout_s));
  add("keepalives", "1");
  add("keepalives_idle", std::to_string(d.keepalives_idle_s));
  add("keepalives_interval", std::to_string(d.keepalives_interval_s));
  add("keepalives_count", std::to_string(d.keepalives_count));
  if (d.tcp_user_timeout.count() > 0) add("tcp_user_timeout", std::to_string(d.tcp_user_timeout.count()));
  // statement_timeout travels in the startup packet's options; a value the user put there (or in
  // PGOPTIONS) wins, and any other options of theirs are kept.
  if (!options_given && options_env != nullptr) options_value = options_env;
  if (d.statement_timeout.count() > 0 && options_value.find("statement_timeout") == std::string::npos) {
    if (!options_value.empty()) options_value += ' ';
    options_value += "-c statement_timeout=" + std::to_string(d.statement_timeout.count());
  }
  if (!d.extra_options.empty()) {  // scangate's own settings (the digest scheme's fence): always added
    if (!options_value.empty()) options_value += ' ';
    options_value += d.extra_options;
  }
  if (!options_value.empty()) AppendPair(out, "options", options_value);
  return out;
}

}  // namespace scangate::storage
