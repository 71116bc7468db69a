#!/usr/bin/env bash
# run_all.sh BUILD_DIR SECONDS: runs every libFuzzer target of a PSDB_FUZZ=ON
# build (ASan+UBSan) for SECONDS each, one after another.
#
# For each target: first replays every input kept under
# tests/fuzz/regressions/<target>/ (each must pass), then fuzzes from the
# seed corpus (make_corpus.sh, written afresh) plus the inputs found by
# earlier runs (BUILD_DIR/fuzz/corpus/<target>/). A crash, a broken
# invariant (an abort), a leak, a timeout or an out-of-memory fails the
# run; the input that caused it is copied to tests/fuzz/regressions/<target>/
# so it is replayed from then on (commit it with the fix).
#
# Prints one line per target: executions, executions per second, corpus
# size, result; the same table goes to BUILD_DIR/fuzz/summary.txt and each
# target's log to BUILD_DIR/fuzz/logs/<target>.log.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
seconds="$2"
src="$(cd "$(dirname "$0")" && pwd)"
targets=(row_codec_fuzz manifest_fuzz criteo_line_fuzz checkpoint_reader_fuzz
         parameter_service_fuzz scheduler_service_fuzz)
work="$build/fuzz"
mkdir -p "$work/logs" "$work/corpus" "$work/artifacts"
"$src/make_corpus.sh" "$build" "$work/seeds" || exit 1

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$src/../lsan.supp:print_suppressions=0}"

failed=0
summary="$work/summary.txt"
printf '%-24s %12s %10s %8s  %s\n' target executions exec/s corpus result \
  | tee "$summary"
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  log="$work/logs/$t.log"
  regressions="$src/regressions/$t"
  : > "$log"
  if [ ! -x "$bin" ]; then
    echo "$t: $bin not built" | tee -a "$summary"
    failed=1
    continue
  fi
  # 1. Every kept regression input must pass.
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    if ! (cd "$work" && "$bin" -runs=1 "$regressions"/* >>"$log" 2>&1); then
      printf '%-24s %12s %10s %8s  %s\n' "$t" - - - \
        "FAILED: a regression input fails again (see $log)" | tee -a "$summary"
      tail -n 40 "$log"
      failed=1
      continue
    fi
  fi
  # 2. Fuzz for $seconds.
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
  rm -f "$work/artifacts/$t"/*
  (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=25 \
      -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/$t/" \
      "$work/corpus/$t" "$work/seeds/$t" >>"$log" 2>&1)
  rc=$?
  runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  speed=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  corpus=$(ls "$work/corpus/$t" | wc -l)
  result=ok
  if [ $rc -ne 0 ]; then
    failed=1
    mkdir -p "$regressions"
    kept=""
    for a in "$work/artifacts/$t"/*; do
      [ -f "$a" ] || continue
      cp "$a" "$regressions/"
      kept="$kept $(basename "$a")"
    done
    result="FAILED (exit $rc): kept${kept:- nothing} in tests/fuzz/regressions/$t/ (see $log)"
    tail -n 60 "$log"
  fi
  printf '%-24s %12s %10s %8s  %s\n' "$t" "${runs:--}" "${speed:--}" "$corpus" \
    "$result" | tee -a "$summary"
done
exit $failed
