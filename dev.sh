#!/usr/bin/env bash
# psdb's one entry point for a fresh machine (Debian 12, run as root or with sudo).
#   ./dev.sh run [ARGS]   install what is missing, build (Release), run the main job
#   ./dev.sh test         install what is missing, build with ASan+UBSan, run every test
#   ./dev.sh deps         only install the Debian packages psdb needs (build and tests)
#   ./dev.sh build [DIR]  only build (Release) into DIR (default build/release)
set -euo pipefail
cd "$(dirname "$0")"

# Every dependency psdb has, as Debian package names. CUDA and NCCL are not
# here: they come with the machine image and are optional (PSDB_WITH_CUDA=AUTO).
# What building everything (and running the main job) needs:
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  librocksdb-dev libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev libeigen3-dev
  libssl-dev openssl libhiredis-dev gnuplot-nox python3
  pybind11-dev python3-dev python3-numpy
  prometheus-cpp-dev nlohmann-json3-dev
  # Compressed Criteo data (train/line_reader.h): .gz and .zst files.
  zlib1g-dev libzstd-dev
  # gloo: CPU collectives of dense AllReduce (collective/, ps-train
  # --dense=allreduce); NCCL comes with the CUDA toolkit.
  libgloo-dev
)
# What the test suite needs beyond the build (./dev.sh test installs both):
TEST_PACKAGES=(
  # RocksDB's ldb reads a checkpoint (tests/tools/dump_test.cc).
  rocksdb-tools
  # Real servers the tests start: Redis (ps-bench server/serve), etcd (the
  # control plane on etcd), Prometheus (the metrics tests read /metrics
  # back through it; curl scrapes it); tests/deploy/check_deploy.py reads
  # deploy/'s YAML.
  redis-server etcd-server etcd-client prometheus curl python3-yaml
  # The Python tests: pytest, and torch for psdb.torch.
  python3-torch python3-pytest
  # The libFuzzer targets (tests/fuzz/, run by `./dev.sh test`): clang and
  # its fuzzer + sanitizer runtimes (libclang_rt.fuzzer-x86_64.a).
  clang libclang-rt-14-dev
)
# etcd's v3 API protos (rpc/control/etcd_client.h generates its stubs from
# them) and the gogoproto and google/api protos they import ship only in
# Debian's Go source packages, which depend on about 130 other Go source
# packages (66 MB to fetch, 400 MB to unpack) that psdb never compiles.
# fetch_protos takes the three packages alone, without installing them, and
# unpacks their .proto files under .cache/protos/ (where
# cmake/psdb_deps.cmake looks, besides /usr/share/gocode of an installed
# package).
PROTO_PACKAGES=(
  golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev
)
PROTO_DIR=.cache/protos

JOBS="${PSDB_JOBS:-2}"

apt_as_root() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get "$@"
}

install_deps() {  # install_deps PACKAGE...
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "dev.sh: installing ${missing[*]}"
    apt_as_root update -q
    apt_as_root install -y -q --no-install-recommends "${missing[@]}"
  fi
  fetch_protos
}

fetch_protos() {
  [ -f "$PROTO_DIR/.complete" ] && return 0
  local tmp
  tmp="$(mktemp -d)"
  # apt fetches as its own user when it can write the directory.
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$tmp"; fi
  echo "dev.sh: fetching the .proto files of ${PROTO_PACKAGES[*]}"
  # apt-get download needs the package lists; a fresh machine may have none.
  if ! (cd "$tmp" && apt-get download -q "${PROTO_PACKAGES[@]}"); then
    apt_as_root update -q
    (cd "$tmp" && apt-get download -q "${PROTO_PACKAGES[@]}")
  fi
  rm -rf "$PROTO_DIR"
  mkdir -p "$PROTO_DIR"
  for deb in "$tmp"/*.deb; do
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$PROTO_DIR" --wildcards '*.proto'
  done
  rm -rf "$tmp"
  touch "$PROTO_DIR/.complete"
}

build() {  # build DIR [cmake args...]
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja "$@"
  cmake --build "$dir" -j "$JOBS"
}

cmd="${1:-run}"
[ $# -gt 0 ] && shift
case "$cmd" in
  deps) install_deps "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" ;;
  build)
    install_deps "${BUILD_PACKAGES[@]}"
    build "${1:-build/release}" -DCMAKE_BUILD_TYPE=Release
    ;;
  run)
    install_deps "${BUILD_PACKAGES[@]}"
    build build/release -DCMAKE_BUILD_TYPE=Release -DPSDB_BUILD_TESTS=OFF
    if [ -x build/release/tools/ps-train ]; then
      exec tools/quickstart.sh build/release "$@"
    else
      exec build/release/examples/quickstart "$@"
    fi
    ;;
  test)
    install_deps "${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}"
    build build/asan -DCMAKE_BUILD_TYPE=Debug -DPSDB_SANITIZE=ON -DPSDB_BUILD_BENCHMARKS=ON
    cd build/asan
    # detect_leaks stays on; halt_on_error makes any report fail its test.
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1}"
    export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
    export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/../../tests/lsan.supp:print_suppressions=0}"
    ctest --output-on-failure -j "$JOBS" --timeout 600 "$@"
    cd ../..
    # The libFuzzer targets (tests/fuzz/README.md): a clang build of their
    # own (only what they link), each fuzzed PSDB_FUZZ_SECONDS (default 30;
    # 0 skips) under ASan+UBSan; a crash fails the run and is kept under
    # tests/fuzz/regressions/.
    fuzz_seconds="${PSDB_FUZZ_SECONDS:-30}"
    if [ "$fuzz_seconds" -gt 0 ]; then
      cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPSDB_FUZZ=ON \
        -DPSDB_BUILD_TESTS=OFF -DPSDB_BUILD_BENCHMARKS=OFF
      cmake --build build/fuzz -j "$JOBS" --target psdb_fuzz
      tests/fuzz/run_all.sh build/fuzz "$fuzz_seconds"
    fi
    ;;
  *) echo "usage: $0 run|test|deps|build" >&2; exit 2 ;;
esac
