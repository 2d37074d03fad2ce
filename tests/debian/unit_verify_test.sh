#!/usr/bin/env bash
# ctest unit_verify: deploy/debian/scangate.service passes `systemd-analyze verify` with no diagnostic at all
# (verify exits 0 on an unknown or misspelt key, so any output fails), its hardening scores an exposure of
# at most 2.0 in `systemd-analyze security --offline`, and it keeps the settings the package relies on.
# verify checks that ExecStart is executable: a copy of the unit runs the freshly built binary instead of
# /usr/bin/scangate; and that the man page of Documentation= opens (scangate(8), generated here). A self-check
# first proves a misspelt key is caught.
# Usage: unit_verify_test.sh <source dir> <built scangate binary> <work dir>
set -euo pipefail
src=$1 bin=$(realpath "$2") work=$3
unit=$src/deploy/debian/scangate.service

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (Debian package systemd; scripts/deps.sh)"
[[ -x $bin ]] || fail "no built binary at $bin"

rm -rf "$work" && mkdir -p "$work/good" "$work/bad"
grep -q '^ExecStart=/usr/bin/scangate$' "$unit" || fail "ExecStart is not /usr/bin/scangate (the package installs it there)"
sed "s|^ExecStart=/usr/bin/scangate\$|ExecStart=$bin|" "$unit" > "$work/good/scangate.service"
# verify opens each Documentation=man: page with man(1): the package's scangate(8), built as the package builds
# it, on MANPATH.
command -v man >/dev/null || fail "man is missing (Debian package man-db; scripts/deps.sh)"
mkdir -p "$work/man/man8"
"$src/deploy/debian/man_page.sh" "$bin" "$src/deploy/debian/scangate.8.in" "$work/man/man8/scangate.8"
export MANPATH=$work/man

# verify: exit status 0 and nothing printed.
verify() {
  local out rc=0
  out=$(systemd-analyze verify "$1" 2>&1) || rc=$?
  [[ $rc -eq 0 && -z $out ]] || { echo "$out"; return 1; }
}

# Self-check: a misspelt key must fail the check (verify alone would pass it).
sed 's/^ProtectSystem=/ProtectSistem=/' "$work/good/scangate.service" > "$work/bad/scangate.service"
if verify "$work/bad/scangate.service" >/dev/null; then fail "self-check: a misspelt key was not caught"; fi

verify "$work/good/scangate.service" || fail "systemd-analyze verify reported the above"
echo "systemd-analyze verify: clean"

# The hardening: exposure 0.0 (best) .. 10.0; --threshold is in tenths.
systemd-analyze security --offline=true --threshold=20 "$work/good/scangate.service" > "$work/security.txt" 2>&1 ||
  { tail -3 "$work/security.txt"; fail "systemd-analyze security: exposure above 2.0"; }
grep 'Overall exposure level' "$work/security.txt"

# Settings the package and the service rely on.
for line in Type=notify WatchdogSec=30s DynamicUser=yes StateDirectory=scangate ProtectSystem=strict \
            NoNewPrivileges=yes ProtectHome=yes PrivateTmp=yes CapabilityBoundingSet= \
            'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' SystemCallFilter=@system-service \
            Restart=on-failure RestartPreventExitStatus=2 EnvironmentFile=-/etc/default/scangate \
            Environment=SCANGATE_CONFIG=/etc/scangate/scangate.conf 'Documentation=man:scangate(8)'; do
  grep -qxF "$line" "$unit" || fail "the unit lacks '$line'"
done
# TimeoutStopSec must cover the drain deadline (server/app.cc kDrainDeadline) with room for the flush.
drain=$(sed -n 's/^constexpr auto kDrainDeadline = std::chrono::seconds(\([0-9]*\)).*/\1/p' "$src/server/app.cc")
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$unit")
[[ -n $drain && -n $stop ]] || fail "cannot read kDrainDeadline ($drain) or TimeoutStopSec ($stop)"
((stop >= drain + 10)) || fail "TimeoutStopSec=${stop}s leaves less than 10 s past the ${drain} s drain deadline"
echo "OK: unit verified (TimeoutStopSec=${stop}s, drain deadline ${drain}s)"
