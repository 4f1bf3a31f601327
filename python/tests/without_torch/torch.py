"""Stands for torch where it is not installed. With CLBT_TEST_TORCH=0
(python_without_torch, tests/CMakeLists.txt) conftest.py puts this folder
first on sys.path and PYTHONPATH, so that `import torch` fails in the
suite and in every interpreter a test starts, as on a machine without
torch."""
raise ImportError("No module named 'torch' (hidden: CLBT_TEST_TORCH=0)")
