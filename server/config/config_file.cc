// The --config file: a line-numbered check of the file, then Boost.Program_options' own parser for the values
// (server/config/config_file.h).
#include "server/config/config_file.h"

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <boost/program_options/parsers.hpp>

#include "server/config/config.h"

namespace scangate::server {
namespace po = boost::program_options;
namespace {

std::string_view Trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const std::size_t last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

std::string ReadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw ConfigError("--config: '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--config: cannot read '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw ConfigError("--config: cannot read '" + path + "'");
  return text;
}

// The same reading of each line as po::parse_config_file (a '#' starts a comment anywhere on a line, blanks
// are trimmed), so that every error it would raise is raised here first, with the line number and without the
// line's text: po's "invalid line" message quotes the line, which can hold the password.
void CheckLines(const std::string& text, const std::string& path, const po::options_description& desc) {
  std::istringstream in(text);
  std::set<std::string, std::less<>> seen;
  std::string raw;
  for (int line = 1; std::getline(in, raw); ++line) {
    std::string_view s = raw;
    s = Trim(s.substr(0, s.find('#')));
    if (s.empty()) continue;
    const std::string at = "--config: " + path + " line " + std::to_string(line) + ": ";
    if (s.front() == '[') throw ConfigError(at + "sections are not used; write each option as 'name = value'");
    const std::size_t eq = s.find('=');
    if (eq == std::string_view::npos) throw ConfigError(at + "expected 'name = value' (e.g. port = 8080)");
    const std::string key(Trim(s.substr(0, eq)));
    if (key == "config" || key == "help" || key == "version") {
      throw ConfigError(at + "'" + key + "' cannot be set in a config file");
    }
    if (key.empty() || desc.find_nothrow(key, false) == nullptr) {
      throw ConfigError(at + "unknown option '" + key + "' (the long names of scangate --help, without '--')");
    }
    if (!seen.insert(key).second) throw ConfigError(at + "'" + key + "' is given twice");
  }
}

}  // namespace

void StoreConfigFile(const std::string& path, const po::options_description& desc, po::variables_map& vm) {
  const std::string text = ReadConfigFile(path);
  CheckLines(text, path, desc);
  std::istringstream in(text);
  try {
    po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), vm);
  } catch (const po::error& e) {  // not reached after CheckLines; its message names options, not values
    throw ConfigError("--config: " + path + ": " + e.what());
  }
}

}  // namespace scangate::server
