#!/usr/bin/env bash
# Measures what the on-disk program cache (CLBT_CACHE_DIR) adds to the
# start-up of a 3-group table (block sizes 16, 32 and 64: one launch, so one
# program),
# with the driver's own kernel cache off and on (PoCL's POCL_KERNEL_CACHE).
# Each case runs `clbt info` in a fresh process `runs` times and prints the
# medians of the times it reports (open the device, prepare the programs,
# first slot mapping) and of the whole process. A warm case first makes one
# unmeasured run that fills the caches it keeps; the "fills" case gives
# every run an empty CLBT_CACHE_DIR, so it measures the run that stores.
#   tools/bench/measure-startup.sh [build directory] [runs]
# docs/cache.md has the results.
set -euo pipefail
clbt="${1:-build}/clbt"
runs="${2:-7}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }

# run_case <name> <POCL_KERNEL_CACHE 0|1> <clbt cache: off|warm|fills>
run_case() {
  local name=$1 pocl=$2 ours=$3 i start end out
  local -a env=(POCL_KERNEL_CACHE="$pocl" POCL_CACHE_DIR="$scratch/pocl-$name")
  rm -f "$scratch"/*.times
  for ((i = -1; i < runs; ++i)); do
    local -a cache=()
    if [ "$ours" = warm ]; then cache=(CLBT_CACHE_DIR="$scratch/clbt-$name"); fi
    if [ "$ours" = fills ]; then cache=(CLBT_CACHE_DIR="$scratch/clbt-$name-$i"); fi
    start=$(date +%s%N)
    out=$(env "${env[@]}" "${cache[@]}" "$clbt" info --json --block-sizes 16,32,64)
    end=$(date +%s%N)
    if ((i < 0)); then continue; fi
    for f in open_ms prepare_ms first_slot_mapping_ms; do
      field "$f" <<<"$out" >>"$scratch/$f.times"
    done
    echo $(((end - start) / 1000000)) >>"$scratch/process.times"
  done
  printf '%-36s %8.1f %10.1f %12.1f %9s\n' "$name" \
    "$(median <"$scratch/open_ms.times")" \
    "$(median <"$scratch/prepare_ms.times")" \
    "$(median <"$scratch/first_slot_mapping_ms.times")" \
    "$(median <"$scratch/process.times")"
}

printf '%-36s %8s %10s %12s %9s\n' "medians of $runs runs, ms" open prepare \
  "first launch" process
run_case "driver cache off, clbt cache off" 0 off
run_case "driver cache off, clbt cache fills" 0 fills
run_case "driver cache off, clbt cache warm" 0 warm
run_case "driver cache on,  clbt cache off" 1 off
run_case "driver cache on,  clbt cache warm" 1 warm
