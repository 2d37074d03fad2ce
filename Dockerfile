# scangate in a container: Debian bookworm, the same packages the scripts install.
FROM debian:bookworm AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config libboost1.81-dev libboost-json1.81-dev \
      libboost-program-options1.81-dev libpqxx-dev libpq-dev libssl-dev libabsl-dev libgtest-dev \
      libgmock-dev libbenchmark-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCANGATE_BENCH=OFF \
 && cmake --build /build --target scangate

FROM debian:bookworm-slim
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libboost-json1.81.0 libboost-program-options1.81.0 libpqxx-6.4 libssl3 curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/scangate /usr/local/bin/scangate
USER nobody
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/scangate"]
