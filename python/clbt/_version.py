"""The version of clbt this package is: the C header's CLBT_VERSION_*
(include/clbt/clbt.h; python/tests/test_package.py checks they agree).
pip reads it from here without importing the package; the package loads
only a libclbt of the same major and minor version (the ABI it declares)."""
VERSION = "0.4.0"
