#!/usr/bin/env bash
# Checks that pip installs the Python package from the tree, offline, and
# that the installed copy finds the library on the system's library path,
# as docs/python.md says (LD_LIBRARY_PATH here stands in for ldconfig):
#   tests/consumer/python_pip.sh <directory holding libclbt.so.MAJOR.MINOR> <work dir> [python]
# pip builds in the tree it is given, so it is given a copy of python/.
set -euo pipefail
library_dir=$(cd "$1" && pwd -P)
work=$2
python=${3:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/src"
cp -r "$here/../../python/pyproject.toml" "$here/../../python/clbt" "$work/src/"
find "$work/src" -name __pycache__ -prune -exec rm -rf {} +
"$python" -m pip install --quiet --root-user-action=ignore --no-build-isolation --no-index --no-deps \
  --target "$work/target" "$work/src"
export PYTHONPATH="$work/target" LD_LIBRARY_PATH="$library_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset CLBT_LIBRARY
cd /  # away from the source tree's python/clbt
"$python" -c "
import os, sys, clbt
from importlib import metadata
package = os.path.dirname(clbt.__file__)
if metadata.metadata('clbt')['License'] != 'Apache-2.0':
    sys.exit('the installed metadata gives license %r' % metadata.metadata('clbt')['License'])
print('clbt', clbt.__version__, 'from', package, 'loads', clbt.library_path)
if not package.startswith('$work/target/'):
    sys.exit('imported %s, not the copy pip installed' % package)
if not os.path.exists(os.path.join(package, 'py.typed')):
    sys.exit('py.typed is missing')
if os.path.dirname(os.path.realpath(clbt.library_path)) != '$library_dir':
    sys.exit('clbt loaded %s, not the library in $library_dir' % clbt.library_path)"
"$python" "$here/../../examples/serving_loop.py" --steps 20
