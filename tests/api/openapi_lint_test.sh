#!/usr/bin/env bash
# openapi.yaml lints clean: Redocly CLI (the version tests/api/package-lock.json pins, installed into
# tests/api/node_modules by `scripts/deps.sh test` with npm ci) with tests/api/redocly.yaml (recommended-strict: a
# warning fails too). Runs offline. Fails, never skips, when the pinned linter is not installed.
# Usage: openapi_lint_test.sh SOURCE_DIR
set -euo pipefail
source_dir=${1:?usage: openapi_lint_test.sh SOURCE_DIR}
api=$source_dir/tests/api
redocly=$api/node_modules/.bin/redocly
pinned=$(sed -n 's/.*"@redocly\/cli": "\(.*\)".*/\1/p' "$api/package.json")
if [[ ! -x $redocly ]]; then
  echo "openapi_lint_test: FAIL: $redocly missing: run scripts/deps.sh test (npm ci in tests/api)" >&2
  exit 1
fi
installed=$(node -p "require('$api/node_modules/@redocly/cli/package.json').version")
if [[ $installed != "$pinned" ]]; then
  echo "openapi_lint_test: FAIL: @redocly/cli $installed installed, package.json pins $pinned: run scripts/deps.sh test" >&2
  exit 1
fi
# No telemetry, no update check: the run needs no network.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$redocly" lint --config "$api/redocly.yaml" --format stylish "$source_dir/openapi.yaml"
echo "openapi_lint_test: OK: openapi.yaml lints clean (@redocly/cli $installed, recommended-strict)"
