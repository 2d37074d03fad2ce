#!/usr/bin/env bash
# A whole highly available scangate on this machine, loopback only, for tests and demos: one etcd, two
# PostgreSQL 15 nodes run by Patroni (deploy/patroni-node{1,2}.yml, synchronous mode), optionally N
# scangate instances (--ack=commit) behind HAProxy (deploy/haproxy.cfg). Everything lives in $HA_DIR;
# every process started is recorded in $HA_DIR/pids and `stop` ends exactly those.
#
#   deploy/cluster.sh start [--instances N]   etcd + 2 Patroni nodes (+ N scangate + HAProxy when N > 0)
#   deploy/cluster.sh stop [--clean]          stop everything started here (--clean: delete $HA_DIR)
#   deploy/cluster.sh status                  patronictl list, processes, readiness
#   deploy/cluster.sh url                     scangate's libpq multi-host URL (finds the primary itself)
#   deploy/cluster.sh leader                  name of the current primary (Patroni REST /primary)
#   deploy/cluster.sh standby                 name of the current standby
#   deploy/cluster.sh kill-host NODE          kill -9 NODE's Patroni, postmaster and backends together
#   deploy/cluster.sh kill-postmaster NODE    kill -9 NODE's postmaster only (Patroni restarts it)
#   deploy/cluster.sh node-start NODE [--clock-shift SECONDS]
#                                             start NODE's Patroni again (rejoins, pg_rewind if needed); with
#                                             --clock-shift its PostgreSQL's wall clock is SECONDS off (tests only)
#   deploy/cluster.sh clock-offset NODE       NODE's PostgreSQL now() minus this machine's clock, in seconds
#   deploy/cluster.sh switchover              patronictl switchover to the standby
#   deploy/cluster.sh wait-sync [SECONDS]     until one leader and one synchronous standby streaming
#   deploy/cluster.sh haproxy-start           HAProxy with SG_COMMIT_i / SG_FILTER_i from the environment
#   deploy/cluster.sh haproxy-stop
#
# Environment: HA_DIR (default /tmp/scangate-ha), HA_PORT_BASE (default 25400: etcd +0/+1, PostgreSQL
# +2/+3, Patroni REST +4/+5, HAProxy commit/filter/stats +6/+7/+8, scangate instances +10..),
# SCANGATE_BIN (default build/release/server/scangate), HA_CLOCK_SHIFT_LIB (node-start --clock-shift's preload:
# default build/release/tests/clock_shift/libscangate_clock_shift.so). PostgreSQL and Patroni run as user postgres.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
HA_DIR=${HA_DIR:-/tmp/scangate-ha}
BASE=${HA_PORT_BASE:-25400}
SCANGATE_BIN=${SCANGATE_BIN:-$root/build/release/server/scangate}
PGBIN=/usr/lib/postgresql/15/bin

ETCD_PORT=$BASE ETCD_PEER=$((BASE + 1))
declare -A PG_PORT=([node1]=$((BASE + 2)) [node2]=$((BASE + 3)))
declare -A REST_PORT=([node1]=$((BASE + 4)) [node2]=$((BASE + 5)))
HAPROXY_COMMIT=$((BASE + 6)) HAPROXY_FILTER=$((BASE + 7)) HAPROXY_STATS=$((BASE + 8))
SG_PORT0=$((BASE + 10))

log() { echo "cluster.sh: $*" >&2; }
die() { log "$*"; exit 1; }
pidfile() { echo "$HA_DIR/pids/$1.pid"; }
alive() { [[ -f $(pidfile "$1") ]] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups -- env -C / "$@"; }  # from /: see node_start

# readable_copy USER SRC DEST: SRC copied to DEST for a program that runs as USER (Patroni as postgres). The clone
# may be private (mode 700), where USER cannot read deploy/ at all: it reads its own copy in the cluster's folder.
# A copy it still cannot read (a folder on the way not searchable by USER) stops here, naming the file — not as
# the program's own confusing error (Patroni: a traceback ending in KeyError: 'name').
readable_copy() {
  local user=$1 src=$2 dest=$3
  install -m 0644 -o "$user" "$src" "$dest" || die "cannot copy $src to $dest"
  setpriv --reuid="$user" --regid="$user" --init-groups -- test -r "$dest" ||
    die "$dest (a copy of $src) is not readable by user $user: make every folder above it searchable by $user"
}

url() {
  echo "postgresql://postgres@127.0.0.1:${PG_PORT[node1]},127.0.0.1:${PG_PORT[node2]}/scangate?target_session_attrs=read-write&connect_timeout=2"
}

# Runs "$@" in the background with output to $HA_DIR/logs/NAME.log and records its pid.
spawn() {
  local name=$1; shift
  if alive "$name"; then log "$name already running"; return 0; fi
  "$@" >>"$HA_DIR/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

wait_for() {  # SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}

patroni_env() {  # NODE -> env assignments for Patroni / patronictl
  local n=$1
  echo "PATRONI_RESTAPI_LISTEN=127.0.0.1:${REST_PORT[$n]}" "PATRONI_RESTAPI_CONNECT_ADDRESS=127.0.0.1:${REST_PORT[$n]}" \
    "PATRONI_POSTGRESQL_LISTEN=127.0.0.1:${PG_PORT[$n]}" "PATRONI_POSTGRESQL_CONNECT_ADDRESS=127.0.0.1:${PG_PORT[$n]}" \
    "PATRONI_POSTGRESQL_DATA_DIR=$HA_DIR/$n/data" "PATRONI_POSTGRESQL_PGPASS=$HA_DIR/$n/pgpass" \
    "PATRONI_ETCD3_HOSTS=127.0.0.1:$ETCD_PORT" "HOME=$HA_DIR/$n"
}

# shifted_bin_dir NODE SECONDS: a bin_dir for NODE's Patroni whose `postgres` runs the real one with its wall clock
# SECONDS off (tests/clock_shift preloaded: a host whose clock is wrong; the monotonic clock is untouched); every
# other program is the real one (pg_ctl, pg_rewind and initdb find the real postgres beside their real path).
# Prints the folder.
shifted_bin_dir() {
  local n=$1 shift_s=$2 lib=${HA_CLOCK_SHIFT_LIB:-$root/build/release/tests/clock_shift/libscangate_clock_shift.so}
  [[ $shift_s =~ ^[+-]?[0-9]+$ ]] || die "--clock-shift: seconds, as -30 or +30 (got '$shift_s')"
  [[ -r $lib ]] || die "no clock-shift library at $lib (build the target scangate_clock_shift, or set HA_CLOCK_SHIFT_LIB)"
  local bin=$HA_DIR/$n/bin-shifted
  rm -rf "$bin" && mkdir -p "$bin" "$HA_DIR/lib" && chmod 755 "$HA_DIR/lib"
  readable_copy postgres "$lib" "$HA_DIR/lib/libscangate_clock_shift.so"
  local f
  for f in "$PGBIN"/*; do ln -s "$f" "$bin/$(basename "$f")"; done
  rm "$bin/postgres"
  printf '#!/bin/sh\n# deploy/cluster.sh node-start %s --clock-shift %s\nLD_PRELOAD=%s SCANGATE_CLOCK_SHIFT_SECONDS=%s exec %s "$@"\n' \
    "$n" "$shift_s" "$HA_DIR/lib/libscangate_clock_shift.so" "$shift_s" "$PGBIN/postgres" >"$bin/postgres"
  chmod 755 "$bin/postgres" "$bin"
  echo "$bin"
}

node_start() {
  local n=$1 shift_s=
  shift
  [[ -n ${PG_PORT[$n]:-} ]] || die "unknown node $n (node1 or node2)"
  while (($#)); do
    case $1 in
      --clock-shift) shift_s=${2:?--clock-shift SECONDS}; shift 2 ;;
      *) die "node-start: unknown option $1" ;;
    esac
  done
  mkdir -p "$HA_DIR/$n"
  chown postgres: "$HA_DIR/$n"
  readable_copy postgres "$here/patroni-$n.yml" "$HA_DIR/$n/patroni.yml"
  local bin=$PGBIN
  [[ -z $shift_s ]] || bin=$(shifted_bin_dir "$n" "$shift_s")
  # In its node folder (env -C): Patroni's worker processes chdir to the starting folder, which in a private
  # clone user postgres cannot enter (PermissionError in multiprocessing's spawn, and no leader ever).
  # shellcheck disable=SC2046
  spawn "patroni-$n" env -C "$HA_DIR/$n" $(patroni_env "$n") PATRONI_POSTGRESQL_BIN_DIR="$bin" \
    setpriv --reuid=postgres --regid=postgres --init-groups -- patroni "$HA_DIR/$n/patroni.yml"
  [[ -z $shift_s ]] || log "$n: PostgreSQL's wall clock ${shift_s} s off (bin_dir $bin)"
}

# clock_offset NODE: NODE's PostgreSQL now() minus this machine's clock, in whole seconds (rounded).
clock_offset() {
  local n=$1 theirs
  theirs=$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "${PG_PORT[$n]}" -U postgres -d postgres -tAc \
    "SELECT extract(epoch FROM clock_timestamp())") || die "cannot read the clock of $n"
  awk -v t="$theirs" -v m="$(date +%s.%N)" 'BEGIN { d = t - m; printf "%d\n", (d < 0 ? d - 0.5 : d + 0.5) }'
}

role_of() {  # NODE -> HTTP status of GET /primary (200 on the leader)
  curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:${REST_PORT[$1]}/primary" || true
}

leader() {
  for n in node1 node2; do
    if [[ $(role_of "$n") == 200 ]]; then echo "$n"; return 0; fi
  done
  return 1
}

other() { if [[ $1 == node1 ]]; then echo node2; else echo node1; fi; }

# One leader and a standby that is streaming synchronously (pg_stat_replication on the leader) AND recorded
# as the synchronous standby in etcd (Patroni REST /sync is 200 on it). Patroni sets
# synchronous_standby_names first and writes etcd ~2 s later; a standby lost in between stays in
# synchronous_standby_names and COMMITs wait until it returns (Patroni 3.0.2 ha.py process_sync_replication;
# same symptom upstream: patroni/patroni#3468), so
# tests start a fault only once both agree.
synced() {
  local l
  l=$(leader) || return 1
  [[ $(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "${PG_PORT[$l]}" -U postgres -d postgres -tAc \
    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'" 2>/dev/null) == 1 ]] &&
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:${REST_PORT[$(other "$l")]}/sync") == 200 ]]
}

postmaster_pid() {  # NODE -> pid of its postmaster, or nothing
  local f="$HA_DIR/$1/data/postmaster.pid"
  [[ -f $f ]] && head -1 "$f"
}

patronictl_() {
  # shellcheck disable=SC2046
  env $(patroni_env node1) patronictl -c "$here/patroni-node1.yml" "$@"
}

haproxy_start() {
  local i
  for i in 1 2 3; do
    local c="SG_COMMIT_$i" f="SG_FILTER_$i"
    export "$c=${!c:-127.0.0.1:$((SG_PORT0 + i - 1))}" "$f=${!f:-127.0.0.1:$((SG_PORT0 + 9 + i))}"
  done
  export SG_LISTEN_COMMIT=127.0.0.1:$HAPROXY_COMMIT SG_LISTEN_FILTER=127.0.0.1:$HAPROXY_FILTER \
    SG_STATS=127.0.0.1:$HAPROXY_STATS SG_ERRORS_DIR=$here/errors
  haproxy -c -q -f "$here/haproxy.cfg" || die "haproxy.cfg does not validate"
  spawn haproxy haproxy -db -f "$here/haproxy.cfg"
  if ! (wait_for 30 "HAProxy on $HAPROXY_STATS" curl -sf --max-time 1 "http://127.0.0.1:$HAPROXY_STATS/stats"); then
    tail -20 "$HA_DIR/logs/haproxy.log" >&2
    exit 1
  fi
  log "HAProxy: commit 127.0.0.1:$HAPROXY_COMMIT, filter 127.0.0.1:$HAPROXY_FILTER, stats http://127.0.0.1:$HAPROXY_STATS/stats"
}

stop_pid() {  # NAME SIGNAL: signal, wait up to 30 s, then SIGKILL
  local name=$1 sig=$2 pid
  [[ -f $(pidfile "$name") ]] || return 0
  pid=$(cat "$(pidfile "$name")")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$(pidfile "$name")"
}

cmd=${1:-}
shift || true
case "$cmd" in
  start)
    instances=0
    while (($#)); do
      case $1 in
        --instances) instances=$2; shift 2 ;;
        *) die "unknown option $1" ;;
      esac
    done
    bash "$root/scripts/deps.sh" ha  # Patroni, etcd, HAProxy: installs only what is missing
    command -v patroni >/dev/null && command -v etcd >/dev/null && command -v haproxy >/dev/null ||
      die "patroni, etcd or haproxy missing: run scripts/deps.sh ha"
    mkdir -p "$HA_DIR/pids" "$HA_DIR/logs" "$HA_DIR/etcd"
    chmod 755 "$HA_DIR"
    spawn etcd etcd --name e0 --data-dir "$HA_DIR/etcd" \
      --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
      --initial-cluster "e0=http://127.0.0.1:$ETCD_PEER" --initial-cluster-state new
    wait_for 30 "etcd" curl -sf --max-time 1 "http://127.0.0.1:$ETCD_PORT/health"
    node_start node1
    wait_for 120 "a leader" leader
    node_start node2
    l=$(leader)
    if ! as_pg "$PGBIN/psql" -h 127.0.0.1 -p "${PG_PORT[$l]}" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'scangate'" | grep -q 1; then
      as_pg "$PGBIN/psql" -h 127.0.0.1 -p "${PG_PORT[$l]}" -U postgres -d postgres -qc "CREATE DATABASE scangate"
    fi
    wait_for 180 "a synchronous standby" synced
    log "PostgreSQL: leader $(leader), synchronous standby $(other "$(leader)"); URL $(url)"
    if ((instances > 0)); then
      [[ -x $SCANGATE_BIN ]] || die "no scangate binary at $SCANGATE_BIN (build it, or set SCANGATE_BIN)"
      for ((i = 0; i < instances; i++)); do
        spawn "scangate-$i" "$SCANGATE_BIN" --listen=127.0.0.1 --port=$((SG_PORT0 + i)) --threads=2 \
          --ack=commit --database-url="$(url)" --proxy-protocol-from=127.0.0.2
      done
      for ((i = 0; i < instances; i++)); do
        wait_for 60 "scangate-$i ready" curl -sf --max-time 1 "http://127.0.0.1:$((SG_PORT0 + i))/readyz"
      done
      log "scangate: $instances instance(s) on 127.0.0.1:$SG_PORT0.. (--ack=commit)"
      haproxy_start
    fi
    ;;
  stop)
    shopt -s nullglob
    for f in "$HA_DIR"/pids/scangate-*.pid "$HA_DIR"/pids/haproxy.pid; do stop_pid "$(basename "$f" .pid)" TERM; done
    for n in node1 node2; do stop_pid "patroni-$n" TERM; done
    # A Patroni killed with -9 leaves its PostgreSQL running: stop those too.
    for n in node1 node2; do
      if [[ -f $HA_DIR/$n/data/postmaster.pid ]]; then
        as_pg "$PGBIN/pg_ctl" -D "$HA_DIR/$n/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
      fi
    done
    stop_pid etcd TERM
    if [[ ${1:-} == --clean ]]; then rm -rf "$HA_DIR"; fi
    ;;
  status)
    patronictl_ list || true
    shopt -s nullglob
    for f in "$HA_DIR"/pids/*.pid; do
      name=$(basename "$f" .pid)
      if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$name: pid $(cat "$f")"; else echo "$name: dead"; fi
    done
    ;;
  url) url ;;
  leader) leader ;;
  standby) other "$(leader)" ;;
  kill-host)
    n=${1:?node}
    pids=()
    [[ -f $(pidfile "patroni-$n") ]] && pids+=("$(cat "$(pidfile "patroni-$n")")")
    pm=$(postmaster_pid "$n" || true)
    if [[ -n $pm ]]; then
      pids+=("$pm")
      mapfile -t children < <(ps -o pid= --ppid "$pm")
      pids+=("${children[@]}")
    fi
    ((${#pids[@]})) || die "nothing of $n is running"
    kill -9 "${pids[@]}" 2>/dev/null || true
    rm -f "$(pidfile "patroni-$n")"
    log "killed $n: ${pids[*]}"
    ;;
  kill-postmaster)
    n=${1:?node}
    pm=$(postmaster_pid "$n" || true)
    [[ -n $pm ]] || die "no postmaster for $n"
    kill -9 "$pm"
    log "killed the postmaster of $n: $pm"
    ;;
  node-start) node_start "${1:?node}" "${@:2}" ;;
  clock-offset) clock_offset "${1:?node}" ;;
  switchover)
    l=$(leader) || die "no leader"
    patronictl_ switchover --leader "$l" --candidate "$(other "$l")" --force
    ;;
  wait-sync) wait_for "${1:-120}" "a synchronous standby" synced ;;
  haproxy-start) haproxy_start ;;
  haproxy-stop) stop_pid haproxy TERM ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
