// Build identity of the scangate binary: the project version (CMake `project(VERSION ...)`), the git
// commit the sources came from and the build type. Captured at build time by server/version.cmake into a
// generated version.cc, so a new commit rebuilds one small file; a build outside a git checkout (e.g. from
// a source tarball) reports the commit as "unknown". Used by `scangate --version` and the start-up log.
// Constants: any thread may call these at any time.
#pragma once

#include <string>
#include <string_view>

namespace scangate::server {

std::string_view ProjectVersion();  // "0.1.0"
std::string_view GitCommit();       // 12 hex digits, "-dirty" appended for uncommitted changes; or "unknown"
std::string_view BuildType();       // CMake build type ("Release", ...); "" when none was set

// "scangate 0.1.0 (commit 0c37e17abcd1, Release)": what `scangate --version` prints.
inline std::string VersionLine() {
  std::string line = "scangate " + std::string(ProjectVersion()) + " (commit " + std::string(GitCommit());
  if (!BuildType().empty()) line += ", " + std::string(BuildType());
  return line + ")";
}

}  // namespace scangate::server
