#!/usr/bin/env bash
# The Debian package's test. First lintian on the .deb (deploy/debian/lintian_test.sh: no error or warning that
# deploy/debian/lintian-overrides does not explain), then the install test in a throwaway root: a fresh Debian
# bookworm (debootstrap --variant=minbase) gets build/package/scangate_*.deb with `apt-get install` (which pulls
# the runtime Depends from the mirror), then scangate is started as its unit would start it, serves POST
# /observe, is stopped, and `apt-get purge` (plus autoremove of what it pulled in) must leave no file behind that
# was not there before the install.
#
# "As the unit would": ExecStart, Environment=, EnvironmentFile= and LimitNOFILE= are read from the INSTALLED
# unit file; the process runs under a fresh uid with no capabilities and no_new_privs (DynamicUser=yes,
# CapabilityBoundingSet=, NoNewPrivileges=yes), umask 077, STATE_DIRECTORY=/var/lib/scangate laid out as
# systemd lays it out for a DynamicUser (/var/lib/private/scangate + link), NOTIFY_SOCKET and WATCHDOG_USEC set,
# READY=1 awaited. Not emulated (no systemd as PID 1 here): the mount/namespace/syscall sandbox, which the ctest
# unit_verify checks through systemd-analyze instead.
# PostgreSQL: a throwaway cluster on the host (scripts/pg.sh) on a free loopback port; the chroot shares the
# network. The operator's step is the test's: the database URL goes into the chroot's /etc/default/scangate.
#
# Usage (root): deploy/debian/package_test.sh [DEB]   (default: build/package/scangate_*.deb from
# scripts/package.sh). Env: MIRROR (default http://deb.debian.org/debian), DEBOOTSTRAP_CACHE (a directory to
# keep downloaded .debs between runs). Output: the log on stdout; exit 0 only when every check passed.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:-$(ls "$root_dir"/build/package/scangate_*.deb 2>/dev/null | head -1)}
[[ -f $deb ]] || { echo "no package: run scripts/package.sh first (or pass the .deb)" >&2; exit 1; }
deb=$(realpath "$deb")
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${DEBOOTSTRAP_CACHE:-/var/tmp/scangate-debootstrap-cache}
[[ $(id -u) -eq 0 ]] || { echo "run as root (debootstrap, chroot)" >&2; exit 1; }
for tool in debootstrap chroot curl python3 setpriv lintian; do
  command -v $tool >/dev/null || { echo "missing $tool (scripts/deps.sh)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/scangate-pkgtest.XXXXXX)
chmod 755 "$work"
root=$work/root
pgdir=$work/pg
notify_pid="" scangate_pid="" pg_port=""
step() { echo; echo "=== $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
  set +e
  [[ -n $scangate_pid ]] && kill -KILL "$scangate_pid" 2>/dev/null
  [[ -n $notify_pid ]] && kill "$notify_pid" 2>/dev/null
  [[ -n $pg_port ]] && "$root_dir/scripts/pg.sh" stop "$pgdir" >/dev/null 2>&1
  for m in "$root/dev/pts" "$root/dev" "$root/proc"; do mountpoint -q "$m" && umount -l "$m"; done
  rm -rf "$work"
}
trap cleanup EXIT
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

step "package $(basename "$deb")"
dpkg-deb --field "$deb" Package Version Architecture Depends

step "lintian"
"$root_dir/deploy/debian/lintian_test.sh" "$deb" || fail "lintian"

step "debootstrap --variant=minbase bookworm ($mirror)"
mkdir -p "$cache"
debootstrap --variant=minbase --cache-dir="$cache" bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
tail -1 "$work/debootstrap.log"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's suites (updates, security) and its apt setting for the mirror's Release dates.
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/" && rm -f "$root/etc/apt/sources.list"
fi
echo 'Acquire::Check-Valid-Until "false";' > "$root/etc/apt/apt.conf.d/99check-valid-until"
in_root apt-get update -qq

# Every path of the root that a package could own or leave, before the install (caches, logs, dpkg's and
# apt's own databases and the mount points are not what a package leaves).
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys -o -path ./run -o -path ./tmp \
      -o -path ./var/cache -o -path ./var/log -o -path ./var/lib/apt -o -path ./var/lib/dpkg -o -path ./root \) \
      -prune -o -print | sort)
}
snapshot > "$work/before.txt"

step "apt-get install ./$(basename "$deb")"
cp "$deb" "$root/tmp/"
in_root apt-get install -y -qq --no-install-recommends "/tmp/$(basename "$deb")" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "apt-get install"; }
grep -E '^(Setting up|Unpacking) ' "$work/install.log" | sed 's/ \.\.\.$//' | tr '\n' ';' | fold -w 118; echo
in_root dpkg-query -W -f='${Package} ${Version} ${Status}\n' scangate
in_root dpkg -L scangate | grep -v '/$' | grep -vE '^/(etc|lib|usr|usr/share|usr/share/doc)$'
echo "conffiles:"; in_root dpkg-query -W -f='${Conffiles}\n' scangate
in_root /usr/bin/scangate --version
# The licence (LICENSE: Apache-2.0) as Debian states it: the SPDX identifier in the package's copyright file.
in_root grep -qx 'License: Apache-2.0' /usr/share/doc/scangate/copyright || fail "copyright does not name Apache-2.0"
echo "licence: $(in_root grep -m1 '^License:' /usr/share/doc/scangate/copyright)"
# Debian's conventions: the man page, the changelog and NEWS, README.Debian, the examples; the unit registered
# with deb-systemd-helper (so purge drops the links an operator's enable makes), neither enabled nor started.
for f in /usr/share/man/man8/scangate.8.gz /usr/share/doc/scangate/changelog.Debian.gz \
         /usr/share/doc/scangate/NEWS.Debian.gz /usr/share/doc/scangate/examples/scangate.conf \
         /usr/share/doc/scangate/examples/tokens /usr/share/lintian/overrides/scangate \
         /var/lib/systemd/deb-systemd-helper-enabled/scangate.service.dsh-also; do
  [[ -f $root$f ]] || fail "not installed: $f"
done
ls "$root"/usr/share/doc/scangate/README.Debian* >/dev/null 2>&1 || fail "no README.Debian"
[[ -e $root/etc/systemd/system/multi-user.target.wants/scangate.service ]] && fail "enabled on install"
echo "man page, changelog.Debian, NEWS.Debian, README.Debian, examples: installed; unit registered, not enabled"

step "PostgreSQL: a throwaway cluster on the host, loopback"
pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$pgdir" && chown postgres: "$pgdir"
"$root_dir/scripts/pg.sh" start "$pgdir" "$pg_port" >/dev/null
pg_url=$("$root_dir/scripts/pg.sh" url "$pgdir" "$pg_port")
echo "cluster on 127.0.0.1:$pg_port"

step "configure as an operator would: /etc/default/scangate"
sg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >> "$root/etc/default/scangate" <<EOF
SCANGATE_DATABASE_URL=$pg_url
SCANGATE_LISTEN=127.0.0.1
SCANGATE_PORT=$sg_port
SCANGATE_ACK=filter
EOF
stat -c '%a %U %n' "$root/etc/default/scangate"

step "start as the unit would"
unit=$root/lib/systemd/system/scangate.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
env_file=$(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$unit")
nofile=$(sed -n 's/^LimitNOFILE=//p' "$unit")
echo "ExecStart=$exec_start  EnvironmentFile=$env_file  LimitNOFILE=$nofile"
grep -qx 'DynamicUser=yes' "$unit" && grep -qx 'StateDirectory=scangate' "$unit" || fail "unit: no DynamicUser/StateDirectory"
env_vars=()
while IFS= read -r line; do env_vars+=("$line"); done < <(sed -n 's/^Environment=//p' "$unit")
while IFS= read -r line; do
  [[ $line =~ ^[A-Z_][A-Z0-9_]*= ]] && env_vars+=("$line")
done < "$root$env_file"
# DynamicUser: a uid of systemd's dynamic range no account uses; StateDirectory= as systemd lays it out for a
# DynamicUser (/var/lib/private is 0700 under systemd, which hides it behind the service's own mount namespace;
# without that namespace here it is 0711 so the uid can reach its directory).
dyn_uid=61875
install -d -m 0711 "$root/var/lib/private"
install -d -m 0700 -o $dyn_uid -g $dyn_uid "$root/var/lib/private/scangate"
ln -sfn private/scangate "$root/var/lib/scangate"
# The notification socket systemd would listen on.
python3 -u - "$root/run/scangate-notify" "$work/notify.log" <<'EOF' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777)
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " | ") + "\n")
EOF
notify_pid=$!
for _ in $(seq 50); do [[ -S $root/run/scangate-notify ]] && break; sleep 0.1; done
printf '%s\n' "${env_vars[@]}" | sed 's/\(SCANGATE_DATABASE_URL=\).*/\1(set)/'
if (( nofile > $(ulimit -Hn) )); then  # systemd (root) raises the hard limit; this shell may not be able to
  echo "LimitNOFILE=$nofile is above this host's hard limit: $(ulimit -Hn) open files instead"
  nofile=$(ulimit -Hn)
fi
(
  umask 077
  ulimit -n "$nofile"
  # shellcheck disable=SC2086  # ExecStart's words, as systemd splits them
  exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env_vars[@]}" \
    STATE_DIRECTORY=/var/lib/scangate NOTIFY_SOCKET=/run/scangate-notify WATCHDOG_USEC=30000000 \
    setpriv --reuid=$dyn_uid --regid=$dyn_uid --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all \
    $exec_start
) > "$work/scangate.log" 2>&1 &
scangate_pid=$!
for _ in $(seq 300); do grep -q '^READY=1' "$work/notify.log" 2>/dev/null && break; sleep 0.1; done
grep -q '^READY=1' "$work/notify.log" || { cat "$work/scangate.log"; fail "no READY=1 within 30 s"; }
echo "notifications so far:"; sed 's/^/  /' "$work/notify.log"
ps -o uid=,gid=,comm= -p "$scangate_pid" | sed 's/^/process (uid gid name): /'
grep -E '^(CapEff|CapBnd|NoNewPrivs)' "/proc/$scangate_pid/status" | tr '\t' ' '

step "serve"
curl -sS -o /dev/null -w 'GET /readyz -> %{http_code}\n' "http://127.0.0.1:$sg_port/readyz"
key="pkgtest-$(date +%s%N)"
for i in 1 2; do
  curl -sS -w ' -> %{http_code}\n' -H 'Content-Type: application/json' \
    --data "{\"key\":\"$key\",\"source\":\"package-test\"}" "http://127.0.0.1:$sg_port/observe"
done | tee "$work/observe.txt"
grep -q ' -> 201$' "$work/observe.txt" && grep -q ' -> 200$' "$work/observe.txt" || fail "POST /observe: not new then duplicate"
echo "state directory (journal):"; (cd "$root/var/lib" && stat -c '  %A uid=%u %N' scangate private/scangate private/scangate/*)

step "stop (SIGTERM, as systemctl stop)"
kill -TERM "$scangate_pid"
rc=0; wait "$scangate_pid" || rc=$?
scangate_pid=""
echo "exit status $rc"
[[ $rc -eq 0 ]] || { tail -20 "$work/scangate.log"; fail "exit status $rc"; }
grep -q '^STOPPING=1' "$work/notify.log" || fail "no STOPPING=1"
grep '^STOPPING=1' "$work/notify.log"
grep -o '"event":"shutdown","phase":"done"[^}]*' "$work/scangate.log"
grep -c 'WATCHDOG=1' "$work/notify.log" | sed 's/^/WATCHDOG=1 pings: /'
kill "$notify_pid"; notify_pid=""
rm -f "$root/run/scangate-notify"

step "apt-get purge scangate; apt-get autoremove --purge"
in_root apt-get purge -y -qq scangate 2>&1 | grep -E '^(Removing|Purging)' || true
in_root apt-get autoremove --purge -y 2>&1 | grep -cE '^Removing' | sed 's/^/dependencies it pulled in, purged: /' || true
rm -f "$root/tmp/$(basename "$deb")"
in_root dpkg-query -W -f='${Status}\n' scangate 2>&1 | sed 's/^/dpkg status: /' || true
for p in /usr/bin/scangate /lib/systemd/system/scangate.service /etc/scangate /etc/default/scangate \
         /var/lib/scangate /var/lib/private/scangate /usr/share/scangate /usr/share/doc/scangate; do
  [[ -e $root$p || -L $root$p ]] && fail "left behind: $p"
done
snapshot > "$work/after.txt"
if ! diff "$work/before.txt" "$work/after.txt" > "$work/diff.txt"; then
  cat "$work/diff.txt"; fail "the root differs from before the install (above)"
fi
echo "nothing left: $(wc -l < "$work/after.txt") paths, the same as before the install"

step "PASS"
