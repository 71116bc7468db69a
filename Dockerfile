# psdb:latest, the one image deploy/*.yaml runs: ps-scheduler, ps-server,
# ps-train and ps-dump in /usr/local/bin, and Debian's etcd (etcd-server) for
# deploy/etcd.yaml.
#
#   docker build -t psdb:latest .      (from the repository root)
#
# The packages are dev.sh's BUILD_PACKAGES and TEST_PACKAGES lists (and the
# etcd protos it unpacks under .cache/protos), installed by `./dev.sh deps`: the
# lists live in dev.sh alone. They are the build's and the runtime's at once
# (shared libraries, etcd), so the image is one stage: a runtime stage would
# need a second list to keep in step with the first.
# Not built or pulled in psdb's CI (no registry there): deploy/README.md.
FROM debian:bookworm

ENV DEBIAN_FRONTEND=noninteractive
# dev.sh's own build parallelism (PSDB_JOBS, default 2).
ARG PSDB_JOBS=4
ENV PSDB_JOBS=${PSDB_JOBS}

WORKDIR /src/psdb
# dev.sh first, alone, so the package layer is rebuilt only when the list
# changes, not on every source change.
COPY dev.sh ./
RUN ./dev.sh deps && rm -rf /var/lib/apt/lists/*

COPY . .
RUN ./dev.sh build build/release \
 && install -m 0755 build/release/tools/ps-scheduler build/release/tools/ps-server \
        build/release/tools/ps-train build/release/tools/ps-dump /usr/local/bin/ \
 && cd / && rm -rf /src/psdb

WORKDIR /
# Each manifest names its command (ps-scheduler, ps-server, ps-train, etcd).
CMD ["ps-server", "--help"]
