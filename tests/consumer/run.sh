#!/usr/bin/env bash
# Builds the embedding example against an installed clbt the two ways a
# project finds it, and runs each build on the device CLBT_DEVICE selects:
#   tests/consumer/run.sh <install prefix> <scratch directory>
# 1. CMake: find_package(clbt) with clbt::clbt and clbt::clbt_static;
# 2. pkg-config: cc $(pkg-config --cflags --libs clbt).
set -euo pipefail
prefix=$(cd "$1" && pwd)
scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
example=("$here/../../examples/serving_loop.c" "$here/../../examples/scheduler.c")

rm -rf "$scratch" && mkdir -p "$scratch"
cmake -S "$here" -B "$scratch/cmake" -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$scratch/cmake"
"$scratch/cmake/serving_loop_shared" --steps 20
"$scratch/cmake/serving_loop_static" --steps 20
# grep reads all of ldd's output (no -q): under pipefail, a grep that quits
# at its first match can fail the pipeline by killing ldd with SIGPIPE.
if ! ldd "$scratch/cmake/serving_loop_shared" |
    grep "$prefix/.*libclbt.so" > /dev/null; then
  echo "serving_loop_shared does not load $prefix's libclbt.so" >&2
  exit 1
fi
if ldd "$scratch/cmake/serving_loop_static" | grep libclbt > /dev/null; then
  echo "serving_loop_static loads a shared libclbt" >&2
  exit 1
fi

# pkg-config gives the flags; the rpath is ours, as the prefix is not one
# the loader searches.
export PKG_CONFIG_PATH="$(dirname "$(find "$prefix" -name clbt.pc)")"
if ! grep -qx "License: Apache-2.0" "$PKG_CONFIG_PATH/clbt.pc"; then
  echo "clbt.pc does not say 'License: Apache-2.0'" >&2
  exit 1
fi
for file in LICENSE CHANGELOG.md; do
  if [ ! -f "$prefix/share/doc/clbt/$file" ]; then
    echo "$file is not installed in $prefix/share/doc/clbt" >&2
    exit 1
  fi
done
libdir=$(pkg-config --variable=libdir clbt)
cc -std=c11 $(pkg-config --cflags clbt) "${example[@]}" -o "$scratch/serving_loop_pc" \
  $(pkg-config --libs clbt) -Wl,-rpath,"$libdir"
"$scratch/serving_loop_pc" --steps 20
