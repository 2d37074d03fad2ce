#!/usr/bin/env bash
# lintian on the built package: no error and no warning left, except the tags deploy/debian/lintian-overrides
# overrides (shipped in the package, each with its reason); an override that matches nothing fails too, so the
# file cannot keep a reason for a tag that is gone. Info and pedantic tags are printed, not failed on. A
# self-check first proves the package without its overrides fails.
# Run by deploy/debian/package_test.sh (deploy/system_test.sh package) before the install test.
# Usage: deploy/debian/lintian_test.sh [DEB]   (default: build/package/scangate_*.deb from scripts/package.sh)
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
deb=${1:-$(ls "$root_dir"/build/package/scangate_*.deb 2>/dev/null | head -1)}
[[ -f $deb ]] || { echo "no package: run scripts/package.sh first (or pass the .deb)" >&2; exit 1; }
command -v lintian >/dev/null || { echo "missing lintian (scripts/deps.sh package)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Self-check: the same package without its overrides must show warnings (so lintian runs its checks here and the
# count below sees them).
dpkg-deb -R "$deb" "$work/unpacked"
rm "$work/unpacked/usr/share/lintian/overrides/scangate"
sed -i '\| usr/share/lintian/overrides/scangate$|d' "$work/unpacked/DEBIAN/md5sums"
dpkg-deb --root-owner-group -b "$work/unpacked" "$work/$(basename "$deb")" >/dev/null
bare=$(lintian --fail-on none "$work/$(basename "$deb")" 2>&1 | grep -cE '^[EW]: ' || true)
((bare > 0)) || { echo "FAIL: self-check: the package without its overrides has no warning"; exit 1; }
echo "self-check: without its overrides the package has $bare errors and warnings"

echo "lintian $(lintian --version | awk '{print $2}') on $(basename "$deb")"
# Every tag shown, the overridden ones with their reasons; the verdict is counted here (E: and W: lines are the
# errors and warnings no override explains) — lintian's own --fail-on counts a shown override as a failure.
rc=0
out=$(lintian --display-info --pedantic --show-overrides --fail-on none "$deb" 2>&1) || rc=$?
[[ -n $out ]] && echo "$out"
errors=$(grep -cE '^E: ' <<<"$out" || true) warnings=$(grep -cE '^W: ' <<<"$out" || true)
echo "lintian: $errors errors, $warnings warnings, $(grep -cE '^I: ' <<<"$out" || true) info," \
     "$(grep -cE '^P: ' <<<"$out" || true) pedantic, $(grep -cE '^O: ' <<<"$out" || true) overridden"
((rc == 0)) || { echo "FAIL: lintian did not run (exit status $rc)"; exit 1; }
((errors + warnings == 0)) || { echo "FAIL: lintian reports errors or warnings no override explains (above)"; exit 1; }
if grep -qE 'unused-override|mismatched-override' <<<"$out"; then
  echo "FAIL: an override of deploy/debian/lintian-overrides matches nothing (above)"; exit 1
fi
echo "lintian: PASS"
