// SetThreadName: names the calling thread ("sg-io-0", "sg-pg-writer-1", "sg-journal", ...) so that `top -H`,
// `ps -L`, `perf report --sort comm` and /proc/<pid>/task/*/comm tell scangate's threads apart.
// Invariant: a name is at most 15 bytes (Linux's limit); a longer one is cut, never rejected. Naming is
// diagnostics only: a failure is ignored. Call it first thing in a thread's body.
#pragma once

#include <string_view>

namespace scangate {

// Threading: names the calling thread only; safe from any thread.
void SetThreadName(std::string_view name);

}  // namespace scangate
