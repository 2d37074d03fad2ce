#!/usr/bin/env bash
# The Debian package under a real systemd: a Debian bookworm container booting systemd as PID 1 (podman
# --systemd=always; --privileged, as the unit's sandbox needs mount namespaces inside the container) gets the
# package with `apt-get install` while systemd runs (so postinst's daemon-reload runs too), then the operator's
# steps: the database URL into /etc/default/scangate, `systemctl enable --now scangate` (returns at READY=1).
# Checks: active with its STATUS=, a DynamicUser uid, no capabilities, no_new_privs, the seccomp filter on, the
# watchdog armed, /observe new then duplicate, the journal in /var/lib/private/scangate; SIGKILL -> restarted by
# Restart=on-failure and ready again; an upgrade (--reinstall) keeps it enabled and restarts it (postinst:
# deb-systemd-helper, deb-systemd-invoke try-restart); `systemctl stop` -> exit 0; `apt-get purge` -> config,
# state and enablement link gone. PostgreSQL: a throwaway cluster on the host (loopback, --network host).
# Complements package_test.sh (a plain chroot, no systemd, every path compared before/after).
# Usage (root): deploy/debian/systemd_test.sh [DEB]   Needs podman + runc and the base image debian:bookworm
# (made offline by deploy/container/container_test.sh, or here when missing). ~1 min.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:-$(ls "$root_dir"/build/package/scangate_*.deb 2>/dev/null | head -1)}
[[ -f $deb ]] || { echo "no package: run scripts/package.sh first (or pass the .deb)" >&2; exit 1; }
deb=$(realpath "$deb")
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${DEBOOTSTRAP_CACHE:-/var/tmp/scangate-debootstrap-cache}
podman=(podman --runtime runc)
[[ $(id -u) -eq 0 ]] || { echo "run as root" >&2; exit 1; }
for tool in podman runc curl python3; do command -v $tool >/dev/null || { echo "missing $tool" >&2; exit 1; }; done

work=$(mktemp -d /var/tmp/scangate-sdtest.XXXXXX)
chmod 755 "$work"  # the cluster directory below is user postgres's
pgdir=$work/pg
name="scangate-sdtest-$$" image="localhost/scangate-sdtest:$$" pg_port=""
step() { echo; echo "=== $*"; }
fail() { echo "FAIL: $*"; exit 1; }
in_ct() { "${podman[@]}" exec "$name" "$@"; }
cleanup() {
  set +e
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1
  podman rmi -f "$image" >/dev/null 2>&1
  [[ -n $pg_port ]] && "$root_dir/scripts/pg.sh" stop "$pgdir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

step "a bookworm container booting systemd"
if ! podman image exists docker.io/library/debian:bookworm; then  # as deploy/container/container_test.sh
  command -v debootstrap >/dev/null || fail "missing debootstrap"
  mkdir -p "$cache"
  debootstrap --variant=minbase --cache-dir="$cache" bookworm "$work/base" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "$work/base/etc/apt/sources.list.d/" && rm -f "$work/base/etc/apt/sources.list"
  fi
  echo 'Acquire::Check-Valid-Until "false";' > "$work/base/etc/apt/apt.conf.d/99check-valid-until"
  rm -rf "$work/base/var/cache/apt/archives/"*.deb "$work/base/var/lib/apt/lists/"*
  tar -C "$work/base" -c . | podman import - docker.io/library/debian:bookworm >/dev/null 2>&1
  rm -rf "$work/base"
fi
cat > "$work/Containerfile" <<'EOF'
FROM debian:bookworm
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd \
      curl >/dev/null
CMD ["/lib/systemd/systemd"]
EOF
"${podman[@]}" build --network host --pull=never -t "$image" "$work" > "$work/build.log" 2>&1 ||
  { tail -20 "$work/build.log"; fail "podman build"; }
# Limits: podman as root asks for more than this host's hard limits allow (runc: "error setting rlimits").
"${podman[@]}" run -d --name "$name" --privileged --systemd=always --network host \
  --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 "$image" >/dev/null
for _ in $(seq 100); do
  state=$(in_ct systemctl is-system-running 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 0.2
done
echo "systemd: $state, $(in_ct systemctl --version | head -1)"

step "apt-get install ./$(basename "$deb") (systemd running)"
"${podman[@]}" cp "$deb" "$name:/tmp/scangate.deb"
in_ct sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/scangate.deb' \
  > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "apt-get install"; }
grep -E '^Setting up scangate' "$work/install.log"
in_ct /usr/bin/scangate --version
in_ct systemctl is-enabled scangate 2>&1 | sed 's/^/is-enabled after install: /' || true

step "configure and start: systemctl enable --now scangate"
pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$pgdir" && chown postgres: "$pgdir"
"$root_dir/scripts/pg.sh" start "$pgdir" "$pg_port" >/dev/null
url=$("$root_dir/scripts/pg.sh" url "$pgdir" "$pg_port")
in_ct sh -c "printf 'SCANGATE_DATABASE_URL=%s\nSCANGATE_LISTEN=127.0.0.1\nSCANGATE_PORT=%s\nSCANGATE_ACK=filter\n' '$url' '$port' >> /etc/default/scangate"
t0=$(date +%s%N)
in_ct systemctl enable --now scangate 2>&1 || { in_ct journalctl -u scangate --no-pager | tail -20; fail "enable --now"; }
echo "enable --now returned after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
curl -sS -o /dev/null -w 'GET /readyz right after -> %{http_code}\n' "http://127.0.0.1:$port/readyz" | tee "$work/ready.txt"
grep -q ' 200$' "$work/ready.txt" || fail "systemctl returned before /readyz 200"
in_ct systemctl show scangate -p ActiveState -p SubState -p StatusText -p Type -p WatchdogUSec -p User -p DynamicUser
pid=$(in_ct systemctl show -p MainPID --value scangate)
in_ct grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp|Seccomp_filters):' "/proc/$pid/status" | tr '\t' ' '
in_ct systemctl show scangate -p WatchdogTimestampMonotonic | grep -qv '=0$' || fail "the watchdog is not armed"

step "serve"
key="sdtest-$(date +%s%N)"
for _ in 1 2; do
  curl -sS -w ' -> %{http_code}\n' -H 'Content-Type: application/json' \
    --data "{\"key\":\"$key\",\"source\":\"systemd-test\"}" "http://127.0.0.1:$port/observe"
done | tee "$work/observe.txt"
grep -q ' -> 201$' "$work/observe.txt" && grep -q ' -> 200$' "$work/observe.txt" || fail "POST /observe: not new then duplicate"
in_ct stat -c '%A uid=%u %N' /var/lib/scangate /var/lib/private/scangate /var/lib/private/scangate/journal

step "systemctl reload (ExecReload: SIGHUP) and the hardening score"
in_ct systemctl reload scangate || fail "systemctl reload"
for _ in $(seq 50); do
  in_ct journalctl -u scangate --no-pager -o cat | grep -q '"event":"tokens_reload"' && break
  sleep 0.1
done
in_ct journalctl -u scangate --no-pager -o cat | grep -o '"event":"tokens_reload"[^}]*' | tail -1 ||
  fail "no tokens_reload event after systemctl reload"
[[ $(in_ct systemctl is-active scangate || true) == active ]] || fail "not active after reload"
[[ $(in_ct systemctl show -p MainPID --value scangate) == "$pid" ]] || fail "reload restarted the process"
# The running unit's exposure as systemd itself rates it (tests/debian/unit_verify_test.sh rates the file offline).
in_ct systemd-analyze security scangate --no-pager > "$work/security.txt" 2>&1 || true
grep 'Overall exposure level' "$work/security.txt" || fail "systemd-analyze security printed no score"
score=$(grep -oE 'Overall exposure level for scangate.service: [0-9.]+' "$work/security.txt" | grep -oE '[0-9.]+$')
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "exposure $score above 2.0"

step "SIGKILL: Restart=on-failure"
in_ct systemctl kill -s KILL scangate
for _ in $(seq 100); do
  [[ $(in_ct systemctl show -p NRestarts --value scangate) -ge 1 && $(in_ct systemctl is-active scangate || true) == active ]] && break
  sleep 0.2
done
in_ct systemctl show scangate -p NRestarts -p ActiveState -p StatusText
[[ $(in_ct systemctl is-active scangate || true) == active ]] || fail "not restarted"
curl -sS -w ' -> %{http_code}\n' -H 'Content-Type: application/json' \
  --data "{\"key\":\"$key\",\"source\":\"systemd-test\"}" "http://127.0.0.1:$port/observe" | tee "$work/again.txt"
grep -q ' -> 200$' "$work/again.txt" || fail "after the restart the key is not a duplicate"

step "upgrade: apt-get install --reinstall (postinst configure <installed version>)"
# postinst keeps the operator's enable and try-restarts the running service (deb-systemd-helper, -invoke).
pid=$(in_ct systemctl show -p MainPID --value scangate)
in_ct sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall /tmp/scangate.deb' \
  > "$work/upgrade.log" 2>&1 || { cat "$work/upgrade.log"; fail "apt-get install --reinstall"; }
grep -E '^Setting up scangate' "$work/upgrade.log"
[[ $(in_ct systemctl is-enabled scangate 2>&1 || true) == enabled ]] || fail "not enabled after the upgrade"
new_pid=$(in_ct systemctl show -p MainPID --value scangate)
[[ $(in_ct systemctl is-active scangate || true) == active && $new_pid != "$pid" && $new_pid != 0 ]] ||
  fail "not restarted by the upgrade (MainPID $pid -> $new_pid)"
curl -sS -o /dev/null -w 'GET /readyz after the upgrade -> %{http_code}\n' "http://127.0.0.1:$port/readyz" |
  tee "$work/ready2.txt"
grep -q ' 200$' "$work/ready2.txt" || fail "not ready after the upgrade"
echo "upgrade: still enabled, restarted (MainPID $pid -> $new_pid)"

step "systemctl stop scangate"
in_ct systemctl stop scangate
in_ct systemctl show scangate -p ActiveState -p ExecMainStatus -p Result
[[ $(in_ct systemctl show -p ExecMainStatus --value scangate) == 0 ]] || fail "exit status not 0"
in_ct journalctl -u scangate --no-pager -o cat | grep -o '"event":"shutdown","phase":"done"[^}]*' | tail -1

step "apt-get purge scangate"
in_ct sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq scangate' 2>&1 | grep -E '^(Removing|Purging)' || true
for p in /usr/bin/scangate /lib/systemd/system/scangate.service /etc/scangate /etc/default/scangate \
         /var/lib/scangate /var/lib/private/scangate /etc/systemd/system/multi-user.target.wants/scangate.service; do
  if in_ct test -e "$p" || in_ct test -L "$p"; then fail "left behind: $p"; fi
done
in_ct systemctl cat scangate >/dev/null 2>&1 && fail "systemd still knows scangate.service"
echo "nothing left: binary, unit, config, state and enablement link are gone; systemd no longer knows the unit"

step "PASS"
