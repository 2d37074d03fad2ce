// The --config file (SCANGATE_CONFIG): Boost.Program_options' config-file format, one `long-name = value` per
// line, '#' comments and blank lines; every flag of `scangate --help` but help, version and config itself.
// Invariant: values already in the variables_map win (po::store keeps the first explicit value), so the command
// line and the SCANGATE_* environment, stored before, override the file; an error names the file, the line and
// the key, never a value (the file holds the database password). Used by ParseConfig (server/config/config.cc).
#pragma once

#include <string>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

namespace scangate::server {

// Stores the options of the config file at `path` into `vm`, each only where `vm` holds no explicit value yet.
// Throws ConfigError (server/config/config.h): unreadable file, a line that is not `key = value`, a section header, an
// unknown key, a key given twice, or help/version/config in the file. Reads the file; otherwise pure.
void StoreConfigFile(const std::string& path, const boost::program_options::options_description& desc,
                     boost::program_options::variables_map& vm);

}  // namespace scangate::server
