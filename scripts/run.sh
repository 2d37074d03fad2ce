#!/usr/bin/env bash
# The run command: installs what is missing, builds the release binary, and runs scangate.
#   bash scripts/run.sh [scangate flags...]      (port 8080 unless --port/SCANGATE_PORT says otherwise)
# Without SCANGATE_DATABASE_URL (and without --database-url) a project-local PostgreSQL is started in
# .local/pg on port 5544 (created on first use, reused afterwards; stop it with scripts/pg.sh stop .local/pg).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh

jobs=${SCANGATE_JOBS:-$(nproc)}
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release --target scangate -j "$jobs"

has_url_flag=0
for arg in "$@"; do
  case "$arg" in --database-url|--database-url=*) has_url_flag=1 ;; esac
done
if [[ -z "${SCANGATE_DATABASE_URL:-}" && $has_url_flag -eq 0 ]]; then
  mkdir -p .local
  # PostgreSQL runs as user postgres: it must be able to reach the project folder.
  bash scripts/pg.sh start .local/pg 5544
  SCANGATE_DATABASE_URL=$(bash scripts/pg.sh url .local/pg 5544)
  export SCANGATE_DATABASE_URL
  echo "scangate: using local PostgreSQL $SCANGATE_DATABASE_URL (data in .local/pg)" >&2
  # --ack=filter's journal belongs to this database: keep it next to its data (flag or env still win).
  export SCANGATE_JOURNAL_DIR=${SCANGATE_JOURNAL_DIR:-$PWD/.local/journal}
fi
exec build/release/server/scangate "$@"
