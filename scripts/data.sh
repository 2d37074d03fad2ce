#!/usr/bin/env bash
# This clone's data folder and the PostgreSQL that the run command (scripts/run.sh) starts in it.
#   scripts/data.sh path     print the data folder (what scripts/run.sh exports as SCANGATE_DATA_HOME)
#   scripts/data.sh init     create it (if needed) and print it
#   scripts/data.sh start    start this clone's PostgreSQL (initdb on first use, reused afterwards); print its URL
#   scripts/data.sh stop     stop it; the data stays, the next scripts/run.sh starts it again
#   scripts/data.sh remove   stop it and delete the whole data folder
# One data folder per clone, named after the clone's folder and a hash of its absolute path (so two clones
# never share one, and a clone's location, mode 700 or not, does not matter):
#   as root:    /var/lib/scangate/<name>-<hash>   PostgreSQL refuses root and runs as user postgres, which
#                                                 cannot enter a private clone folder but can enter this one
#   otherwise:  ${XDG_DATA_HOME:-$HOME/.local/share}/scangate/<name>-<hash>   PostgreSQL runs as you
#   SCANGATE_DATA_HOME=<folder> overrides both.
# Inside: pg/ (the cluster), pg-port (its port), clone (the clone's path, for people and error messages).
# Port: SCANGATE_PG_PORT, else the port this clone's cluster used last time, else 5544. A port taken by
# another clone's cluster or another program stops `start` with a message naming the owner and the way out.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
cmd=${1:?usage: data.sh path|init|start|stop|remove}
default_port=5544

base=""
if [[ -n ${SCANGATE_DATA_HOME:-} ]]; then
  home=$(realpath -m "$SCANGATE_DATA_HOME")
else
  name=$(basename "$root"); name=${name//[^A-Za-z0-9._-]/_}; name=${name:0:32}
  hash=$(printf %s "$root" | sha256sum | cut -c1-12)
  if [[ $(id -u) -eq 0 ]]; then base=/var/lib/scangate; else base=${XDG_DATA_HOME:-$HOME/.local/share}/scangate; fi
  home=$base/$name-$hash
fi
pgdata=$home/pg
cd /  # as root PostgreSQL's tools run as postgres, who may not enter the caller's folder (paths are absolute)

init() {
  if [[ $(id -u) -eq 0 ]]; then
    # Traversable by postgres (pg/ itself is postgres-only, mode 700).
    if [[ -n $base ]]; then mkdir -p "$base"; chmod 755 "$base"; fi
    mkdir -p "$home"; chmod 755 "$home"
  else
    mkdir -p -m 700 "$home"
  fi
  echo "$root" >"$home/clone"
}

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# The port of the running cluster in $1 (line 4 of postmaster.pid), or nothing.
running_port() {
  local pid_file=$1/postmaster.pid
  [[ -r $pid_file ]] || return 0
  local pid port
  pid=$(sed -n 1p "$pid_file"); port=$(sed -n 4p "$pid_file")
  if [[ $pid =~ ^[0-9]+$ && -d /proc/$pid ]]; then echo "$port"; fi
}

# Explains who holds port $1 and exits 1.
port_taken() {
  local port=$1 other owner
  for other in /var/lib/scangate/*/pg "${XDG_DATA_HOME:-$HOME/.local/share}"/scangate/*/pg; do
    [[ -d $other && $other != "$pgdata" ]] || continue
    if [[ $(running_port "$other" 2>/dev/null) == "$port" ]]; then
      owner=$(cat "$(dirname "$other")/clone" 2>/dev/null || echo "?")
      echo "data.sh: port $port is taken by the PostgreSQL of another scangate clone: $owner (data in $other)." >&2
      echo "  Stop that one (cd $owner && scripts/data.sh stop), or give this clone its own port:" >&2
      echo "  SCANGATE_PG_PORT=$((port + 1)) scripts/run.sh   (remembered for the next runs)" >&2
      exit 1
    fi
  done
  if [[ $(running_port "$root/.local/pg" 2>/dev/null) == "$port" ]]; then
    echo "data.sh: port $port is taken by this clone's cluster of an older scripts/run.sh, in $root/.local/pg." >&2
    echo "  Stop it (scripts/pg.sh stop .local/pg) and run again; its data stays in .local/pg." >&2
    exit 1
  fi
  echo "data.sh: port $port on 127.0.0.1 is taken by another program (another PostgreSQL?)." >&2
  echo "  Give this clone its own port: SCANGATE_PG_PORT=$((port + 1)) scripts/run.sh (remembered for the next" >&2
  echo "  runs), or use an existing database: SCANGATE_DATABASE_URL=postgresql://... scripts/run.sh" >&2
  exit 1
}

case "$cmd" in
  path) echo "$home" ;;
  init) init; echo "$home" ;;
  start)
    init
    port=$(running_port "$pgdata")
    if [[ -n $port ]]; then
      if [[ -n ${SCANGATE_PG_PORT:-} && $SCANGATE_PG_PORT != "$port" ]]; then
        echo "data.sh: this clone's PostgreSQL already runs on port $port; using it (scripts/data.sh stop," \
             "then run again, to move it to $SCANGATE_PG_PORT)" >&2
      fi
    else
      port=${SCANGATE_PG_PORT:-$(cat "$home/pg-port" 2>/dev/null || echo "$default_port")}
      if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
        echo "data.sh: bad PostgreSQL port '$port' (SCANGATE_PG_PORT or $home/pg-port)" >&2; exit 2
      fi
      if in_use "$port"; then port_taken "$port"; fi
      if ! bash "$root/scripts/pg.sh" start "$pgdata" "$port"; then
        echo "data.sh: PostgreSQL did not start; the end of $pgdata/server.log:" >&2
        tail -n 15 "$pgdata/server.log" >&2 2>/dev/null || true
        exit 1
      fi
    fi
    echo "$port" >"$home/pg-port"
    bash "$root/scripts/pg.sh" url "$pgdata" "$port"
    ;;
  stop) bash "$root/scripts/pg.sh" stop "$pgdata" ;;
  remove)
    [[ -e $home ]] || exit 0
    # Only a folder this script made (or an empty one): never rm -rf a mistyped SCANGATE_DATA_HOME.
    if [[ ! -f $home/clone && -n $(ls -A "$home") ]]; then
      echo "data.sh: $home is not a scangate data folder (no 'clone' file); not removing it" >&2; exit 1
    fi
    bash "$root/scripts/pg.sh" stop "$pgdata"
    rm -rf "$home"
    echo "data.sh: removed $home" >&2
    ;;
  *) echo "data.sh: unknown command $cmd (path|init|start|stop|remove)" >&2; exit 2 ;;
esac
