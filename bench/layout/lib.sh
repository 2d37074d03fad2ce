# bench/layout/lib.sh — what bench/layout/cliff.sh, migrate_online.sh, epochs_sql.sh and close_under_load.sh share,
# sourced by them: the start and the end of a benchmark with PostgreSQL in a memory cgroup, the --lock file, a
# scangate started and waited for, the CPU ticks and the bytes read of PostgreSQL's process tree. Each script sets
# ROOT, LOCK, SG_PORT (for scangate) and, unless it calls cgroup_bench_begin, WORK and a log() before using them.

# cgroup_bench_begin NAME: how the cgroup benchmarks start once their options are read (OUT may be set by then): OUT
# (default bench/out/NAME-<UTC time>) made and absolute; log() (lines tagged NAME, to OUT/run.log and stderr); the
# cgroup v1 memory controller checked; WORK (a temporary folder PostgreSQL can enter), PGDATA_ and PG_PORT for one
# cluster, CG the memory cgroup's path; and the traps: on exit scangate (start_sg) and PostgreSQL are stopped, the
# cgroup closed (its figures to OUT/cgroup.txt) and WORK removed, with the script's exit status kept.
cgroup_bench_begin() {
  BENCH_NAME=$1
  OUT=${OUT:-$ROOT/bench/out/$BENCH_NAME-$(date -u +%Y%m%dT%H%M%SZ)}
  mkdir -p "$OUT"; OUT=$(realpath "$OUT")
  log() { echo "[$BENCH_NAME $(date -u +%H:%M:%S)] $*" | tee -a "$OUT/run.log" >&2; }
  [[ -d /sys/fs/cgroup/memory && -w /sys/fs/cgroup/memory ]] || { log "no writable cgroup v1 memory controller"; exit 2; }
  WORK=$(mktemp -d "/tmp/scangate-$BENCH_NAME.XXXXXX"); chmod 755 "$WORK"
  PGDATA_=$WORK/pg
  PG_PORT=$((40000 + RANDOM % 10000))
  CG=/sys/fs/cgroup/memory/scangate-$BENCH_NAME-$$
  trap _cgroup_bench_end EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
_cgroup_bench_end() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  stop_sg
  "$ROOT/scripts/pg.sh" stop "$PGDATA_" >/dev/null 2>&1 || "$ROOT/scripts/pg.sh" kill "$PGDATA_" >/dev/null 2>&1
  cgroup_close "$CG" "$OUT" "$BENCH_NAME"
  rm -rf "$WORK"
  exit "$rc"
}

LOCK_FD=""
# shared | exclusive | none: hold the --lock file (LOCK; nothing when empty) in this shell, dropping any lock held.
lock() {
  [[ -z $LOCK ]] && return
  [[ -n $LOCK_FD ]] && { flock -u "$LOCK_FD"; exec {LOCK_FD}>&-; LOCK_FD=""; }
  [[ $1 == none ]] && return
  exec {LOCK_FD}>>"$LOCK"
  if [[ $1 == exclusive ]]; then flock -x "$LOCK_FD"; else flock -s "$LOCK_FD"; fi
}

SG_PID=""
# BIN LOGFILE ARGS...: starts BIN on SG_PORT with ARGS (its output to LOGFILE) and waits until /readyz answers (up to
# 3 min: a warm start of millions of keys in a small cgroup takes a while); exits the script if it does not.
start_sg() {
  local bin=$1 logfile=$2
  shift 2
  "$bin" --port "$SG_PORT" "$@" >>"$logfile" 2>&1 &
  SG_PID=$!
  for _ in $(seq 1800); do
    curl -fs "http://127.0.0.1:$SG_PORT/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$SG_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "scangate did not become ready:"; tail -5 "$logfile" >&2; exit 1
}
stop_sg() { [[ -n $SG_PID ]] && { kill "$SG_PID" 2>/dev/null; wait "$SG_PID" 2>/dev/null || true; }; SG_PID=""; }

# PM: CPU ticks (utime + stime) of the postmaster PM, its reaped children and its live children.
pg_ticks() {
  local sum p
  sum=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat")
  for p in $(pgrep -P "$1"); do sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$sum"
}
sg_ticks() { awk '{print $14 + $15}' "/proc/$SG_PID/stat"; }
# PM: bytes read from the storage layer (/proc/PID/io read_bytes: page-cache misses, not shared_buffers misses) by the
# postmaster PM, its reaped children (the kernel adds a reaped child's I/O to its parent's) and its live children.
pg_read_bytes() {
  local sum p
  sum=$(awk '/^read_bytes:/ {print $2}' "/proc/$1/io")
  for p in $(pgrep -P "$1"); do sum=$((sum + $(awk '/^read_bytes:/ {print $2}' "/proc/$p/io" 2>/dev/null || echo 0))); done
  echo "$sum"
}

# cgroup_open CG MIB PGDATA PORT: the memory cgroup CG made with a limit of MIB MiB, the page cache dropped, and
# PostgreSQL (scripts/pg.sh) started inside it on PGDATA and PORT, so every page it caches from here on is charged
# there; prints the postmaster's pid. cgroup_close undoes it.
cgroup_open() {
  local cg=$1 mib=$2 pgdata=$3 port=$4
  mkdir "$cg"
  echo $((mib * 1024 * 1024)) >"$cg/memory.limit_in_bytes"
  sync; echo 3 >/proc/sys/vm/drop_caches
  ( echo "$BASHPID" >"$cg/cgroup.procs"; "$ROOT/scripts/pg.sh" start "$pgdata" "$port" >/dev/null )
  head -1 "$pgdata/postmaster.pid"
}

# cgroup_close CG OUT WHO: the memory cgroup's figures (limit, peak, failures, memory.stat) to OUT/cgroup.txt, then
# the cgroup removed once its processes are gone (WHO names the script in the warning when it cannot be).
cgroup_close() {
  local cg=$1 out=$2 who=$3
  [[ -d $cg ]] || return 0
  { echo "limit_bytes $(cat "$cg/memory.limit_in_bytes")"; echo "max_usage_bytes $(cat "$cg/memory.max_usage_in_bytes")"
    echo "failcnt $(cat "$cg/memory.failcnt")"; sed 's/^/stat /' "$cg/memory.stat"; } >"$out/cgroup.txt" 2>/dev/null
  for _ in $(seq 50); do [[ -s $cg/cgroup.procs ]] || break; sleep 0.2; done
  rmdir "$cg" 2>/dev/null || echo "$who: could not remove $cg" >&2
}
