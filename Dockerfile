# scangate in a container: Debian bookworm. The build stage makes the Debian package (deploy/debian/package.cmake,
# as scripts/package.sh does); the runtime stage installs it with apt, which pulls exactly the libraries its
# Depends names (computed by dpkg-shlibdeps from the binary), so the image cannot lack one the binary links.
# Runs as the non-root user scangate; the --ack=filter journal goes to the volume /var/lib/scangate.
# Check: deploy/container/container_test.sh (builds this image with podman and serves /observe from it).
# Build arguments: REVISION, the commit the image is built from (the build context has no .git, so `scangate
# --version` reports it from here; container_test.sh passes `git rev-parse --short=12 HEAD`), VERSION (the
# project's, as CMakeLists.txt's project() says) and SOURCE (where the source lives) for the OCI labels.
ARG REVISION=unknown
ARG VERSION=0.1.0
ARG SOURCE=""
FROM debian:bookworm AS build
ARG REVISION
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config file libboost1.81-dev libboost-json1.81-dev \
      libboost-program-options1.81-dev libpqxx-dev libpq-dev libssl-dev libabsl-dev libgtest-dev \
      libgmock-dev libjs-dygraphs libsystemd-dev libicu-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The binary and the package's documentation and man page only (tests are configured, not built); cpack's
# install step builds nothing else.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSCANGATE_BENCH=OFF \
      -DSCANGATE_REVISION="$REVISION" \
      -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON \
 && cmake --build /build --target scangate scangate_package_files \
 && cd /build && cpack -G DEB -B /package && mv /package/scangate_*.deb /scangate.deb

FROM debian:bookworm-slim
ARG REVISION
ARG VERSION
ARG SOURCE
LABEL org.opencontainers.image.title="scangate" \
      org.opencontainers.image.description="scan-key de-duplication service: a Bloom filter in front of PostgreSQL" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="$SOURCE"
COPY --from=build /scangate.deb /tmp/scangate.deb
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      /tmp/scangate.deb curl && rm -rf /var/lib/apt/lists/* /tmp/scangate.deb \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/scangate --shell /usr/sbin/nologin scangate \
 && install -d -m 0700 -o scangate -g scangate /var/lib/scangate
# Used with SCANGATE_ACK=filter only (the default, commit, keeps no journal).
ENV SCANGATE_JOURNAL_DIR=/var/lib/scangate/journal
# The image's choice: protected mode, as everywhere (docs/security.md "Threat model"). Without a tokens file and a digest
# secret scangate listens on the container's loopback only (and logs "protected_mode"): mount both and set
# SCANGATE_TOKENS_FILE and SCANGATE_DIGEST_SECRET_FILE to serve the container's network, or set
# SCANGATE_INSECURE=on for a network you trust (docker-compose.yml's demo does, published on 127.0.0.1 only).
VOLUME /var/lib/scangate
USER scangate
EXPOSE 8080
ENTRYPOINT ["/usr/bin/scangate"]
