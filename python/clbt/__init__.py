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
Runner V2's request slots, over Table.step). The package calls libclbt.so through ctypes;
clbt.library_path says which one it loaded (docs/python.md).
"""
from . import _library
from ._core import (PAD_SLOT_ID, CommitMode, Device, Error, Export, Group, MultiTable,
                    SlotMode, Table, devices)
from ._device_array import DeviceArray, StackedDeviceArray
from ._library import STEP_EXPORT, STEP_GATHER
from ._opencl import release_event

library_path = _library.path
Error.__module__ = __name__  # shown as clbt.Error
DeviceArray.__module__ = StackedDeviceArray.__module__ = __name__
__version__ = _library.lib.clbt_version_string().decode()

__all__ = ["CommitMode", "Device", "DeviceArray", "Error", "Export", "Group", "MultiTable",
           "PAD_SLOT_ID", "StackedDeviceArray",
           "STEP_EXPORT", "STEP_GATHER", "SlotMode", "Table", "devices", "library_path",
           "release_event"]
