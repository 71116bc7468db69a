#!/usr/bin/env bash
# install_consumer_test.sh BUILD_DIR SOURCE_DIR CXX BUILD_TYPE [PYTHON_DIR [PRELOAD]]
#
# What a C++ user of an installed psdb does, against this build tree:
#   1. `cmake --install BUILD_DIR --prefix <temporary prefix>`.
#   2. The prefix's include/ holds exactly include/psdb/*.h of the source
#      tree and the generated psdb/version.h, and each compiles on its own
#      with only that include/ and Abseil's (tests/examples/headers/).
#   3. examples/consumer, configured with CMAKE_PREFIX_PATH=<prefix> and the
#      build's compiler and build type, builds `consumer` (libpsdb.so) and
#      `consumer_static` (libpsdb.a); both run, check their values and
#      exit 0; only the first loads the prefix's libpsdb.so.
#   4. The installed ps-dump reads the checkpoint the consumer wrote, and
#      the other tools are installed.
#   5. With PYTHON_DIR (the package's directory under the prefix): the
#      installed package imports, from the prefix, and its __version__ is
#      VERSION's. PRELOAD: the sanitizer runtimes a sanitized extension
#      needs loaded first (tests/python/CMakeLists.txt does the same).
# The prefix and the builds live in a temporary directory, removed when the
# test passes and kept (its path printed) when it fails.
set -euo pipefail

build_dir=$(realpath "$1")
source_dir=$(realpath "$2")
cxx=$3
build_type=$4
python_dir=${5:-}
preload=${6:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/psdb-install-test.XXXXXX")
prefix=$work/prefix
passed=0
trap '[ $passed = 1 ] || echo "install_consumer_test: FAILED; files kept in $work" >&2' EXIT
start=$SECONDS
phase() { echo "== $1 (at $((SECONDS - start))s)"; }
fail() { echo "install_consumer_test: $*" >&2; exit 1; }

phase "cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log"
find "$prefix" -type f -o -type l | sed "s|^$prefix/||" | sort

phase "installed include/: only psdb's public headers"
expected=$( (cd "$source_dir/include" && ls psdb/*.h; echo psdb/version.h) | sort)
installed=$(cd "$prefix/include" && find . -type f -o -type l | sed 's|^\./||' | sort)
if [ "$installed" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$installed") || true
  fail "the installed include/ differs from include/psdb/*.h + version.h"
fi

phase "each installed header compiles alone (prefix include/ + Abseil)"
cmake -S "$source_dir/tests/examples/headers" -B "$work/headers" -G Ninja \
  -DCMAKE_CXX_COMPILER="$cxx" -DPSDB_PREFIX="$prefix" >"$work/headers.log"
cmake --build "$work/headers" -j 1 >>"$work/headers.log" ||
  { cat "$work/headers.log"; fail "an installed header does not compile alone"; }

phase "examples/consumer against the prefix ($build_type)"
cmake -S "$source_dir/examples/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE="$build_type" >"$work/consumer.log" ||
  { cat "$work/consumer.log"; fail "examples/consumer does not configure"; }
cmake --build "$work/consumer" -j 1 >>"$work/consumer.log" ||
  { cat "$work/consumer.log"; fail "examples/consumer does not build"; }
grep -- "-- psdb " "$work/consumer.log"

for program in consumer consumer_static; do
  phase "run $program"
  "$work/consumer/$program" "$work/run-$program" | tee "$work/$program.out"
  grep -qx "consumer: every value as expected" "$work/$program.out" ||
    fail "$program did not confirm its values"
  grep -qx "psdb $(cat "$source_dir/VERSION"): consumer in $work/run-$program" \
    "$work/$program.out" || fail "$program does not print VERSION's version"
done
libs=$(ldd "$work/consumer/consumer")
grep -q "=> $prefix/lib[^ ]*/libpsdb\.so" <<<"$libs" ||
  fail "consumer does not load the prefix's libpsdb.so"
libs=$(ldd "$work/consumer/consumer_static")
if grep -q libpsdb <<<"$libs"; then fail "consumer_static loads a libpsdb"; fi

phase "installed tools"
for tool in ps-server ps-scheduler ps-train ps-dump ps-bench; do
  [ -x "$prefix/bin/$tool" ] || fail "bin/$tool is not installed"
done
"$prefix/bin/ps-dump" info "$work/run-consumer/checkpoints" >"$work/dump.out" ||
  { cat "$work/dump.out"; fail "the installed ps-dump cannot read the consumer's checkpoint"; }

if [ -n "$python_dir" ]; then
  phase "installed Python package"
  version=$(cd "$work" && PYTHONPATH="$prefix/$python_dir" LD_PRELOAD="$preload" \
    ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -c \
    'import psdb; print(psdb.__file__); print(psdb.__version__)')
  echo "$version"
  [ "$(head -1 <<<"$version")" = "$prefix/$python_dir/psdb/__init__.py" ] ||
    fail "psdb was not imported from the prefix"
  [ "$(tail -1 <<<"$version")" = "$(cat "$source_dir/VERSION")" ] ||
    fail "psdb.__version__ is not VERSION's"
fi

passed=1
rm -rf "$work"
echo "install_consumer_test: passed in $((SECONDS - start))s"
