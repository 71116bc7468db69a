#!/usr/bin/env bash
# The quick start (README's first command, via `./dev.sh run`): generate a
# synthetic Criteo-format data set, train the default model (DeepFwFM) on it
# with the embedded store, compare the AUC with the data set's Bayes-optimal
# AUC, and show the checkpoint with ps-dump.
#
#   tools/quickstart.sh BUILD_DIR [WORK_DIR] [extra ps-train flags...]
#
# BUILD_DIR holds tools/ps-train and tools/ps-dump (e.g. build/release).
# WORK_DIR (default /tmp/psdb-quickstart) receives data/ and ckpt/; both are
# recreated on every run so the run starts from a fresh store.
set -euo pipefail
build="${1:?usage: tools/quickstart.sh BUILD_DIR [WORK_DIR] [ps-train flags...]}"
shift
work="/tmp/psdb-quickstart"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  work="$1"
  shift
fi
train="$build/tools/ps-train"
dump="$build/tools/ps-dump"
[ -x "$train" ] || { echo "quickstart: $train not built" >&2; exit 1; }

start=$(date +%s)
rm -rf "$work/data" "$work/ckpt"
mkdir -p "$work"

echo "== ps-train gen --out $work/data"
"$train" gen --out "$work/data"

echo
echo "== ps-train --data $work/data --checkpoint_dir $work/ckpt $*"
"$train" --data "$work/data" --checkpoint_dir "$work/ckpt" "$@"

# summary.json is flat: "key": value per line.
field() { sed -n "s/^ *\"$1\": *\([^,]*\),\{0,1\}$/\1/p" "$work/ckpt/summary.json"; }
auc=$(field auc)
bayes=$(field bayes_auc)
ckpt=$(field checkpoint | tr -d '"')
echo
awk -v a="$auc" -v b="$bayes" 'BEGIN {
  printf "quickstart: test AUC %.4f vs Bayes-optimal AUC %.4f (gap %.4f)\n", a, b, b - a }'

echo
echo "== ps-dump info $ckpt"
if [ -x "$dump" ]; then
  "$dump" info "$ckpt"
else
  echo "quickstart: $dump not built; skipping ps-dump info"
fi
echo
echo "quickstart: done in $(( $(date +%s) - start ))s (data: $work/data, checkpoints and reports: $work/ckpt)"
