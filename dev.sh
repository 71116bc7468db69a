#!/usr/bin/env bash
# psdb's one entry point for a fresh machine (Debian 12, run as root or with sudo).
#   ./dev.sh run [ARGS]   install what is missing, build (Release), run the main job
#   ./dev.sh test         install what is missing, build with ASan+UBSan, run every test
#   ./dev.sh deps         only install the Debian packages psdb needs
#   ./dev.sh build [DIR]  only build (Release) into DIR (default build/release)
set -euo pipefail
cd "$(dirname "$0")"

# Every dependency psdb has, as Debian package names. CUDA and NCCL are not
# here: they come with the machine image and are optional (PSDB_WITH_CUDA=AUTO).
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  librocksdb-dev rocksdb-tools libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libxxhash-dev libgtest-dev libgmock-dev libbenchmark-dev libeigen3-dev
  libssl-dev openssl redis-server libhiredis-dev gnuplot-nox python3
  pybind11-dev python3-dev python3-numpy python3-torch python3-pytest
  prometheus-cpp-dev
  # Compressed Criteo data (train/line_reader.h): .gz and .zst files.
  zlib1g-dev libzstd-dev
  # gloo: CPU collectives of dense AllReduce (collective/, ps-train
  # --dense=allreduce); NCCL comes with the CUDA toolkit.
  libgloo-dev
  # etcd's v3 API protos (rpc/control/etcd_client.h generates its stubs from
  # them) and the etcd server the control-plane tests start.
  golang-etcd-server-dev golang-github-gogo-protobuf-dev
  golang-github-grpc-ecosystem-grpc-gateway-dev etcd-server etcd-client
  # Not linked: the metrics tests scrape /metrics with curl and read it back
  # through a real Prometheus server (tests/rpc/server/metrics_*_test.cc);
  # tests/deploy/check_deploy.py reads deploy/'s YAML.
  prometheus curl python3-yaml
  # The libFuzzer targets (tests/fuzz/, run by `./dev.sh test`): clang and
  # its fuzzer + sanitizer runtimes (libclang_rt.fuzzer-x86_64.a).
  clang libclang-rt-14-dev
)

JOBS="${PSDB_JOBS:-2}"

install_deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then return 0; fi
  echo "dev.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

build() {  # build DIR [cmake args...]
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja "$@"
  cmake --build "$dir" -j "$JOBS"
}

cmd="${1:-run}"
[ $# -gt 0 ] && shift
case "$cmd" in
  deps) install_deps ;;
  build)
    install_deps
    build "${1:-build/release}" -DCMAKE_BUILD_TYPE=Release
    ;;
  run)
    install_deps
    build build/release -DCMAKE_BUILD_TYPE=Release -DPSDB_BUILD_TESTS=OFF
    if [ -x build/release/tools/ps-train ]; then
      exec tools/quickstart.sh build/release "$@"
    else
      exec build/release/examples/quickstart "$@"
    fi
    ;;
  test)
    install_deps
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
