#!/usr/bin/env bash
# Tests the README's run command (scripts/run.sh, scripts/data.sh) the way a user meets it: git-clones HEAD of
# this checkout into a fresh mode-700 temporary folder (under build/), runs `scripts/run.sh --port <free port>`
# there in the background (its own build of the scangate target; its own PostgreSQL, on a free port, in the clone's data
# folder), waits for /readyz 200, observes one key (201 new) and again (200 duplicate), checks that
# --version names HEAD, stops scangate with SIGTERM (exit 0); checks that another cluster on the same port is
# refused with a message naming this clone; runs the command a second time, which must reuse the cluster (the
# key is still a duplicate); then stops and removes the clone's PostgreSQL and the clone.
#   tests/scripts/run_test.sh      scripts/test.sh runs it; SCANGATE_RUN_TEST_TIMEOUT (default 900 s) bounds
#                                  the wait for each /readyz (the first includes the clone's build)
# It tests HEAD, not uncommitted changes. SCANGATE_* variables of the caller (a database URL, a data folder,
# a port) are not passed on; SCANGATE_JOBS, CMAKE_CXX_COMPILER_LAUNCHER and CCACHE_* are.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
limit=${SCANGATE_RUN_TEST_TIMEOUT:-900}
step_start=$SECONDS

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
log() { echo "run_test: [$((SECONDS - step_start)) s] $*"; }

# Mode 700, like a clone in root's home or CI's checkout; inside this checkout's build/ (ignored by git), so that
# the clone's build and the release build share one ccache base folder (scripts/test.sh: CCACHE_BASEDIR is the
# checkout) and the clone's units are found in the cache.
mkdir -p "$root/build"
tmp=$(mktemp -d -p "$root/build" run-test.XXXXXX)
clone=$tmp/scangate
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true  # run.sh's process group (setsid below): build or scangate
    wait "$pid" 2>/dev/null || true
  fi
  if [[ -f $clone/scripts/data.sh ]]; then bash "$clone/scripts/data.sh" remove 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "run_test: FAILED: $*" >&2
  if [[ -f $tmp/run.log ]]; then echo "--- end of the run command's output:" >&2; tail -n 40 "$tmp/run.log" >&2; fi
  exit 1
}

# The caller's SCANGATE_* settings must not leak into the clone's run (SCANGATE_DATA_HOME would even make it
# share, and then remove, the caller's data folder).
while read -r var; do
  [[ $var == SCANGATE_JOBS ]] || unset "$var"
done < <(compgen -e | grep '^SCANGATE_' || true)

if ! head=$(git -C "$root" rev-parse HEAD 2>/dev/null); then
  echo "run_test: skipped: $root is not a git checkout (nothing to clone)"
  exit 0
fi
git clone -q --no-checkout "$root" "$clone"
git -C "$clone" checkout -q --detach "$head"
log "cloned $head into $clone (mode $(stat -c %a "$tmp"))"

http_port=$(free_port)
pg_port=$(free_port)
while [[ $pg_port == "$http_port" ]]; do pg_port=$(free_port); done
url="http://127.0.0.1:$http_port"

# Starts the run command in its own process group (so cleanup can stop a build in progress too) and waits
# for /readyz 200.
start_run() {
  SCANGATE_PG_PORT=$pg_port setsid bash "$clone/scripts/run.sh" --port "$http_port" --listen 127.0.0.1 \
    >>"$tmp/run.log" 2>&1 &
  pid=$!
  local deadline=$((SECONDS + limit)) code
  while :; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/readyz" || true)
    [[ $code == 200 ]] && break
    kill -0 "$pid" 2>/dev/null || fail "scripts/run.sh exited before /readyz answered 200"
    ((SECONDS < deadline)) || fail "no /readyz 200 within $limit s (last: $code)"
    sleep 1
  done
}

# POSTs {"key": $1} to /observe; expects HTTP status $2 and verdict $3.
observe() {
  local code
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' --max-time 10 -d "{\"key\":\"$1\"}" "$url/observe" || true)
  [[ $code == "$2" ]] && grep -q "\"verdict\":\"$3\"" "$tmp/body" ||
    fail "observe $1: expected $2 $3, got $code $(cat "$tmp/body" 2>/dev/null)"
}

# SIGTERM to scangate (run.sh has exec'd it); it must exit 0 within 30 s.
stop_run() {
  kill -TERM "$pid"
  local deadline=$((SECONDS + 30)) rc=0
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -0 "$pid" 2>/dev/null && fail "scangate still running 30 s after SIGTERM"
  wait "$pid" || rc=$?
  pid=""
  ((rc == 0)) || fail "scangate exited $rc after SIGTERM, expected 0"
}

start_run
log "first run ready on port $http_port (build included)"
key="run-test-$head-$$"
observe "$key" 201 new
observe "$key" 200 duplicate
version=$("$clone/build/release/server/scangate" --version) || fail "scangate --version failed"
[[ $version == *"(commit ${head:0:12}"[,\)]* ]] || fail "--version does not name $head: $version"
data_home=$(bash "$clone/scripts/data.sh" path)
[[ -f $data_home/pg/PG_VERSION && $(cat "$data_home/pg-port") == "$pg_port" ]] ||
  fail "no cluster on port $pg_port in $data_home"
[[ $data_home != "$tmp"* ]] || [[ $(id -u) -ne 0 ]] || fail "as root the data must live outside the private clone"
stop_run
log "first run stopped (exit 0); data in $data_home"

# Another clone's cluster wanting the same port is refused with a message naming this clone.
if clash=$(SCANGATE_DATA_HOME=$tmp/other-data SCANGATE_PG_PORT=$pg_port bash "$clone/scripts/data.sh" start 2>&1); then
  fail "a second cluster on port $pg_port was not refused: $clash"
fi
[[ $clash == *"port $pg_port is taken by the PostgreSQL of another scangate clone: $clone "* ]] ||
  fail "port clash message does not name the clone: $clash"

start_run  # the second run reuses the cluster: the key is still recorded
observe "$key" 200 duplicate
stop_run
log "second run reused the cluster and stopped (exit 0)"

bash "$clone/scripts/data.sh" remove
[[ ! -e $data_home ]] || fail "$data_home still exists after scripts/data.sh remove"
if (exec 3<>"/dev/tcp/127.0.0.1/$pg_port") 2>/dev/null; then fail "PostgreSQL still listens on $pg_port"; fi
log "PostgreSQL stopped and removed; passed"
