# The Switchboard image: `switchboard` (runtime pods, the gateway, chat, demo-tools; built
# without the `local` feature, so no simulator) and `switchboard-operator`, on a distroless
# base with glibc and CA certificates, no shell, user 65532. The Helm chart runs
# `switchboard-operator run`, and the operator runs `switchboard runtime` in Agent pods.
#
#   docker build -t ghcr.io/switchboard-dev/switchboard:0.1.0 .      (or podman build)
#
# tests/cluster/image.sh makes the same image here without a registry or a Docker engine
# (same paths, user and command), from binaries built in the tree.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
# cmake: the `opus` crate builds libopus (the gateway's WebRTC edge) from its bundled source.
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
COPY . .
# Whole-program LTO for the data plane, size-optimised operator: see Cargo.toml's profiles.
RUN cargo build --locked --profile release-dataplane -p switchboard-dataplane --no-default-features --bin switchboard \
 && cargo build --locked --profile release-operator -p switchboard-operator --bin switchboard-operator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release-dataplane/switchboard /usr/local/bin/switchboard
COPY --from=build /src/target/release-operator/switchboard-operator /usr/local/bin/switchboard-operator
ENV PATH=/usr/local/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /
CMD ["switchboard", "--help"]
