#!/usr/bin/env bash
# Tests deploy/prometheus/ and deploy/grafana/: the rules load (`promtool check rules`), every alert fires and
# stays silent where its unit tests say (`promtool test rules` on scangate-rules.test.yml), every query of the
# Grafana dashboard parses and names only recording rules the rules file defines, and every scangate_* metric
# the rules, their annotations, their test series and the dashboard name is one scangate exports today.
# "Exported" means a family that server/ or storage/ writes through PromWriter::Header or ::Single("scangate_...",
# "<type>", ...); a histogram family also exports its _bucket, _sum and _count series. Starts nothing.
#   tests/deploy/prometheus_rules_test.sh [source dir]     (ctest: prometheus_rules_test)
# Fails when promtool is missing: scripts/deps.sh installs it (Debian package `prometheus`).
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
rules=$root/deploy/prometheus/scangate-rules.yml
tests=$root/deploy/prometheus/scangate-rules.test.yml
dashboard=$root/deploy/grafana/scangate.json

if ! command -v promtool >/dev/null; then
  echo "prometheus_rules_test: promtool not found; install the Debian package 'prometheus' (scripts/deps.sh)" >&2
  exit 1
fi

echo "== promtool check rules"
promtool check rules "$rules"
echo "== promtool test rules"
promtool test rules "$tests"

echo "== Grafana dashboard queries"
# Each panel query, with the dashboard's variables replaced, becomes a recording rule for promtool to parse.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$dashboard" "$work/dashboard-rules.yml" <<'PY'
import json, sys
dash = json.load(open(sys.argv[1]))
exprs = [t['expr'] for p in dash['panels'] for t in p.get('targets', [])]
if len(exprs) < 20:
    sys.exit(f'only {len(exprs)} queries found in {sys.argv[1]}')
with open(sys.argv[2], 'w') as out:
    out.write('groups:\n  - name: dashboard\n    rules:\n')
    for i, e in enumerate(exprs):
        e = e.replace('$__rate_interval', '5m').replace('$job', 'scangate').replace('$instance', '.+')
        out.write(f'      - record: dashboard_query_{i}\n        expr: {json.dumps(e)}\n')
print(f'{len(exprs)} queries')
PY
promtool check rules "$work/dashboard-rules.yml"
undefined=$(grep -oE 'scangate:[a-z0-9_:]+' "$dashboard" | sort -u | while read -r name; do
  grep -qE "^ *- record: $name\$" "$rules" || echo "$name"
done)
if [[ -n $undefined ]]; then
  echo "prometheus_rules_test: deploy/grafana/scangate.json uses recording rules scangate-rules.yml does not define:" >&2
  echo "$undefined" | sed 's/^/  /' >&2
  exit 1
fi

# The exported names: family names and types from the Header() calls, histograms expanded.
exported=$work/exported
grep -rhoE --include='*.cc' --include='*.h' '(Header|Single)\("scangate_[a-z0-9_]+", "[a-z]+"' "$root/server" "$root/storage" |
  sed -E 's/^(Header|Single)\("([a-z0-9_]+)", "([a-z]+)"$/\2 \3/' | sort -u |
  while read -r name type; do
    echo "$name"
    if [[ $type == histogram ]]; then printf '%s\n' "${name}_bucket" "${name}_sum" "${name}_count"; fi
  done | sort -u >"$exported"
families=$(grep -cvE '_(bucket|sum|count)$' "$exported" || true)
if ((families < 30)); then
  # scangate exports ~107 families; far fewer means the Header() pattern no longer finds them.
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
probe=$work/probe.yml
echo 'expr: scangate_no_such_metric_total > 0' >"$probe"
if [[ $(unexported "$probe") != scangate_no_such_metric_total ]]; then
  echo "prometheus_rules_test: the name check did not report scangate_no_such_metric_total" >&2
  exit 1
fi

missing=$(unexported "$rules" "$tests" "$dashboard")
if [[ -n $missing ]]; then
  echo "prometheus_rules_test: deploy/prometheus or deploy/grafana names metrics scangate does not export (renamed or removed?):" >&2
  echo "$missing" | sed 's/^/  /' >&2
  exit 1
fi
echo "every scangate_* name in deploy/prometheus/ and deploy/grafana/ is exported"
