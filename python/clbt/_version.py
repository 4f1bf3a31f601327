"""The version of clbt this package is: the C header's CLBT_VERSION_*
(include/clbt/clbt.h; python/tests/test_package.py checks they agree).
pip reads it from here without importing the package; the package loads
a libclbt of the same major version and at least its minor version (the
ABI it declares, which later releases of the major version keep)."""
VERSION = "0.6.0"
