#!/usr/bin/env bash
# The README's commands, run as written, so that the README cannot drift
# from what works (issue 45):
#   tests/readme_commands.sh <source dir> <build dir> <scratch dir>
#
# Every line of a fenced ```sh block of README.md is a command, its parts
# split at " && " (no part may hold " && " in quotes). They run in order,
# each command's parts with bash, in <scratch>/checkout: a directory that
# stands for the checkout (the source tree's entries linked, python/ copied
# because pip builds in it) whose build/ links the build tree's entries, so
# that what a command makes lands in the scratch directory. Every part runs
# as written, but for these:
#   apt-get ...           not run: it installs Debian's packages (root, the
#                         network); this machine has them, as the README's
#                         second command and .ci/run install them.
#   cmake -S . -B build ...,  cmake --build build ...
#                         not run: they make the build tree this test runs
#                         in (configuring it again would change the cache
#                         under the running suite).
#   cmake --install build installs into <scratch>/stage instead of
#                         /usr/local, as `--prefix DIR` does; ldconfig is
#                         not run: from then on the stage stands for
#                         /usr/local through PATH, LD_LIBRARY_PATH,
#                         PKG_CONFIG_PATH, CMAKE_PREFIX_PATH and
#                         PYTHONPATH, the last not given to a command
#                         that runs pip (its environment is its own).
#   ctest ...             run with -N appended: it lists the suite
#                         (running it would run this test inside itself).
# The ```c block, the README's C fragment, is compiled with -fsyntax-only
# as the body of a function whose parameters are the names it leaves to
# the caller. The test fails at the first command that fails, and when
# the README has no command of each kind above, so that a README
# rewritten past these rules shows here.
set -euo pipefail
source_dir=$(cd "$1" && pwd)
build_dir=$(cd "$2" && pwd)
scratch=$3
readme="$source_dir/README.md"

rm -rf "$scratch"
mkdir -p "$scratch/checkout/build" "$scratch/stage"
scratch=$(cd "$scratch" && pwd)
checkout="$scratch/checkout"
stage="$scratch/stage"
for entry in "$source_dir"/* "$source_dir"/.ci; do
  name=$(basename "$entry")
  case $name in
    build*) ;;
    python) cp -r "$entry" "$checkout/python" ;;
    *) ln -s "$entry" "$checkout/$name" ;;
  esac
done
find "$checkout/python" -name __pycache__ -prune -exec rm -rf {} +
for entry in "$build_dir"/*; do
  ln -s "$entry" "$checkout/build/$(basename "$entry")"
done
unset CLBT_LIBRARY
cd "$checkout"

# The ```sh blocks' lines, continuations joined, one command a line.
commands=$(awk '
  /^```/ { inside = ($0 == "```sh"); next }
  inside && /\\$/ { line = line substr($0, 1, length($0) - 1); next }
  inside { print line $0; line = "" }
' "$readme")

declare -A seen=()
# Runs parts as written (pip's without the stage's PYTHONPATH).
run_parts() {
  local parts=$1 unset=()
  if [[ $parts == *pip* ]]; then unset=(-u PYTHONPATH); fi
  echo "run:     $parts"
  if ! env "${unset[@]}" bash -c "$parts"; then
    echo "readme_commands: FAILED: $parts" >&2
    exit 1
  fi
  seen[run]=1
}

while IFS= read -r command; do
  [ -n "$command" ] || continue
  echo "== $command"
  rest=""
  while IFS= read -r part; do
    case $part in
      "apt-get "*)
        echo "skipped: $part (installs packages)"; seen[apt]=1 ;;
      "cmake -S . -B build"|"cmake -S . -B build "*|"cmake --build build"|\
      "cmake --build build "*)
        echo "skipped: $part (made the tree this test runs in)"; seen[build]=1 ;;
      "cmake --install build")
        echo "instead: cmake --install build --prefix $stage"
        cmake --install build --prefix "$stage" > /dev/null
        python_dir=$(dirname "$(dirname "$(find "$stage" -path '*/clbt/_installed.py')")")
        export PATH="$stage/bin:$PATH" LD_LIBRARY_PATH="$stage/lib" \
               PKG_CONFIG_PATH="$stage/lib/pkgconfig" CMAKE_PREFIX_PATH="$stage" \
               PYTHONPATH="$python_dir"
        seen[install]=1 ;;
      ldconfig)
        echo "skipped: ldconfig (LD_LIBRARY_PATH names the stage)" ;;
      "ctest "*)
        rest="${rest:+$rest && }$part -N"; seen[ctest]=1 ;;
      *)
        rest="${rest:+$rest && }$part" ;;
    esac
  done < <(printf '%s\n' "$command" | sed 's/ && /\n/g')
  if [ -n "$rest" ]; then run_parts "$rest"; fi
done <<< "$commands"

# The C fragment: its includes at file scope, the rest a function's body.
fragment=$(awk '/^```/ { inside = ($0 == "```c"); next } inside' "$readme")
[ -n "$fragment" ] || { echo "readme_commands: no C fragment" >&2; exit 1; }
{
  echo "#include <stdint.h>"
  echo "#include <stdio.h>"
  grep '^#include' <<< "$fragment"
  echo "void readme_fragment(uint32_t row, const int32_t *new_block_ids,"
  echo "                     size_t count, uint32_t num_reqs, uint32_t num_tokens,"
  echo "                     const int32_t *host_query_start_loc,"
  echo "                     const int64_t *host_positions) {"
  grep -v '^#include' <<< "$fragment"
  echo "}"
} > "$scratch/fragment.c"
echo "== the C fragment"
cc -std=c11 -Wall -Werror -fsyntax-only -I"$source_dir/include" "$scratch/fragment.c"
seen[c]=1

for kind in apt build install ctest run c; do
  if [ -z "${seen[$kind]:-}" ]; then
    echo "readme_commands: the README has no command of kind '$kind'" >&2
    exit 1
  fi
done
echo "readme_commands: every README command ran"
