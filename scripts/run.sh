#!/usr/bin/env bash
# The run command: installs what is missing for building and serving (scripts/deps.sh build: no test or HA
# packages), builds scangate (Release), and runs it.
#   scripts/run.sh [scangate flags...]      (port 8080 unless --port/SCANGATE_PORT says otherwise)
# Works from any clone location, as root or as an ordinary user. Without SCANGATE_DATABASE_URL (and without
# --database-url) it starts this clone's own PostgreSQL 15 through scripts/data.sh: data in this clone's data
# folder (/var/lib/scangate/<clone> as root, ~/.local/share/scangate/<clone> otherwise), port 5544 or
# SCANGATE_PG_PORT; created on first use, reused afterwards, left running when scangate exits
# (scripts/data.sh stop | remove).
# Exports SCANGATE_DATA_HOME, this clone's data folder, for whatever scangate keeps on disk.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build

jobs=${SCANGATE_JOBS:-$(nproc)}
# Release, the build type of scripts/test.sh and bench/run.sh too (they share build/release). Warnings do not
# stop this build (SCANGATE_WERROR stays as the build folder has it: OFF unless scripts/test.sh made it).
# A new build folder is configured without tests and benchmarks (no GoogleTest or Google Benchmark needed);
# one scripts/test.sh or bench/run.sh configured keeps theirs (their packages are installed then).
serve_only=()
if [[ ! -f build/release/CMakeCache.txt ]]; then serve_only=(-DSCANGATE_TESTS=OFF -DSCANGATE_BENCH=OFF); fi
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release "${serve_only[@]}" >/dev/null
cmake --build build/release --target scangate -j "$jobs"

SCANGATE_DATA_HOME=$(bash scripts/data.sh init)
export SCANGATE_DATA_HOME

has_url_flag=0
for arg in "$@"; do
  case "$arg" in --database-url|--database-url=*) has_url_flag=1 ;; esac
done
if [[ -z "${SCANGATE_DATABASE_URL:-}" && $has_url_flag -eq 0 ]]; then
  SCANGATE_DATABASE_URL=$(bash scripts/data.sh start)
  export SCANGATE_DATABASE_URL
  echo "scangate: using this clone's PostgreSQL $SCANGATE_DATABASE_URL (data in $SCANGATE_DATA_HOME/pg;" \
       "scripts/data.sh stop stops it)" >&2
  # --ack=filter's journal belongs to this database: keep it next to its data (flag or env still win).
  export SCANGATE_JOURNAL_DIR=${SCANGATE_JOURNAL_DIR:-$SCANGATE_DATA_HOME/journal}
fi
exec build/release/server/scangate "$@"
