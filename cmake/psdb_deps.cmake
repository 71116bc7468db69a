# Every dependency comes from a Debian package (see dev.sh for the list), except
# CUDA, which the machine image provides and CUDAToolkit finds.
find_package(Threads REQUIRED)
find_package(absl REQUIRED CONFIG)
find_package(RocksDB REQUIRED CONFIG)
# Debian's RocksDB::rocksdb is the static archive, built without -fPIC, which
# cannot go into a shared object; a target that is one (the Python extension)
# sets PSDB_SHARED_ROCKSDB and gets librocksdb.so through the same link
# interface. Everything else keeps the static library.
set(PSDB_ROCKSDB
    "$<IF:$<BOOL:$<TARGET_PROPERTY:PSDB_SHARED_ROCKSDB>>,RocksDB::rocksdb-shared,RocksDB::rocksdb>")
find_package(Protobuf REQUIRED)
find_package(gRPC REQUIRED CONFIG)
find_package(Eigen3 REQUIRED CONFIG)
find_package(nlohmann_json 3.9 REQUIRED CONFIG)  # ps-bench's JSON writer
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(HIREDIS IMPORTED_TARGET hiredis)
# Compressed Criteo data (train/line_reader.h): gzip through zlib
# (zlib1g-dev), zstd through libzstd (libzstd-dev).
find_package(ZLIB REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
find_package(OpenSSL)
# Prometheus metrics: prometheus-cpp's core (registries, metric families)
# and pull (the HTTP /metrics endpoint, over civetweb); rpc/wire/metrics_http.h.
find_package(prometheus-cpp REQUIRED CONFIG)
# etcd's v3 gRPC API (rpc/control/etcd_client.h): the protos Debian ships
# in golang-etcd-server-dev and the gogoproto and google/api protos they
# import (golang-github-gogo-protobuf-dev,
# golang-github-grpc-ecosystem-grpc-gateway-dev); C++ stubs are generated at
# build time. dev.sh unpacks the three packages' .proto files under
# .cache/protos/ without installing them (their Go dependencies are not
# needed); an installed package's /usr/share/gocode works as well.
set(PSDB_GOCODE_ROOTS ${PROJECT_SOURCE_DIR}/.cache/protos/usr/share/gocode/src
                      /usr/share/gocode/src)
list(TRANSFORM PSDB_GOCODE_ROOTS APPEND /go.etcd.io OUTPUT_VARIABLE etcd_roots)
list(TRANSFORM PSDB_GOCODE_ROOTS APPEND /github.com/gogo/protobuf
     OUTPUT_VARIABLE gogo_roots)
list(TRANSFORM PSDB_GOCODE_ROOTS APPEND
     /github.com/grpc-ecosystem/grpc-gateway/third_party/googleapis
     OUTPUT_VARIABLE googleapis_roots)
find_path(PSDB_ETCD_PROTO_ROOT etcd/etcdserver/etcdserverpb/rpc.proto
          PATHS ${etcd_roots} NO_DEFAULT_PATH)
find_path(PSDB_GOGO_PROTO_ROOT gogoproto/gogo.proto
          PATHS ${gogo_roots} NO_DEFAULT_PATH)
find_path(PSDB_GOOGLEAPIS_PROTO_ROOT google/api/annotations.proto
          PATHS ${googleapis_roots} NO_DEFAULT_PATH)
if(NOT PSDB_ETCD_PROTO_ROOT OR NOT PSDB_GOGO_PROTO_ROOT
   OR NOT PSDB_GOOGLEAPIS_PROTO_ROOT)
  message(FATAL_ERROR "etcd v3 protos not found: run ./dev.sh deps (it "
          "unpacks them under .cache/protos/), or install "
          "golang-etcd-server-dev golang-github-gogo-protobuf-dev "
          "golang-github-grpc-ecosystem-grpc-gateway-dev")
endif()
if(PSDB_BUILD_TESTS)
  find_package(GTest REQUIRED CONFIG)
endif()
if(PSDB_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED CONFIG)
endif()

set(PSDB_CUDA_ENABLED OFF)
if(NOT PSDB_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(PSDB_CUDA_ENABLED ON)
  elseif(PSDB_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PSDB_WITH_CUDA=ON but no CUDA toolkit/nvcc was found")
  endif()
endif()
message(STATUS "psdb: CUDA backend ${PSDB_CUDA_ENABLED}")

# gloo (Debian libgloo-dev): the CPU collectives of dense AllReduce
# (collective/). Debian ships headers, libgloo.so and a CMake config
# (/usr/share/cmake/Gloo, imported target `gloo`); no pkg-config file.
find_package(Gloo REQUIRED CONFIG)

# NCCL: the GPU collectives of dense AllReduce, when CUDA is enabled and
# the toolkit (the machine image's /usr/local/cuda) ships nccl.h and
# libnccl. PSDB_NCCL_ENABLED says whether collective/ builds its NCCL path.
set(PSDB_NCCL_ENABLED OFF)
if(PSDB_CUDA_ENABLED)
  find_path(PSDB_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(PSDB_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(PSDB_NCCL_INCLUDE_DIR AND PSDB_NCCL_LIBRARY)
    set(PSDB_NCCL_ENABLED ON)
  endif()
endif()
message(STATUS "psdb: NCCL dense AllReduce ${PSDB_NCCL_ENABLED}")
