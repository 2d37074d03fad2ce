#!/usr/bin/env bash
# The container image's check: builds the Dockerfile with podman, runs the image against a throwaway PostgreSQL
# on the host (loopback; --network host), and serves POST /observe from it: new, then duplicate, with
# SCANGATE_ACK=filter so the journal is written to the image's volume; checks the process is not root; stops it
# (podman stop = SIGTERM, exit 0). Also parses docker-compose.yml (podman-compose config when installed, else
# Python's yaml) and checks its scangate service names what the image needs.
# No registry is reachable here: the base images debian:bookworm and debian:bookworm-slim are made offline once
# with debootstrap --variant=minbase and `podman import` (kept in podman's storage; REBUILD_BASE=1 remakes them).
# Usage (root): deploy/container/container_test.sh     Env: MIRROR, DEBOOTSTRAP_CACHE (as package_test.sh),
# NO_CACHE=1 (build every layer again). deploy/container/ is in .dockerignore: editing this file rebuilds nothing.
# The image build compiles scangate inside the container: ~10 min on 2 cores.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/../.." && pwd)
mirror=${MIRROR:-http://deb.debian.org/debian}
cache=${DEBOOTSTRAP_CACHE:-/var/tmp/scangate-debootstrap-cache}
image=localhost/scangate:container-test
podman=(podman --runtime runc)
[[ $(id -u) -eq 0 ]] || { echo "run as root (podman, debootstrap)" >&2; exit 1; }
for tool in podman runc debootstrap curl python3; do
  command -v $tool >/dev/null || { echo "missing $tool (apt-get install podman runc debootstrap)" >&2; exit 1; }
done

work=$(mktemp -d /var/tmp/scangate-ctest.XXXXXX)
chmod 755 "$work"  # the cluster directory below is user postgres's
pgdir=$work/pg
container="scangate-ctest-$$" volume="scangate-ctest-$$" pg_port=""
step() { echo; echo "=== $*"; }
fail() { echo "FAIL: $*"; exit 1; }
cleanup() {
  set +e
  "${podman[@]}" rm -f "$container" >/dev/null 2>&1
  podman volume rm -f "$volume" >/dev/null 2>&1
  [[ -n $pg_port ]] && "$root_dir/scripts/pg.sh" stop "$pgdir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

step "base images (offline: debootstrap + podman import)"
if [[ ${REBUILD_BASE:-0} == 1 ]] || ! podman image exists docker.io/library/debian:bookworm; then
  mkdir -p "$cache"
  debootstrap --variant=minbase --cache-dir="$cache" bookworm "$work/base" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
  # The suites of the official image (bookworm, -updates, -security) as the host's apt knows them.
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "$work/base/etc/apt/sources.list.d/" && rm -f "$work/base/etc/apt/sources.list"
  fi
  echo 'Acquire::Check-Valid-Until "false";' > "$work/base/etc/apt/apt.conf.d/99check-valid-until"
  rm -rf "$work/base/var/cache/apt/archives/"*.deb "$work/base/var/lib/apt/lists/"*
  tar -C "$work/base" -c . | podman import --change 'CMD ["/bin/bash"]' - docker.io/library/debian:bookworm >/dev/null 2>&1
  podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  rm -rf "$work/base"
fi
# deploy/debian/systemd_test.sh makes debian:bookworm alone (deploy/system_test.sh runs it first): the runtime
# stage's -slim is the same minimal root here.
podman image exists docker.io/library/debian:bookworm-slim ||
  podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep 'library/debian'

step "podman build (the Dockerfile)"
t0=$SECONDS
build_flags=()
[[ ${NO_CACHE:-0} == 1 ]] && build_flags+=(--no-cache)  # a recorded run: every layer built now
# The identity the image states (Dockerfile ARGs): the commit of this checkout (-dirty with uncommitted changes to
# tracked files, as server/version.cmake says it), the project version from CMakeLists.txt.
revision=$(git -C "$root_dir" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[[ $revision == unknown || -z $(git -C "$root_dir" status --porcelain --untracked-files=no 2>/dev/null) ]] ||
  revision+=-dirty
version=$(sed -nE 's/^project\(scangate VERSION ([0-9.]+).*/\1/p' "$root_dir/CMakeLists.txt")
build_flags+=(--build-arg "REVISION=$revision" --build-arg "VERSION=$version")
nice "${podman[@]}" build --network host --pull=never "${build_flags[@]}" -t "$image" "$root_dir" > "$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; fail "podman build"; }
echo "built $image in $((SECONDS - t0)) s"
grep -E 'STEP [0-9]+/|^COMMIT' "$work/build.log" | cut -c1-150 || true
podman image inspect "$image" --format 'User={{.Config.User}} Volumes={{.Config.Volumes}} Entrypoint={{.Config.Entrypoint}} Env={{.Config.Env}}'

step "PostgreSQL: a throwaway cluster on the host, loopback"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pg_port=$(free_port)
mkdir -p "$pgdir" && chown postgres: "$pgdir"
"$root_dir/scripts/pg.sh" start "$pgdir" "$pg_port" >/dev/null
echo "cluster on 127.0.0.1:$pg_port"

step "podman run"
port=$(free_port)
podman volume create "$volume" >/dev/null
# podman as root asks for limits above this host's hard ones (and runc then fails with "error setting rlimits"):
# the open-file limit at the host's, processes (threads of uid 10001) well below it.
"${podman[@]}" run -d --name "$container" --network host --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" \
  --ulimit nproc=4096:4096 -v "$volume:/var/lib/scangate" \
  -e SCANGATE_DATABASE_URL="$("$root_dir/scripts/pg.sh" url "$pgdir" "$pg_port")" \
  -e SCANGATE_LISTEN=127.0.0.1 -e SCANGATE_PORT="$port" -e SCANGATE_ACK=filter "$image" >/dev/null
for _ in $(seq 300); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") == 200 ]] && break
  [[ $(podman inspect -f '{{.State.Running}}' "$container") == true ]] || break
  sleep 0.1
done
curl -sS -o /dev/null -w 'GET /readyz -> %{http_code}\n' "http://127.0.0.1:$port/readyz" | tee "$work/ready.txt"
grep -q ' 200$' "$work/ready.txt" || { podman logs "$container" | tail -20; fail "not ready"; }
"${podman[@]}" exec "$container" id | sed 's/^/inside: /'
[[ $("${podman[@]}" exec "$container" id -u) != 0 ]] || fail "runs as root"
"${podman[@]}" exec "$container" /usr/bin/scangate --version | tee "$work/version.txt"
grep -qF "scangate $version (commit $revision, Release)" "$work/version.txt" ||
  fail "--version does not name $version, commit $revision and the build type"
labels=$(podman image inspect -f '{{range $k, $v := .Labels}}{{$k}}={{$v}}{{"\n"}}{{end}}' "$image")
echo "$labels" | grep '^org.opencontainers' | sed 's/^/label: /'
for want in "org.opencontainers.image.version=$version" "org.opencontainers.image.revision=$revision" \
    "org.opencontainers.image.licenses=Apache-2.0"; do
  grep -qxF "$want" <<<"$labels" || fail "image label $want missing"
done

step "serve"
key="ctest-$(date +%s%N)"
for _ in 1 2; do
  curl -sS -w ' -> %{http_code}\n' -H 'Content-Type: application/json' \
    --data "{\"key\":\"$key\",\"source\":\"container-test\"}" "http://127.0.0.1:$port/observe"
done | tee "$work/observe.txt"
grep -q ' -> 201$' "$work/observe.txt" && grep -q ' -> 200$' "$work/observe.txt" || fail "POST /observe: not new then duplicate"
echo "the volume:"; "${podman[@]}" exec "$container" ls -ln /var/lib/scangate /var/lib/scangate/journal | sed 's/^/  /'

step "stop (podman stop: SIGTERM)"
podman stop -t 30 "$container" >/dev/null
rc=$(podman inspect -f '{{.State.ExitCode}}' "$container")
echo "exit status $rc"
podman logs "$container" 2>&1 | grep -o '"event":"shutdown","phase":"done"[^}]*' || true
[[ $rc == 0 ]] || { podman logs "$container" | tail -20; fail "exit status $rc"; }

step "protected mode (the image's default): no tokens, no digest secret"
# A non-loopback --listen without both is refused at start (exit 2) naming the flags; auto listens on loopback.
set +e
"${podman[@]}" run --rm --network host --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 \
  -e SCANGATE_DATABASE_URL=postgresql://nobody@127.0.0.1:1/x -e SCANGATE_LISTEN=0.0.0.0 "$image" \
  >"$work/protected.txt" 2>&1
rc=$?
set -e
sed 's/^/  /' "$work/protected.txt" | head -3
[[ $rc == 2 ]] && grep -q -- '--tokens-file (or --tls-client-ca) and --digest-secret-file' "$work/protected.txt" ||
  fail "SCANGATE_LISTEN=0.0.0.0 without tokens and a digest secret: exit $rc, not 2 naming the flags"

step "docker-compose.yml"
if command -v podman-compose >/dev/null; then
  (cd "$root_dir" && podman-compose config) > "$work/compose.yml"
else
  cp "$root_dir/docker-compose.yml" "$work/compose.yml"
  echo "(podman-compose not installed: parsed with Python's yaml)"
fi
python3 - "$work/compose.yml" <<'EOF'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
s = c["services"]["scangate"]
env = s["environment"]
env = dict(e.split("=", 1) for e in env) if isinstance(env, list) else env
assert "SCANGATE_DATABASE_URL" in env, "scangate: no SCANGATE_DATABASE_URL"
assert any(str(v).endswith(":/var/lib/scangate") or str(v).split(":")[1:2] == ["/var/lib/scangate"]
           for v in s.get("volumes", [])), "scangate: no volume on /var/lib/scangate"
assert s["depends_on"]["postgres"]["condition"] == "service_healthy", "scangate: does not wait for postgres"
print("compose: services", sorted(c["services"]), "- scangate: build", s["build"], "volumes", s["volumes"])
EOF

step "PASS"
