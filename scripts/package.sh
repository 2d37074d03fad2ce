#!/usr/bin/env bash
# Builds the Debian package: build/package/scangate_<version>-1_<arch>.deb (contents: deploy/debian/package.cmake).
# A Release build of the scangate binary only (no tests, no benchmarks compiled) in build/package-build, its man
# page and documentation (target scangate_package_files), then CPack's DEB generator, whose dpkg-shlibdeps
# computes Depends. Check it: deploy/debian/package_test.sh (lintian, then an install in a throwaway root).
# Run from anywhere; needs the build packages of scripts/deps.sh (it runs it).
# Install: apt-get install ./build/package/scangate_*.deb
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build/package-build
out=$root/build/package

"$root/scripts/deps.sh" build package
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# CMAKE_SKIP_INSTALL_ALL_DEPENDENCY: cpack's install step would otherwise build every target (the tests too).
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCANGATE_BENCH=OFF \
      -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON "${launcher[@]}" >/dev/null
nice cmake --build "$build" --target scangate scangate_package_files
rm -rf "$out" && mkdir -p "$out"
(cd "$build" && cpack -G DEB -B "$out" >/dev/null)
rm -rf "$out/_CPack_Packages"
deb=$(ls "$out"/scangate_*.deb)
echo "$deb"
dpkg-deb --field "$deb" Package Version Architecture Depends
