#!/usr/bin/env bash
# The system suites in one command: the tests that prove scangate works as an installed service, each too heavy
# or too privileged for the test command (scripts/test.sh). One release build (tests on), then, in order:
#   package      scripts/package.sh + deploy/debian/package_test.sh: the .deb built, installed, used and purged in a
#                throwaway debootstrap root
#   systemd      deploy/debian/systemd_test.sh: that .deb under a real systemd (PID 1 in a podman container):
#                enable --now (READY=1), systemctl reload, the watchdog, the hardening score, SIGKILL -> restart,
#                stop, purge
#   container    deploy/container/container_test.sh: the image built from the Dockerfile, serving, its --version
#                and OCI labels
#   ha           deploy/ha_test.sh: PostgreSQL failover under Patroni, an instance killed behind HAProxy
#   partitions   deploy/partitions_fault_test.sh: the partitioned store under faults
# Each suite prints PASS or FAIL with its wall time and its figure; the last line is "system: N passed, N failed".
# The whole run is recorded in deploy/results/system_test.log (its first line names the commit it ran on).
#   deploy/system_test.sh [SUITE...]        (root: debootstrap, podman, mount; ~30-40 min on 2 cores)
# Run it before a release and after touching deploy/, storage/ or server/app*. Needs network access to the Debian
# mirror (debootstrap, apt inside the roots): MIRROR and DEBOOTSTRAP_CACHE as package_test.sh says.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "system_test: run as root (debootstrap, podman, mount)" >&2; exit 1; }
all=(package systemd container ha partitions)
suites=("$@")
((${#suites[@]} > 0)) || suites=("${all[@]}")
for s in "${suites[@]}"; do
  [[ " ${all[*]} " == *" $s "* ]] || { echo "system_test: unknown suite '$s' (${all[*]})" >&2; exit 2; }
done

# The record is written beside it and moved into place at the end: written in place, the tracked file being
# rewritten made the tree "-dirty" in every revision the run printed.
results=$root/deploy/results
record=$results/system_test.log
if [[ -z ${SCANGATE_SYSTEM_RECORD:-} ]]; then
  mkdir -p "$results"
  partial=$(mktemp "$results/.system_test.log.XXXXXX")
  trap 'rm -f "$partial"' EXIT  # an interrupted run leaves the last complete record in place
  SCANGATE_SYSTEM_RECORD=$partial "$0" "$@" 2>&1 | tee "$partial"
  rc=${PIPESTATUS[0]}
  chmod 644 "$partial"
  mv "$partial" "$record"
  exit "$rc"
fi
work=$(mktemp -d /tmp/scangate-system.XXXXXX)
trap 'rm -rf "$work"' EXIT
commit=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[[ -z $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] || commit+=-dirty
echo "# deploy/system_test.sh on $commit, $(date -u '+%Y-%m-%d %H:%M UTC'), suites: ${suites[*]}"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(uname -sr)"

build=$root/build/release
t0=$SECONDS
echo "== packages and the release build (tests on)"
sets="build test package system ha partitions"
targets=(scangate)  # the package and the image build their own; ha and partitions run these
[[ " ${suites[*]} " == *" ha "* ]] && targets+=(ha_failover_test)
[[ " ${suites[*]} " == *" partitions "* ]] && targets+=(partition_fault_test)
if ! "$root/deploy/build_test_binaries.sh" "$build" "$sets" "${targets[@]}" >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"
  echo "system: 0 passed, ${#suites[@]} failed"
  exit 1
fi
echo "built in $((SECONDS - t0)) s"

passed=0 failed=0
summary=()
# run NAME FIGURE-REGEX COMMAND...: runs one suite with its output indented in the record, then PASS/FAIL, the
# wall time and the lines of its output that match FIGURE-REGEX (the suite's own figures).
run() {
  local name=$1 figures=$2
  shift 2
  local log=$work/$name.log start=$SECONDS rc=0
  echo
  echo "==== $name: $*"
  "$@" >"$log" 2>&1 || rc=$?
  sed 's/^/  | /' "$log"
  local secs=$((SECONDS - start)) figure
  figure=$(grep -E "$figures" "$log" | tail -3 | tr '\n' ';' | sed 's/;$//')
  if ((rc == 0)); then
    passed=$((passed + 1))
    summary+=("PASS $name (${secs} s): ${figure:-no figure printed}")
  else
    failed=$((failed + 1))
    summary+=("FAIL $name (${secs} s, exit $rc): $(tail -1 "$log")")
  fi
  echo "${summary[-1]}"
}

for s in "${suites[@]}"; do
  case $s in
    package)
      run package '^lintian: [0-9]|scangate [0-9.]+ \(commit|licence:' \
        bash -c "'$root/scripts/package.sh' && '$root/deploy/debian/package_test.sh'" ;;
    systemd)
      run systemd 'Overall exposure|enable --now returned|NRestarts=' "$root/deploy/debian/systemd_test.sh" ;;
    container)
      run container 'built localhost|scangate [0-9.]+ \(commit|image size|PASS' \
        "$root/deploy/container/container_test.sh" ;;
    ha)
      run ha '^ha: .*(answered|unavailable|gap|double|lost)|^\[  PASSED' "$root/deploy/ha_test.sh" --no-build ;;
    partitions)
      run partitions '^partitions: .*(violations|PASS|rate)|^\[  PASSED' \
        "$root/deploy/partitions_fault_test.sh" --no-build ;;
  esac
done

echo
echo "==== summary ($commit, $((SECONDS - t0)) s in all)"
printf '%s\n' "${summary[@]}"
echo "system: $passed passed, $failed failed"
((failed == 0))
