#!/usr/bin/env bash
# Installs the Debian packages scangate needs, by set, and only those missing.
#   scripts/deps.sh build        build scangate and serve it (scripts/run.sh): compiler, libraries, PostgreSQL
#   scripts/deps.sh build test   + what the tests need (scripts/test.sh): GoogleTest, benchmarks, clang, Chromium
#   scripts/deps.sh ha           what high availability needs (deploy/): Patroni, etcd, HAProxy
#   scripts/deps.sh build package  + the Debian package's tools (scripts/package.sh): dpkg-dev, file, debootstrap, lintian
#   scripts/deps.sh partitions   what a partitioned store needs (deploy/partitions.sh): PL/Proxy
#   scripts/deps.sh system       + what the system suites run in (deploy/system_test.sh): podman, runc, debootstrap
#   scripts/deps.sh              every set (build test ha package partitions system)
# Idempotent: a second run on a provisioned machine calls no apt (and no npm) at all.
set -euo pipefail

# build: building and serving (scripts/run.sh, tests/scripts/run_test.sh's fresh clone).
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libpqxx-dev libpq-dev libssl-dev libabsl-dev
  libjs-dygraphs   # charting library inlined into GET /dashboard at build time (server/metrics/dashboard/)
  postgresql-15 postgresql-client-15   # scripts/run.sh's own cluster (scripts/data.sh, scripts/pg.sh)
  libsystemd-dev     # sd_notify(3) for the Type=notify unit (server/systemd_notify.h)
  libicu-dev         # the NFC check of raw keys (server/http/unicode_nfc.h)
)

# test: what scripts/test.sh needs on top of build. One package per line: add new ones here.
TEST_PACKAGES=(
  libgtest-dev       # the test suites (SCANGATE_TESTS)
  libgmock-dev
  libbenchmark-dev   # the benchmarks, built by the release build (SCANGATE_BENCH)
  ccache             # scripts/test.sh: the run command's fresh clone reuses the release build's units
  libsqlite3-dev     # bench/journal
  clang              # thread-safety check (-Wthread-safety), libFuzzer (tests/fuzz)
  libclang-rt-14-dev # clang's sanitizer and libFuzzer runtimes
  chromium           # headless browser: tests/server/dashboard_test, cors_browser_test
  python3            # tests/pg_fixture.sh, cors_browser_test, tests/scripts/run_test.sh
  curl               # tests/scripts/run_test.sh, bench/run.sh
  wrk                # HTTP load generator of bench/run.sh
  prometheus         # promtool for tests/deploy/prometheus_rules_test.sh (deploy/prometheus/ rules)
  systemd            # systemd-analyze verify of deploy/debian/scangate.service (tests/debian/)
  postgresql-15-plproxy  # tests/deploy/partitions_test.sh (deploy/partitions.sh's proxy database)
  haproxy            # tests/deploy/haproxy_routing_test.py: deploy/haproxy.cfg's key affinity, the real haproxy
  python3-yaml python3-jsonschema  # tests/api/openapi_responses_test.py: the server's answers against openapi.yaml
  openssl            # openapi_responses_test's certificates (mTLS: certificate-not-allowed)
  nodejs             # npm ci of tests/api/ (the pinned OpenAPI linter; Node >= 20.19, with npm)
  groff-base         # groff renders the man page scangate(8) in tests/debian/man_page_test.sh
  man-db             # systemd-analyze verify opens the unit's Documentation=man:scangate(8) (tests/debian/)
)

# package: what scripts/package.sh and the package's install test need on top of build.
PACKAGE_PACKAGES=(
  dpkg-dev           # dpkg-shlibdeps computes the .deb's Depends (CPack DEB)
  file               # CPack DEB runs file(1) on the binary before dpkg-shlibdeps
  debootstrap        # the throwaway Debian root of deploy/debian/package_test.sh
  lintian            # deploy/debian/lintian_test.sh checks the built .deb (run by package_test.sh)
)

# ha: Patroni with its etcd backend, etcd, HAProxy (deploy/cluster.sh, deploy/ha_test.sh).
HA_PACKAGES=(
  patroni python3-etcd python3-psycopg2 etcd-server etcd-client haproxy
  python3 curl   # deploy/ha_test.sh (free ports), deploy/cluster.sh (health checks)
)

# partitions: the PL/Proxy database of a partitioned exact store (deploy/partitions.sh, sql/proxy/).
PARTITION_PACKAGES=(
  postgresql-15-plproxy
  python3   # deploy/partitions.sh (free ports)
)

# system: the containers of deploy/debian/systemd_test.sh and deploy/container/container_test.sh
# (deploy/system_test.sh), on top of package.
SYSTEM_PACKAGES=(
  podman runc        # systemd as PID 1 in a container; the Dockerfile's image
  debootstrap        # the offline base images (debian:bookworm, -slim) and package_test.sh's root
  python3-yaml       # container_test.sh parses docker-compose.yml
)

sets=("$@")
if ((${#sets[@]} == 0)); then sets=(build test ha package partitions system); fi
wanted=()
for s in "${sets[@]}"; do
  case $s in
    build) wanted+=("${BUILD_PACKAGES[@]}") ;;
    test) wanted+=("${TEST_PACKAGES[@]}") ;;
    ha) wanted+=("${HA_PACKAGES[@]}") ;;
    package) wanted+=("${PACKAGE_PACKAGES[@]}") ;;
    partitions) wanted+=("${PARTITION_PACKAGES[@]}") ;;
    system) wanted+=("${SYSTEM_PACKAGES[@]}") ;;
    *) echo "scripts/deps.sh: unknown set '$s' (expected build, test, ha, package, partitions or system)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${wanted[@]}"; do
  [[ " ${missing[*]} " == *" $p "* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "scangate: installing missing packages (${sets[*]}): ${missing[*]}" >&2
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# test: the OpenAPI linter tests/api/package-lock.json pins (tests/api/openapi_lint_test.sh), from the npm registry
# with npm ci into tests/api/node_modules; again only when the lock file changes (a copy of the one installed is kept
# beside the modules), so a provisioned machine needs no network.
if [[ " ${sets[*]} " == *" test "* ]]; then
  api=$(cd "$(dirname "$0")/.." && pwd)/tests/api
  if ! cmp -s "$api/package-lock.json" "$api/node_modules/.scangate-installed-lock.json"; then
    echo "scangate: npm ci in tests/api (the pinned OpenAPI linter)" >&2
    (cd "$api" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    cp "$api/package-lock.json" "$api/node_modules/.scangate-installed-lock.json"
  fi
fi
