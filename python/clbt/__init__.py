"""clbt from Python: vLLM's paged-KV block tables on every OpenCL device.

    import clbt
    with clbt.Device("portable:cpu") as device, \\
         clbt.Table(device, block_size=16, max_num_reqs=256,
                    max_num_blocks_per_req=8192,
                    max_num_batched_tokens=16384) as table:
        table.append_rows(rows, counts, block_ids)
        table.commit(num_reqs)
        table.compute_slot_mapping(num_reqs, query_start_loc, positions)
        slots = table.read_slot_mapping(num_tokens)

clbt.vllm has the same classes shaped as vLLM's BlockTable and
MultiGroupBlockTable, and BlockTables for the persistent model (Model
Runner V2's request slots, over Table.step), and vLLM's cache write and
unified_attention; clbt.KVCache and clbt.Attention are a layer's paged cache
and the attention that reads it. The package calls libclbt.so through
ctypes; clbt.library_path says which one it loaded (docs/python.md).
"""
from . import _library
from ._core import (PAD_SLOT_ID, CommitMode, Device, Export, Group, MultiTable, SlotMode,
                    Table, devices)
from ._device_array import DeviceArray, StackedDeviceArray, host_arrays, set_host_arrays
from ._kv_cache import KVCache
from ._attention import Attention
from ._errors import (DeviceError, Error, InvalidArgumentError, OutOfMemoryError,
                      OutOfRangeError, TypeMismatchError)
from ._library import STEP_DUMMY, STEP_EXPORT, STEP_GATHER
from ._opencl import Buffer, CommandQueue, Context, Event, release_event

library_path = _library.path
for _class in (Error, InvalidArgumentError, OutOfRangeError, TypeMismatchError,
               OutOfMemoryError, DeviceError, Buffer, CommandQueue, Context, Event, DeviceArray,
               StackedDeviceArray, KVCache, Attention):
    _class.__module__ = __name__  # shown as clbt.Error, clbt.OutOfRangeError, ...
__version__ = _library.lib.clbt_version_string().decode()

__all__ = ["Attention", "Buffer", "CommandQueue", "CommitMode", "Context", "Device", "DeviceArray",
           "DeviceError", "Error", "Event", "Export", "Group",
           "InvalidArgumentError", "KVCache", "MultiTable", "OutOfMemoryError", "OutOfRangeError",
           "PAD_SLOT_ID", "STEP_DUMMY", "STEP_EXPORT", "STEP_GATHER", "SlotMode",
           "StackedDeviceArray", "Table",
           "TypeMismatchError", "devices", "host_arrays", "library_path", "release_event",
           "set_host_arrays"]
