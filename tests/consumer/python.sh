#!/usr/bin/env bash
# Checks the Python package of an installed clbt: Debian's python3 imports
# it from the prefix, it loads the libclbt.so installed beside it (not one
# named by CLBT_LIBRARY or the build tree's), lists the devices, and runs
# the Python serving loop on the device CLBT_DEVICE selects:
#   tests/consumer/python.sh <install prefix> [python]
set -euo pipefail
prefix=$(cd "$1" && pwd -P)
python=${2:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
installed=$(find "$prefix" -path '*/clbt/_installed.py')
export PYTHONPATH=$(dirname "$(dirname "$installed")")
unset CLBT_LIBRARY
cd /  # away from the source tree's python/clbt
"$python" -c "
import os, sys, clbt
print('clbt', clbt.__version__, 'from', clbt.library_path, 'devices', clbt.devices())
if not os.path.realpath(clbt.library_path).startswith('$prefix/'):
    sys.exit('clbt loaded %s, not the library in $prefix' % clbt.library_path)"
"$python" "$here/../../examples/serving_loop.py" --steps 20
