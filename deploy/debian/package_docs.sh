#!/usr/bin/env bash
# Lays out the Debian package's documentation in a staging directory that deploy/debian/package.cmake installs
# whole (the files are known only when this runs: docs/ is read as it is):
#   doc/            -> /usr/share/doc/scangate/: README.md, openapi.yaml, README.Debian (docs/install.md), the
#                      docs/ pages under docs/, changelog (CHANGELOG.md), changelog.Debian and NEWS.Debian,
#                      copyright; examples/
#   man/            -> /usr/share/man/man8/: scangate.8.gz
#   lintian/        -> /usr/share/lintian/overrides/: scangate (deploy/debian/lintian-overrides)
# Compression as Debian policy says (12.3, 12.7): changelogs and the man page always, any other document over
# 4 KiB, with gzip -9n (no name, no time stamp: the same bytes every build); the copyright file and examples/ never
# (an example is copied, not read). changelog and NEWS must name the version being packaged.
# Usage: package_docs.sh <source dir> <scangate.8> <copyright> <version-release> <staging dir>
set -euo pipefail
src=$1 man=$2 copyright=$3 version=$4 out=$5
deb=$src/deploy/debian

fail() { echo "package_docs.sh: $*" >&2; exit 1; }
for f in changelog NEWS; do
  v=$(dpkg-parsechangelog -l "$deb/$f" -S Version)
  [[ $v == "$version" ]] || fail "deploy/debian/$f's latest entry is $v, the package is $version: add an entry"
done
[[ -f $src/docs/install.md ]] || fail "no docs/install.md (the package's README.Debian)"

rm -rf "$out" && mkdir -p "$out/doc/examples" "$out/doc/docs" "$out/man" "$out/lintian"
gz() { gzip -9n -c "$1" > "$2.gz"; }
# doc FILE DEST: DEST.gz when FILE is over 4 KiB, else DEST as it is.
doc() {
  if (($(stat -c %s "$1") > 4096)); then gz "$1" "$2"; else install -m 0644 "$1" "$2"; fi
}

gz "$deb/changelog" "$out/doc/changelog.Debian"
gz "$deb/NEWS" "$out/doc/NEWS.Debian"
# The upstream changelog, where Debian policy 12.7 puts it.
if [[ -f $src/CHANGELOG.md ]]; then gz "$src/CHANGELOG.md" "$out/doc/changelog"; fi
doc "$src/README.md" "$out/doc/README.md"
doc "$src/openapi.yaml" "$out/doc/openapi.yaml"
doc "$src/docs/install.md" "$out/doc/README.Debian"
for page in "$src"/docs/*.md; do doc "$page" "$out/doc/docs/$(basename "$page")"; done
install -m 0644 "$copyright" "$out/doc/copyright"

install -m 0644 "$src/deploy/scangate.conf" "$out/doc/examples/scangate.conf"
install -m 0644 "$deb/examples/tokens" "$out/doc/examples/tokens"
install -m 0644 "$src/deploy/haproxy.cfg" "$out/doc/examples/haproxy.cfg"
install -m 0644 "$src/deploy/prometheus/scangate-rules.yml" "$out/doc/examples/prometheus-rules.yml"
install -m 0644 "$src/deploy/grafana/scangate.json" "$out/doc/examples/grafana-dashboard.json"

gz "$man" "$out/man/scangate.8"
install -m 0644 "$deb/lintian-overrides" "$out/lintian/scangate"
