#!/usr/bin/env bash
# make_corpus.sh BUILD_DIR OUT_DIR: writes the seed corpus of every fuzz
# target under OUT_DIR/<target>/ (replacing what is there), with psdb's own
# encoders (tests/fuzz/make_seeds.cc: real row encodings, a real small
# checkpoint's manifest, wire requests as a client sends them).
# BUILD_DIR is a PSDB_FUZZ=ON build with the psdb_fuzz target built.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build="$1"
out="$2"
rm -rf "$out"
mkdir -p "$out"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" "$build/tests/fuzz/psdb_fuzz_seeds" "$out"
