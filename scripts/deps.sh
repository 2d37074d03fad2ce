#!/usr/bin/env bash
# Installs the Debian packages scangate needs, and only when one is missing.
# Idempotent: a second run on a provisioned machine calls no apt at all.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libpqxx-dev libpq-dev libssl-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libsqlite3-dev
  postgresql-15 postgresql-client-15
  wrk curl python3 clang libclang-rt-14-dev
  libjs-dygraphs   # charting library inlined into GET /dashboard at build time (server/metrics/dashboard/)
  chromium         # headless browser for tests/server/dashboard_test
  libsystemd-dev   # build: sd_notify(3) for the Type=notify unit (server/systemd_notify.h)
  systemd          # test: systemd-analyze verify of deploy/debian/scangate.service (tests/debian/)
  dpkg-dev         # package: dpkg-shlibdeps computes the .deb's Depends (scripts/package.sh, CPack)
  file             # package: CPack DEB runs file(1) on the binary before dpkg-shlibdeps
  debootstrap      # package test: the throwaway Debian root of deploy/debian/package_test.sh
  # High availability (deploy/, tests/ha): Patroni with its etcd backend, etcd, HAProxy.
  patroni python3-etcd python3-psycopg2 etcd-server etcd-client haproxy
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "scangate: installing missing packages: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
