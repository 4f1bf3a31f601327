"""Finds libclbt.so and declares the C functions the package calls (ctypes).

ctypes is in the standard library, so nothing is compiled at install time and
the package runs wherever Python and the shared library are (no cffi, no
PyOpenCL needed). The library is looked for, in order:

1. the file the environment variable CLBT_LIBRARY names (then nowhere else);
2. beside the installed package (``cmake --install`` records where);
3. in a checkout (python/ beside include/), its build directory,
   ``<checkout>/build/libclbt.so``;
4. the system's library path, by soname (``ldconfig``, ``LD_LIBRARY_PATH``):
   how a package installed by pip finds the library CMake installed.

A library of another major version, or of an older minor one, is skipped:
from 0.5 on a release only adds to the ABI of its major version
(docs/design.md), so these declarations hold for this package's version of
the library and every later one of its major version.
"""
import ctypes
import os
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_uint32, c_void_p

from ._version import VERSION

ABI = tuple(int(part) for part in VERSION.split(".")[:2])  # the least (major, minor)
SONAME = "libclbt.so.%d" % ABI[0]
ENVIRONMENT = "CLBT_LIBRARY"

_HERE = os.path.dirname(os.path.abspath(__file__))

# ctypes mirrors of the config structs in include/clbt/clbt.h. Each
# carries its own size, so that a library newer than these mirrors reads
# them at their size (docs/design.md: config structs that can grow).
class _SizedConfig(ctypes.Structure):
    def __init__(self, **fields):
        super().__init__(**fields)  # then the size: a merged dict costs a write 2 us
        self.struct_size = ctypes.sizeof(type(self))


class TableConfig(_SizedConfig):
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "block_size", "kernel_block_size", "max_num_reqs",
        "max_num_blocks_per_req", "max_num_batched_tokens", "cp_world_size",
        "cp_rank", "cp_interleave_size")] + [("slot_mode", c_int),
                                             ("zero_gathered_tails", c_uint32)]


class GroupConfig(_SizedConfig):
    _fields_ = [("struct_size", c_uint32), ("block_size", c_uint32),
                ("kernel_block_size", c_uint32), ("max_num_blocks", c_uint32),
                ("slot_mode", c_int), ("cp_replicated", c_uint32)]


class MultiTableConfig(_SizedConfig):
    _fields_ = [("struct_size", c_uint32), ("max_num_reqs", c_uint32),
                ("max_num_batched_tokens", c_uint32), ("cp_world_size", c_uint32),
                ("cp_rank", c_uint32), ("cp_interleave_size", c_uint32),
                ("num_groups", c_uint32), ("groups", POINTER(GroupConfig)),
                ("commit_mode", c_int), ("zero_gathered_tails", c_uint32),
                ("exact_widths", c_uint32), ("reserved", c_uint32)]


class ExportRequest(_SizedConfig):
    """clbt_export_request (CLBT_EXPORT_REQUEST_INIT; struct_size since
    0.5)."""
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "num_reqs", "num_reqs_padded", "num_tokens", "flags",
        "dense_row_pitch")] + [(name, c_void_p) for name in (
            "query_start_loc", "positions", "seq_lens", "idx_mapping")]


class ExportBuffers(ctypes.Structure):
    """clbt_export_buffers, which clbt fills: frozen (0.4's layout), and
    written whole whatever struct_size holds."""
    _fields_ = [(name, c_void_p) for name in (
        "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len", "past_lens",
        "subsequence_begins")] + [("page_size", c_uint32), ("struct_size", c_uint32)] + [
        (name, c_void_p) for name in (
            "seq_lens", "dcp_local_seq_lens", "max_seq_len", "context_kv_indptr",
            "context_kv_indices", "context_kv_last_page_len", "page_table")]


# The step's fields after struct_size and flags, shared by the device step
# (cl_mem buffers) and the host step (arrays): both are addresses here.
_STEP_COUNTS = [("struct_size", c_uint32), ("flags", c_uint32), ("num_reqs", c_uint32),
                ("num_reqs_padded", c_uint32), ("num_tokens", c_uint32),
                ("query_start_loc", c_void_p), ("positions", c_void_p),
                ("idx_mapping", c_void_p)]


class Step(_SizedConfig):
    """clbt_step (CLBT_STEP_INIT: struct_size set, the rest 0)."""
    _fields_ = _STEP_COUNTS + [("seq_lens", c_void_p), ("export_flags", c_uint32),
                               ("dense_row_pitch", c_uint32), ("num_state_slots", c_uint32),
                               ("state_null_block", ctypes.c_int32)]


class HostStep(_SizedConfig):
    """clbt_host_step (CLBT_HOST_STEP_INIT)."""
    _fields_ = _STEP_COUNTS + [("slot_mapping", c_void_p), ("gathered_rows", c_void_p)]


class MultiHostStep(_SizedConfig):
    """clbt_multi_host_step (CLBT_MULTI_HOST_STEP_INIT): one output array
    per group, each an array of addresses."""
    _fields_ = _STEP_COUNTS + [("slot_mappings", c_void_p), ("gathered_rows", c_void_p)]


STEP_GATHER = 1  # CLBT_STEP_GATHER
STEP_EXPORT = 2  # CLBT_STEP_EXPORT
STEP_DUMMY = 8  # CLBT_STEP_DUMMY (0.4): a dummy run
EXPORT_CONTEXT = 1  # CLBT_EXPORT_CONTEXT
EXPORT_DENSE = 2  # CLBT_EXPORT_DENSE
STEP_STATE_SLOTS = 16  # CLBT_STEP_STATE_SLOTS (0.4): NONE groups' state ids
ROW_APPEND, ROW_REPLACE = 0, 1  # clbt_row_update (0.6)


class TokenSlotsRequest(_SizedConfig):
    """clbt_token_slots_request (CLBT_TOKEN_SLOTS_INIT)."""
    _fields_ = [(name, c_uint32) for name in (
        "struct_size", "num_reqs", "num_rows", "indices_per_row")] + [
        (name, c_void_p) for name in (
            "query_start_loc", "idx_mapping", "token_indices", "token_slots")]


class CommitInfo(ctypes.Structure):
    """clbt_commit_info, which clbt fills: frozen."""
    _fields_ = [("mode", c_int), ("rows", c_uint32), ("bytes", ctypes.c_uint64)]


_status = c_int
_handle = c_void_p  # every opaque handle and OpenCL object
_pointer = c_void_p  # arrays are passed by address
_events = (c_uint, _pointer, _pointer)  # num_events, wait_list, event out

# name: (restype, argtypes). The table and multi-table functions that share
# a shape are declared from one list of suffixes.
_FUNCTIONS = {
    "clbt_version_number": (c_uint, ()),
    "clbt_version_string": (c_char_p, ()),
    "clbt_status_name": (c_char_p, (c_int,)),
    "clbt_last_error": (c_char_p, ()),
    "clbt_device_open": (_status, (c_char_p, _pointer)),
    "clbt_device_wrap": (_status, (_handle, _handle, _handle, _pointer)),
    "clbt_device_release": (None, (_handle,)),
    "clbt_device_context": (_handle, (_handle,)),
    "clbt_device_id": (_handle, (_handle,)),
    "clbt_device_queue": (_handle, (_handle,)),
    "clbt_device_selector": (_status, (_handle, c_char_p, c_size_t)),
    "clbt_block_table_width": (_status, (c_uint32,) * 4 + (_pointer,)),
    "clbt_table_create": (_status, (_handle, _pointer, _pointer)),
    "clbt_table_destroy": (None, (_handle,)),
    "clbt_table_append_row": (_status, (_handle, c_uint32, _pointer, c_size_t)),
    "clbt_table_add_row": (_status, (_handle, c_uint32, _pointer, c_size_t)),
    "clbt_table_set_commit_mode": (_status, (_handle, c_int)),
    "clbt_table_last_commit": (_status, (_handle, _pointer)),
    "clbt_table_compute_slot_mapping_host": (
        _status, (_handle, c_uint32, _pointer, _pointer, c_uint32, _pointer)),
    "clbt_table_read_rejected_tokens": (_status, (_handle, _pointer)),
    "clbt_table_reset_rejected_tokens": (_status, (_handle,)),
    "clbt_table_width": (c_uint32, (_handle,)),
    "clbt_table_row_lengths": (_pointer, (_handle,)),
    "clbt_table_host_data": (_pointer, (_handle,)),
    "clbt_table_device_data": (_handle, (_handle,)),
    "clbt_table_slot_mapping": (_handle, (_handle,)),
    "clbt_multi_table_create": (_status, (_handle, _pointer, _pointer)),
    "clbt_multi_table_destroy": (None, (_handle,)),
    "clbt_multi_table_update_row": (_status, (_handle, c_uint32, _pointer, _pointer, c_int)),
    "clbt_multi_table_group": (_handle, (_handle, c_uint32)),
    "clbt_table_truncate_row": (_status, (_handle, c_uint32, c_size_t)),
    "clbt_multi_table_truncate_row": (_status, (_handle, c_uint32, _pointer)),
    "clbt_table_export_buffers": (_status, (_handle, _pointer)),
    "clbt_table_gathered_rows": (_handle, (_handle,)),
    "clbt_table_state_slots": (_handle, (_handle,)),
    "clbt_table_compute_step_host": (_status, (_handle, _pointer)),
    "clbt_multi_table_compute_step_host": (_status, (_handle, _pointer)),
    "clbt_table_device_row_lengths": (_handle, (_handle,)),
}
for _kind in ("table", "multi_table"):
    _FUNCTIONS.update({
        "clbt_%s_append_rows" % _kind: (_status, (_handle, c_size_t, _pointer, _pointer, _pointer)),
        "clbt_%s_add_rows" % _kind: (_status, (_handle, c_size_t, _pointer, _pointer, _pointer)),
        "clbt_%s_clear_row" % _kind: (_status, (_handle, c_uint32)),
        "clbt_%s_move_row" % _kind: (_status, (_handle, c_uint32, c_uint32)),
        "clbt_%s_swap_row" % _kind: (_status, (_handle, c_uint32, c_uint32)),
        "clbt_%s_clear" % _kind: (_status, (_handle,)),
        "clbt_%s_enqueue_commit" % _kind: (_status, (_handle, c_uint32) + _events),
        "clbt_%s_enqueue_slot_mapping" % _kind: (
            _status, (_handle, c_uint32, _handle, _handle, c_uint32) + _events),
        "clbt_%s_enqueue_export" % _kind: (_status, (_handle, _pointer) + _events),
        "clbt_%s_enqueue_step" % _kind: (_status, (_handle, _pointer) + _events),
        "clbt_%s_enqueue_token_slots" % _kind: (_status, (_handle, _pointer) + _events),
    })


def _candidates():
    """(where, path) pairs in the order they are tried."""
    named = os.environ.get(ENVIRONMENT)
    if named:
        return [("$" + ENVIRONMENT, named)]
    places = []
    try:
        from . import _installed  # written by cmake --install
        places.append(("beside the installed package",
                       os.path.normpath(os.path.join(_HERE, _installed.LIBRARY))))
    except ImportError:
        pass
    checkout = os.path.normpath(os.path.join(_HERE, "..", ".."))
    if os.path.exists(os.path.join(checkout, "include", "clbt", "clbt.h")):
        places.append(("the source tree's build directory",
                       os.path.join(checkout, "build", "libclbt.so")))
    places.append(("the system's library path", SONAME))
    return places


def _open(path):
    """The library at path, or the reason it cannot be used."""
    if os.sep in path and not os.path.exists(path):
        return None, "no such file"
    try:
        library = ctypes.CDLL(path)
    except OSError as error:
        return None, str(error)
    try:
        number = library.clbt_version_number
    except AttributeError:
        return None, "not libclbt: it has no clbt_version_number"
    number.restype = c_uint
    reason = incompatibility(number())
    return (None, reason) if reason else (library, None)


def incompatibility(number):
    """Why a library whose clbt_version_number() is number cannot serve
    this package, or None when it can: the same major version, and at
    least this package's minor version."""
    version = (number // 10000, number // 100 % 100)
    if version[0] == ABI[0] and version >= ABI:
        return None
    return "it is version %d.%d; this package needs %d.%d or a later %d.x" % (
        version + ABI + ABI[:1])


def _file_of(library, path):
    """The file the loader picked for a soname, from /proc/self/maps."""
    if os.sep in path or not os.path.exists("/proc/self/maps"):
        return os.path.abspath(path) if os.sep in path else path
    with open("/proc/self/maps") as maps:
        for line in maps:
            if line.rstrip().endswith(path) or ("/" + path) in line:
                return line.split()[-1]
    return path


def load():
    """Returns (library, the path it was loaded from); raises ImportError
    listing every place tried and why each failed."""
    tried = []
    for where, path in _candidates():
        library, reason = _open(path)
        if library is not None:
            for name, (restype, argtypes) in _FUNCTIONS.items():
                function = getattr(library, name)
                function.restype, function.argtypes = restype, argtypes
            return library, _file_of(library, path)
        tried.append("  %s: %s (%s)" % (where, path, reason))
    raise ImportError("clbt: cannot load libclbt.so; tried\n" + "\n".join(tried)
                      + "\nset %s to the library's path" % ENVIRONMENT)


lib, path = load()
