#!/usr/bin/env bash
# Tests deploy/prometheus/: the rules load (`promtool check rules`), every alert fires and stays silent where
# its unit tests say (`promtool test rules` on scangate-rules.test.yml), and every scangate_* metric the rules,
# their annotations and their test series name is one scangate exports today. "Exported" means a family that
# server/ or storage/ writes through PromWriter::Header("scangate_...", "<type>", ...); a histogram family also
# exports its _bucket, _sum and _count series. Starts nothing.
#   tests/deploy/prometheus_rules_test.sh [source dir]     (ctest: prometheus_rules_test)
# Fails when promtool is missing: scripts/deps.sh installs it (Debian package `prometheus`).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
rules=$root/deploy/prometheus/scangate-rules.yml
tests=$root/deploy/prometheus/scangate-rules.test.yml

if ! command -v promtool >/dev/null; then
  echo "prometheus_rules_test: promtool not found; install the Debian package 'prometheus' (scripts/deps.sh)" >&2
  exit 1
fi

echo "== promtool check rules"
promtool check rules "$rules"
echo "== promtool test rules"
promtool test rules "$tests"

# The exported names: family names and types from the Header() calls, histograms expanded.
exported=$(mktemp)
trap 'rm -f "$exported"' EXIT
grep -rhoE --include='*.cc' --include='*.h' 'Header\("scangate_[a-z0-9_]+", "[a-z]+"' "$root/server" "$root/storage" |
  sed -E 's/^Header\("([a-z0-9_]+)", "([a-z]+)"$/\1 \2/' | sort -u |
  while read -r name type; do
    echo "$name"
    if [[ $type == histogram ]]; then printf '%s\n' "${name}_bucket" "${name}_sum" "${name}_count"; fi
  done | sort -u >"$exported"
families=$(grep -cvE '_(bucket|sum|count)$' "$exported" || true)
if ((families < 30)); then
  # scangate exports ~57 families; far fewer means the Header() pattern no longer finds them.
  echo "prometheus_rules_test: found only $families exported scangate_* families in server/ and storage/;" \
    "has the way metrics are written changed? Fix the grep above." >&2
  exit 1
fi

# Prints the scangate_* names of the files given that are not exported (recording rules, scangate:..., are
# not metric names and do not match).
unexported() {
  grep -hoE 'scangate_[a-z0-9_]+' "$@" | sort -u | while read -r name; do
    grep -qxF "$name" "$exported" || echo "$name"
  done
}

echo "== metric names ($families exported families)"
# The check itself must be able to fail: a name scangate does not export is reported.
probe=$(mktemp)
echo 'expr: scangate_no_such_metric_total > 0' >"$probe"
if [[ $(unexported "$probe") != scangate_no_such_metric_total ]]; then
  rm -f "$probe"
  echo "prometheus_rules_test: the name check did not report scangate_no_such_metric_total" >&2
  exit 1
fi
rm -f "$probe"

missing=$(unexported "$rules" "$tests")
if [[ -n $missing ]]; then
  echo "prometheus_rules_test: deploy/prometheus names metrics scangate does not export (renamed or removed?):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  exit 1
fi
echo "every scangate_* name in deploy/prometheus/ is exported"
