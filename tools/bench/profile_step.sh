#!/usr/bin/env bash
# The host instructions of a step's row updates and of its enqueue_step,
# counted by callgrind (instructions, unlike a clock, repeat on a shared
# machine), for the step section's cases (tools/bench/profile_step.c).
#
#   tools/bench/profile_step.sh BUILD_DIR [STEPS] [CASE...]
#
# For each case (default: every one of decode-256-1group and
# decode-1024-4groups, v1 and persistent, steady, churn and churn16), one
# line: the ids the row updates changed per step, then instructions per
# step inside clear_row, add_row and append_row together ("updates"), and
# inside clbt_multi_table_enqueue_step ("enqueue"), of which "driver" in
# the OpenCL calls it makes (libOpenCL's entry points, inclusive), and the
# updates' instructions per changed id. A case is
# "NAME MODEL KIND", e.g. "decode-1024-4groups v1 churn16". The first run
# of each configuration compiles its kernels under valgrind (minutes);
# PoCL's cache (POCL_CACHE_DIR, default BUILD_DIR/pocl-cache) keeps them.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '5p' "$0" >&2; exit 2; }
build=$1 steps=${2:-10}
shift $(($# >= 2 ? 2 : 1))
export CLBT_DEVICE=${CLBT_DEVICE:-portable:cpu}
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-$build/pocl-cache}
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then
  for shape in decode-256-1group decode-1024-4groups; do
    for model in v1 persistent; do
      for kind in steady churn churn16; do
        cases+=("$shape $model $kind")
      done
    done
  done
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-42s %8s %12s %12s %8s %8s\n' case ids/step updates enqueue \
  driver updates/id
for c in "${cases[@]}"; do
  # shellcheck disable=SC2086 # a case is three words
  set -- $c
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect=clbt_multi_table_clear_row \
    --toggle-collect=clbt_multi_table_add_row \
    --toggle-collect=clbt_multi_table_append_row \
    --toggle-collect=clbt_multi_table_enqueue_step \
    "$build/tools/profile_step" "$1" "$2" "$3" "$steps" > "$out/run" 2> /dev/null
  callgrind_annotate --inclusive=yes --threshold=100 "$out/cg" > "$out/annotated" 2> /dev/null
  read -r ids < <(awk '{print $4}' "$out/run")
  # Inclusive counts: the row calls, enqueue_step, and the OpenCL entry
  # points (libOpenCL), which only enqueue_step calls.
  awk -v steps="$steps" -v ids="$ids" -v name="$c" '
    function count(text) { gsub(/,/, "", text); return text + 0 }
    /:clbt_multi_table_(clear|add|append)_row / { updates += count($1) }
    /:clbt_multi_table_enqueue_step / { enqueue += count($1) }
    /:cl[A-Z][A-Za-z]* \[.*libOpenCL/ { driver += count($1) }
    END {
      printf "%-42s %8d %12d %12d %8d %8.2f\n", name, ids / steps,
        updates / steps, enqueue / steps, driver / steps,
        (ids > 0 ? updates / ids : 0)
    }' "$out/annotated"
done
