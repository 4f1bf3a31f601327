"""vLLM's block tables on clbt, as vLLM's own code and tests use them.

``BlockTable``, ``MultiGroupBlockTable``, ``get_block_table_width``,
``SlotMappingMode`` and ``PAD_SLOT_ID`` are vllm/v1/worker/block_table.py's;
``BlockTables`` is Model Runner V2's (vllm/v1/worker/gpu/block_table.py),
where rows are persistent request slots read through ``idx_mapping``. Code
written against those classes runs on any OpenCL device by changing an
import::

    from clbt.vllm import MultiGroupBlockTable

Their device tensors (``.gpu``, ``input_block_tables``, ``slot_mappings``,
``num_blocks.gpu``) are clbt.DeviceArray views of clbt's buffers
(_device_array.py): indexing, ``fill_``, ``copy_``, ``cpu()``, ``numpy()``
and torch's functions work on them as on vLLM's tensors.

Every row update goes to C when it is called, which checks it against the
rows as they are and refuses it whole or applies it (one call per vLLM
append_row, every group at once); a commit is carried out by the step that
follows it, so a decode step is a C call per row update and one clbt step,
whatever its number of rows and groups (docs/python.md, "How the facade
runs a step"). The facade checks only what C cannot see: the types and
lengths of what it hands C (_arguments). docs/python.md lists every
difference from vLLM; each method's docstring names its own.
"""
import array
import enum
import inspect
import threading
from ctypes import byref
from itertools import accumulate

import numpy as np

from . import _arguments as check
from . import _core, _opencl
from ._cache_ops import _tensor, reshape_and_cache_flash
from ._core import PAD_SLOT_ID
from ._device_array import DeviceArray, Memory, StackedDeviceArray, copy_buffer, fill_buffer
from ._errors import Error, wrong_type as _wrong_type
from ._opencl import describe
from ._threads import one_thread_at_a_time
from ._library import ROW_APPEND, ROW_REPLACE, STEP_DUMMY, STEP_GATHER, Step

__all__ = ["BlockTable", "BlockTables", "MultiGroupBlockTable", "PAD_SLOT_ID",
           "RowCapacityError", "SlotMappingMode", "get_block_table_width",
           "reshape_and_cache_flash"]


def __dir__():
    """What dir() and completion list: the public names and the module's
    own dunders, not the imports and helpers the module runs on (lib, np,
    Step, ...), which are no part of its interface (PEP 562)."""
    return sorted(__all__ + [name for name in globals() if name.startswith("__")])

from ._errors import (BUFFER_TOO_SMALL as _BUFFER_TOO_SMALL,
                      INVALID_ARGUMENT as _INVALID_ARGUMENT, INVALID_CONFIG as _INVALID_CONFIG,
                      ROW_OUT_OF_RANGE as _ROW_OUT_OF_RANGE, ROW_OVERFLOW as _ROW_OVERFLOW,
                      TOO_MANY_REQUESTS as _TOO_MANY_REQUESTS)


class RowCapacityError(Error, RuntimeError):
    """An append that would outgrow a row: the RuntimeError Model Runner
    V2's BlockTables raises, with clbt's CLBT_ROW_OVERFLOW status."""


def get_block_table_width(max_num_blocks, block_size, kernel_block_size=None, *,
                          token_alignment=128):
    """The row width after optional alignment (token_alignment tokens; None:
    none) and kernel-block splitting."""
    if token_alignment is not None and token_alignment <= 0:
        raise Error(_INVALID_ARGUMENT, "token_alignment must be positive")
    return _core.block_table_width(max_num_blocks, block_size, kernel_block_size or 0,
                                   token_alignment or 0)


class SlotMappingMode(enum.Enum):
    TOKEN_TO_KV_SLOT = "token_to_kv_slot"
    NONE = "none"


_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)


class _Closes:
    """The facade classes' with-block: leaving it calls close()."""

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()


class _Engine:
    """A clbt multi-group table and what the facade defers on it: a commit
    (carried out by the next step, or by the first read of the device
    rows) and, for BlockTables, a gather (merged into the slot mapping's
    step when idx_mapping is the same). Row updates are not deferred: each
    is one C call, which checks it against the rows as they are
    (docs/design.md, "The Python facade asks C")."""

    def __init__(self, device, groups, max_num_reqs, max_num_batched_tokens, cp_world_size,
                 cp_rank, cp_interleave_size, exact_widths, zero_gathered_tails=False):
        # Held by every facade call that reaches C (_threads).
        self.lock = threading.RLock()
        self.device = _core.shared_device(device)
        self.settings = dict(groups=groups, max_num_reqs=max_num_reqs,
                             max_num_batched_tokens=max_num_batched_tokens,
                             exact_widths=exact_widths, zero_gathered_tails=zero_gathered_tails)
        self.max_num_reqs, self.max_num_batched_tokens = max_num_reqs, max_num_batched_tokens
        self.layout = (cp_world_size, cp_rank, cp_interleave_size)
        self.wanted = self.layout
        self.table = None
        self.step_struct = Step()
        self.step_address = byref(self.step_struct)
        self._build()

    def _build(self):
        world, rank, interleave = self.wanted
        table = _core.MultiTable(self.device, cp_world_size=world, cp_rank=rank,
                                 cp_interleave_size=interleave, **self.settings)
        if self.table is not None:
            self.table.close()
        self.table, self.layout = table, self.wanted
        self.groups = table.groups
        self.per_kv = [group.kv_block_size // group.block_size for group in self.groups]
        self.widths = [group.width for group in self.groups]
        # Each group's row lengths as int32 (vLLM's dtype; they fit).
        self.lengths = [group.row_lengths.view(np.int32) for group in self.groups]
        self.commit_rows = 0  # a commit of rows [0, commit_rows) is owed
        self.gather = None  # (idx_mapping, num_reqs_padded) owed
        self.arrays = {}

    def relayout(self):
        """Makes a CP layout assigned after construction take effect: a new
        table, while no row holds blocks (clbt specialises each table's
        kernel for its layout)."""
        if self.wanted == self.layout:
            self.wanted = self.layout
            return
        with self.lock:  # the row updates call this before they lock
            if any(lengths.any() for lengths in self.lengths):
                wanted, self.wanted = self.wanted, self.layout
                raise Error(_INVALID_CONFIG, "dcp_world_size, dcp_rank and cp_kv_cache_"
                            "interleave_size (%d, %d, %d) can change only while every row is "
                            "empty: clbt specialises the table's kernel for its layout at "
                            "creation; set them before the first append_row" % wanted)
            try:
                self._build()
            except Error:
                self.wanted = self.layout
                raise

    def sync(self):
        """What every read or write of a device array runs first (nothing
        once the table is closed: the arrays keep their buffers)."""
        with self.lock:
            if self.table.closed:
                return
            self.relayout()
            self.run_gather()
            if self.commit_rows:
                rows, self.commit_rows = self.commit_rows, 0
                self.table.commit(rows)

    def run_gather(self):
        """Runs the gather owed, if any, in a step of its own."""
        if self.gather is None:
            return
        idx_mapping, padded = self.gather
        self.gather = None
        self.step(len(idx_mapping), np.zeros(len(idx_mapping) + 1, np.int32), np.empty(0, np.int64),
                  idx_mapping=idx_mapping, num_reqs_padded=padded, flags=STEP_GATHER)

    def step(self, num_reqs, query_start_loc, positions, num_tokens=None, idx_mapping=None,
             num_reqs_padded=0, flags=0):
        """A clbt step (it commits every row first, so an owed commit is
        done). Inputs already on the device (buffer handles, as
        _batch_input gives them) go to C in a Step kept for the purpose;
        host arrays, or a mix of both, go through MultiTable.step, which
        uploads the host ones (the handles as clbt.Buffers)."""
        if type(query_start_loc) is int and type(positions) is int and \
                (idx_mapping is None or type(idx_mapping) is int):
            step = self.step_struct
            step.flags = flags  # the facade's own values
            step.num_reqs = check.u32(num_reqs, "num_reqs")
            step.num_reqs_padded = num_reqs_padded
            step.num_tokens = check.u32(num_tokens, "num_tokens")
            step.query_start_loc, step.positions = query_start_loc, positions
            step.idx_mapping = idx_mapping
            self.table._enqueue_step(self.step_address)
        else:
            self.table.step(num_reqs, _buffer(query_start_loc), _buffer(positions), num_tokens,
                            idx_mapping=_buffer(idx_mapping), num_reqs_padded=num_reqs_padded,
                            flags=flags)
        self.commit_rows = 0

    def dummy(self, num_reqs_padded, flags):
        """A dummy run (CLBT_STEP_DUMMY in flags): no request, no token, no
        batch buffer (NULL), and no commit, so an owed one stays owed."""
        step = self.step_struct
        step.flags, step.num_reqs, step.num_reqs_padded, step.num_tokens = \
            flags, 0, num_reqs_padded, 0
        step.query_start_loc = step.positions = step.idx_mapping = None
        self.table._enqueue_step(self.step_address)

    def map_slots(self, table, num_reqs, query_start_loc, positions, num_tokens):
        """The slot mapping alone (no commit owed) of table (the engine's
        MultiTable, or one group's Table): device inputs (handles) straight
        to C, host ones or a mix through the table, which uploads the host
        ones."""
        if type(query_start_loc) is int and type(positions) is int:
            table._enqueue_slot_mapping(num_reqs, query_start_loc, positions, num_tokens)
        else:
            table.compute_slot_mapping(num_reqs, _buffer(query_start_loc), _buffer(positions),
                                       num_tokens)

    def device_array(self, key, g):
        """The cached DeviceArray of one of group g's buffers (Table's
        _buffers: "rows", "lengths", "slots", "gathered") of this table
        (_current_sync)."""
        array_ = self.arrays.get((key, g))
        if array_ is None:
            group = self.groups[g]
            shape = {"lengths": (self.max_num_reqs,), "slots": (self.max_num_batched_tokens,)
                     }.get(key, (self.max_num_reqs, group.width))
            dtype = _INT64 if key == "slots" else _INT32
            memory = Memory(group._buffers()[key], self.table._queue,
                            int(np.prod(shape)) * dtype.itemsize, self._current_sync())
            array_ = self.arrays[(key, g)] = DeviceArray(memory, shape, dtype)
        return array_

    def _current_sync(self):
        """The sync of the arrays of the table as it is now: a CP layout
        set later makes a new table (relayout), and an array of the old
        one would read and write its dead buffers unnoticed, so every use
        of one raises instead (after sync, which may be what makes the new
        table). Following the new table is no option for all of them: the
        host views are numpy's, fixed on the old table's memory."""
        table = self.table

        def sync():
            self.sync()
            if self.table is not table:
                raise Error(_INVALID_CONFIG, "this device array was taken before the table's "
                            "CP layout changed (dcp_world_size, dcp_rank, cp_kv_cache_"
                            "interleave_size): it views the buffers of the table before; "
                            "take it again (block_table.gpu, slot_mapping.gpu, ...)")
        return sync

    def close(self):
        self.commit_rows, self.gather = 0, None
        self.table.close()


def _buffer(value):
    """A batch input for the table's own step, which uploads host values
    and takes device arrays but refuses a bare int: a buffer handle (what
    _batch_input gives for a DeviceArray, checked there) as a clbt.Buffer
    of its own reference; anything else as it is."""
    return _opencl.Buffer(value, retain=True) if type(value) is int else value


def _batch_inputs(num_reqs, num_tokens, query_start_loc, positions):
    """query_start_loc (int32[num_reqs + 1]) and positions
    (int64[num_tokens]) as the clbt step takes them (_batch_input)."""
    num_tokens = check.u32(num_tokens, "num_tokens")
    return (_batch_input(query_start_loc, "query_start_loc", _INT32, num_reqs + 1,
                         "num_reqs %d" % num_reqs),
            _batch_input(positions, "positions", _INT64, num_tokens,
                         "num_tokens %d" % num_tokens))


def _batch_input(value, name, dtype, needed, why):
    """A batch input as the clbt step takes it: host arrays (numpy, torch
    CPU tensors, lists) and PyOpenCL arrays as they are (the table checks
    them); a DeviceArray, once it is checked as C would read it (_device_
    input), by its buffer when it starts there and has no gaps, else by
    its first needed elements' contents (C reads a buffer from its start:
    a view further in would be read from the wrong place)."""
    if type(value) is DeviceArray:
        _device_input(value, name, dtype, needed, why)
        if value._offset or not value.is_contiguous():
            return value[:needed].numpy()
        memory = value._memory
        if memory.sync is not None:
            memory.sync()
        return memory.handle
    if isinstance(value, StackedDeviceArray):
        return value.numpy()
    if isinstance(value, (int, float, str, bytes)):
        raise _wrong_type("%s is %s; an array expected" % (name, describe(value)))
    return value


def _device_input(value, name, dtype, needed, why):
    """Refuses a DeviceArray C would misread: of another dtype than the
    one C reads (no conversion happens on the device), not 1-D, or
    holding fewer elements than the batch reads (its buffer may hold
    more, which C's own size check would let through)."""
    if value.np_dtype != dtype:
        raise _wrong_type("%s has dtype %s; %s expected" % (name, value.np_dtype, dtype.name))
    if len(value.shape) != 1:
        raise _wrong_type("%s has shape %s; a 1-D array expected" % (name, value.shape))
    if value.shape[0] < needed:
        raise Error(_BUFFER_TOO_SMALL, "%s holds %d values; %s needs %d" % (
            name, value.shape[0], why, needed))


def _owed_rows(value, name, engine, least=0):
    """The rows of a commit or a gather the facade owes to a later step,
    refused now as that step would refuse them: from least (a gather's
    num_reqs) to max_num_reqs."""
    value = check.u32(value, name)
    if value < least:
        raise Error(_INVALID_ARGUMENT, "%s %d is below num_reqs %d" % (name, value, least))
    if value > engine.max_num_reqs:
        raise Error(_TOO_MANY_REQUESTS, "%s %d exceeds max_num_reqs %d" % (
            name, value, engine.max_num_reqs))
    return value


def _token_count(positions, num_tokens):
    if num_tokens is not None:
        return num_tokens
    shape = getattr(positions, "shape", None)
    if shape is None:
        if not hasattr(positions, "__len__"):
            raise _wrong_type("positions is %s; an array expected" % describe(positions))
        return len(positions)
    if len(shape) != 1:
        raise _wrong_type("positions has shape %s; a 1-D array expected" % (tuple(shape),))
    return int(shape[0])


class _CpuGpuBuffer:
    """vLLM's CpuGpuBuffer as its callers read it: ``gpu`` on the device (a
    DeviceArray), ``cpu`` and ``np`` on the host (read-only views)."""

    def __init__(self, gpu, host):
        self._gpu, self._host = gpu, host

    gpu = property(lambda self: self._gpu())
    np = property(lambda self: self._host())
    cpu = property(lambda self: _core_torch_view(self._host()))


def _core_torch_view(host):
    """A torch tensor on host's memory when torch is installed (read-only:
    writes go through the row operations), else host."""
    from ._device_array import _torch
    torch = _torch()
    if torch is None:
        return host
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(host)


def _fixed(getter, name, doc=None):
    """A property set at creation: assigning it raises AttributeError
    saying why, since clbt sizes and specialises a table for it."""
    def refuse(self, value):
        raise AttributeError("%s is fixed when the table is made: clbt sizes and specialises "
                             "the table's buffers and kernel for it; make a new table" % name)
    return property(getter, refuse, doc=doc)


# Every facade call that reaches C holds the engine's lock. The row
# updates, the decode step's hot path, take it in their own body rather
# than through the decorator's wrapper, which would add about 0.3 us to a
# call of about 1 (docs/python.md, "Threads").
_ROW_UPDATES = ("append_row", "add_row", "append_block_ids")
_serialised = one_thread_at_a_time(lambda self: self._engine.lock, _ROW_UPDATES)


@_serialised
class _RowOperations(_Closes):
    """vLLM's row operations, each one C call now on the clbt table that
    _rows() gives: a BlockTable's group (of a MultiGroupBlockTable: that
    group changes alone, the others keep their rows), a
    MultiGroupBlockTable's every group (all or nothing)."""

    def _update(how):
        """append_row or add_row, the decode step's hot path: one C call
        on _rows(), inlined (self._g is None: every group)."""
        def update(self, block_ids, row_idx):
            engine = self._engine
            with engine.lock:
                if engine.wanted is not engine.layout:
                    engine.relayout()
                rows = engine.table if self._g is None else engine.groups[self._g]
                rows._update_row(row_idx, block_ids, how)
        return update

    append_row = _update(ROW_APPEND)
    append_row.__doc__ = """Appends block_ids (a MultiGroupBlockTable's: block_ids[g]
        to group g's row)."""
    add_row = _update(ROW_REPLACE)
    add_row.__doc__ = """Replaces the row with block_ids, as append_row takes them."""
    del _update

    def _current(self):
        """_rows(), in the table's current layout."""
        self._engine.relayout()
        return self._rows()

    def clear_row(self, row_idx):
        self._current().clear_row(row_idx)

    def move_row(self, src, tgt):
        """Moves row src to tgt and clears src. Departure: move_row(r, r)
        keeps the row (vLLM erases it)."""
        self._current().move_row(src, tgt)

    def swap_row(self, src, tgt):
        self._current().swap_row(src, tgt)

    def append_rows(self, rows, counts, block_ids):
        """Extension: many append_row calls in one, all or nothing. Entry
        i appends counts[i] ids to rows[i], its ids right after entry
        i-1's in block_ids (a MultiGroupBlockTable's: counts[g] and
        block_ids[g] are group g's, the rows are shared)."""
        self._current().append_rows(rows, counts, block_ids)

    def add_rows(self, rows, counts, block_ids):
        """Extension: many add_row calls in one, laid out as append_rows."""
        self._current().add_rows(rows, counts, block_ids)

    def clear(self):
        """Zeroes every row and length on the host and the device.
        Departure: vLLM keeps the lengths, so its next append_row would
        start after a run of block 0."""
        self._current().clear()


@_serialised
class BlockTable(_RowOperations):
    """vLLM's BlockTable (one KV-cache group) on clbt. A BlockTable made
    here has a one-group table of its own; one from a MultiGroupBlockTable
    is a view of its group."""

    def __init__(self, block_size, max_num_reqs, max_num_blocks_per_req, max_num_batched_tokens,
                 pin_memory, device, kernel_block_size=None, cp_kv_cache_interleave_size=1,
                 slot_mapping_mode=SlotMappingMode.TOKEN_TO_KV_SLOT, *, dcp_world_size=1,
                 dcp_rank=0):
        if kernel_block_size is None:
            kernel_block_size = block_size
        group = _core.Group(block_size, max_num_blocks_per_req, kernel_block_size=kernel_block_size,
                            slot_mode=_slot_mode(slot_mapping_mode))
        engine = _Engine(device, [group], max_num_reqs, max_num_batched_tokens, dcp_world_size,
                         dcp_rank, cp_kv_cache_interleave_size, exact_widths=True)
        self._attach(engine, 0, pin_memory, device, slot_mapping_mode, owner=None)

    @classmethod
    def _of(cls, engine, g, pin_memory, device, slot_mapping_mode, owner):
        table = cls.__new__(cls)
        table._attach(engine, g, pin_memory, device, slot_mapping_mode, owner)
        return table

    def _attach(self, engine, g, pin_memory, device, slot_mapping_mode, owner):
        self._engine, self._g, self._owner = engine, g, owner
        group = engine.settings["groups"][g]
        self.pin_memory, self.device = pin_memory, device
        self.slot_mapping_mode = slot_mapping_mode
        self.pcp_world_size, self.pcp_rank = 1, 0  # vLLM's kernel reads neither
        k = engine.per_kv[g]
        self._k = k
        self._kernel_block_arange = np.arange(0, k).reshape(1, -1) if k != 1 else None
        self.block_table = _CpuGpuBuffer(lambda: engine.device_array("rows", self._g),
                                         self.get_numpy_array)
        self.slot_mapping = _CpuGpuBuffer(lambda: engine.device_array("slots", self._g),
                                          self._read_slot_mapping)
        self._kv_block_size = group.block_size

    # What the table is sized and specialised for: fixed at creation.
    max_num_reqs = _fixed(lambda self: self._engine.max_num_reqs, "max_num_reqs")
    max_num_batched_tokens = _fixed(lambda self: self._engine.max_num_batched_tokens,
                                    "max_num_batched_tokens")
    kv_cache_block_size = _fixed(lambda self: self._kv_block_size, "kv_cache_block_size")
    block_size = _fixed(lambda self: self._kv_block_size // self._k, "block_size",
                        "The kernel block size (vLLM's block_size).")
    blocks_per_kv_block = _fixed(lambda self: self._k, "blocks_per_kv_block")
    use_hybrid_blocks = _fixed(lambda self: self._k != 1, "use_hybrid_blocks")
    max_num_blocks_per_req = _fixed(lambda self: self._engine.widths[self._g],
                                    "max_num_blocks_per_req", "The row width in kernel blocks.")

    def _layout(self, index):
        return self._engine.wanted[index]

    def _set_layout(self, index, value, name):
        number = check.u32(value, name)
        wanted = list(self._engine.wanted)
        wanted[index] = number
        self._engine.wanted = tuple(wanted)

    dcp_world_size = property(lambda self: self._layout(0) or 1,
                              lambda self, v: self._set_layout(0, v, "dcp_world_size"),
                              doc="Settable, as vLLM's model runner sets it: the new layout "
                                  "takes effect at the next call (while every row is empty); "
                                  "on a MultiGroupBlockTable's group it sets every group's.")
    dcp_rank = property(lambda self: self._layout(1),
                        lambda self, v: self._set_layout(1, v, "dcp_rank"))
    cp_kv_cache_interleave_size = property(
        lambda self: self._layout(2) or 1,
        lambda self, v: self._set_layout(2, v, "cp_kv_cache_interleave_size"))

    @property
    def num_blocks_per_row(self):
        """Each row's length in kernel blocks: a read-only int32 view of the
        host lengths (vLLM's is writable)."""
        self._engine.relayout()
        return self._engine.lengths[self._g]

    def get_numpy_array(self):
        """The host rows: a read-only numpy view (vLLM's is writable; rows
        change through the row operations, which record what the next
        commit moves)."""
        return self._current().host_rows

    def get_cpu_tensor(self):
        """The host rows as a torch tensor on the same memory (the numpy
        view without torch): read it, do not write it."""
        return _core_torch_view(self.get_numpy_array())

    def get_device_tensor(self, num_reqs):
        """Rows [0, num_reqs) on the device: a DeviceArray view."""
        self._engine.relayout()
        return self._engine.device_array("rows", self._g)[:num_reqs]

    def _read_slot_mapping(self):
        return self._engine.device_array("slots", self._g).numpy()

    @staticmethod
    def map_to_kernel_blocks(kv_manager_block_ids, blocks_per_kv_block, kernel_block_arange):
        """KV-manager block b as kernel blocks b*k .. b*k+k-1 (what
        append_row does itself; kept for callers)."""
        if blocks_per_kv_block == 1:
            return kv_manager_block_ids
        blocks = np.asarray(kv_manager_block_ids).reshape(-1, 1) * blocks_per_kv_block
        return (blocks + kernel_block_arange).reshape(-1)

    # ---- row operations ---------------------------------------------------

    def _rows(self):
        return self._engine.groups[self._g]

    def commit_block_table(self, num_reqs):
        """Copies rows [0, num_reqs) to the device, only what changed. On a
        standalone table the copy is made by the next compute_slot_mapping,
        in its step (or by the first read of the device rows); a group of
        a MultiGroupBlockTable commits alone, now."""
        engine = self._engine
        num_reqs = _owed_rows(num_reqs, "num_reqs", engine)
        engine.relayout()
        if self._owner is None:
            engine.commit_rows = max(engine.commit_rows, num_reqs)
            return
        engine.groups[self._g].commit(num_reqs)

    def compute_slot_mapping(self, num_reqs, query_start_loc, positions, *, num_tokens=None):
        """Enqueues the slot mapping into ``slot_mapping.gpu``. The inputs
        are host arrays (numpy, torch CPU tensors; uploaded into buffers the
        table keeps), DeviceArrays or PyOpenCL arrays (with num_tokens=).
        Departure: every element of the output is written, and a token past
        its row's committed blocks, at a negative position or of a
        malformed batch gets -1 (vLLM reads whatever the row holds)."""
        engine = self._engine
        engine.relayout()
        num_reqs = check.u32(num_reqs, "num_reqs")
        count = _token_count(positions, num_tokens)
        query_start_loc, positions = _batch_inputs(num_reqs, count, query_start_loc, positions)
        if self._owner is None and engine.commit_rows:
            engine.step(num_reqs, query_start_loc, positions, num_tokens=count)
            return
        engine.sync()
        engine.map_slots(engine.groups[self._g], num_reqs, query_start_loc, positions, count)

    def close(self):
        """Extension: frees the table now (a group's table goes with its
        MultiGroupBlockTable); later calls raise clbt.Error."""
        if self._owner is None:
            self._engine.close()

    def __repr__(self):
        return "clbt.vllm.BlockTable(block_size=%d, max_num_reqs=%d, width=%d)" % (
            self.kv_cache_block_size, self.max_num_reqs, self.max_num_blocks_per_req)


def _listed(values, name, what="one entry per group"):
    """values (a sequence) as a list; anything else (an int) is refused
    with a TypeMismatchError naming the argument."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise _wrong_type("%s is %s; a list of %s expected" % (name, describe(values), what))
    return list(values)


def _slot_mode(mode):
    if mode == SlotMappingMode.TOKEN_TO_KV_SLOT:
        return _core.SlotMode.TOKEN_TO_KV_SLOT
    if mode == SlotMappingMode.NONE:
        return _core.SlotMode.NONE
    raise _wrong_type("slot_mapping_mode must be a SlotMappingMode; got %r" % (mode,))


def _per_group(values, count, name, against="block_sizes"):
    """values as a list of one entry per group (count of them)."""
    values = _listed(values, name, "one entry per group (%s has %d)" % (against, count))
    if len(values) != count:
        raise Error(_INVALID_ARGUMENT, "%s length (%d) must match %s length (%d)" % (
            name, len(values), against, count))
    return values


def _seed_form(max_num_reqs, max_num_batched_tokens, pin_memory, device, block_sizes,
               kernel_block_sizes, max_num_blocks, cp_kv_cache_interleave_size=1,
               slot_mapping_modes=None, *, dcp_world_size=1, dcp_rank=0):
    """MultiGroupBlockTable's arguments as the seed's block_table.py has
    them (the signature is what binds; nothing calls this)."""


def _model_len_form(max_num_reqs, max_model_len, max_num_batched_tokens, pin_memory, device,
                    block_sizes, kernel_block_sizes, max_num_blocks=None,
                    cp_kv_cache_interleave_size=1, *, num_speculative_tokens=None,
                    dcp_world_size=1, dcp_rank=0):
    """MultiGroupBlockTable's arguments as vLLM at 01edfd0 has them, which
    also takes a4cd9d0's (num_speculative_tokens, an int, where 01edfd0
    has max_num_blocks)."""


_FORMS = {form: inspect.signature(form) for form in (_seed_form, _model_len_form)}


def _is_list(value):
    return not isinstance(value, (str, bytes)) and hasattr(value, "__iter__")


def _constructor_form(args, kwargs):
    """The form the call's arguments are in and their values (defaults
    applied). Both forms bind only positionally, 7 to 9 arguments, where
    block_sizes in the seed's place is a list in the seed's form and the
    device in the other's."""
    bound, refused = {}, []
    for form, signature in _FORMS.items():
        try:
            arguments = signature.bind(*args, **kwargs)
        except TypeError as error:
            refused.append(str(error))
            continue
        arguments.apply_defaults()
        bound[form] = arguments.arguments
    if len(bound) == 2:
        del bound[_seed_form if not _is_list(bound[_seed_form]["block_sizes"])
                  else _model_len_form]
    if not bound:
        raise _wrong_type("MultiGroupBlockTable takes vLLM's arguments, (max_num_reqs, "
                          "max_num_batched_tokens, pin_memory, device, block_sizes, "
                          "kernel_block_sizes, max_num_blocks, ...) or (max_num_reqs, "
                          "max_model_len, max_num_batched_tokens, pin_memory, device, "
                          "block_sizes, kernel_block_sizes, ...): %s; %s" % tuple(refused))
    return bound.popitem()


def _cdiv(a, b):
    return -(-a // b)


def _blocks_for_model_len(arguments, block_sizes):
    """Each group's row in KV blocks as vLLM derives it from max_model_len:
    at 01edfd0, max_num_blocks or cdiv(max_model_len, block_size x
    dcp_world_size), then a multiple of 128 // block_size for a block_size
    up to 128 (TRTLLM's alignment, vLLM #39324); at a4cd9d0 (given
    num_speculative_tokens), the larger of that cdiv and
    1 + num_speculative_tokens, unaligned."""
    max_model_len = _u32(arguments["max_model_len"], "max_model_len")
    world = _u32(arguments["dcp_world_size"], "dcp_world_size")
    speculative = arguments["num_speculative_tokens"]
    max_num_blocks = arguments["max_num_blocks"]
    if max_num_blocks is not None and not _is_list(max_num_blocks):
        if speculative is not None:  # a4cd9d0's eighth argument, given twice
            raise _wrong_type("max_num_blocks is %s; a list of one entry per group expected"
                              % describe(max_num_blocks))
        speculative, max_num_blocks = max_num_blocks, None
    for g, b in enumerate(block_sizes):  # before anything divides by one
        if _u32(b, "block_sizes[%d]" % g) < 1:
            raise Error(_INVALID_CONFIG, "block_sizes[%d] is 0; it must be >= 1" % g)
    if world < 1:
        raise Error(_INVALID_CONFIG, "dcp_world_size is 0; it must be >= 1 (max_model_len "
                    "gives cdiv(max_model_len, block_size x dcp_world_size) blocks)")
    if speculative is not None:
        if max_num_blocks is not None:
            raise _wrong_type("give max_num_blocks (vLLM 01edfd0's) or num_speculative_tokens "
                              "(a4cd9d0's), not both")
        least = 1 + _u32(speculative, "num_speculative_tokens")
        return [max(_cdiv(max_model_len, b * world), least) for b in block_sizes]
    if max_num_blocks is None:
        max_num_blocks = [_cdiv(max_model_len, b * world) for b in block_sizes]
    max_num_blocks = _per_group(max_num_blocks, len(block_sizes), "max_num_blocks")
    return [_cdiv(_u32(n, "max_num_blocks[%d]" % g), 128 // b) * (128 // b) if b <= 128
            else n for g, (n, b) in enumerate(zip(max_num_blocks, block_sizes))]


@_serialised
class MultiGroupBlockTable(_RowOperations):
    """vLLM's MultiGroupBlockTable on a clbt multi-group table: row
    operations change every group or none, and compute_slot_mapping maps
    every group with the commit in one step.

    Takes the arguments of either of vLLM's constructors, positionally or
    by keyword:

    - MultiGroupBlockTable(max_num_reqs, max_num_batched_tokens, pin_memory,
      device, block_sizes, kernel_block_sizes, max_num_blocks,
      cp_kv_cache_interleave_size=1, slot_mapping_modes=None): the seed's,
      rows of get_block_table_width(max_num_blocks[g], block_sizes[g])
      (unaligned for a SlotMappingMode.NONE group);
    - MultiGroupBlockTable(max_num_reqs, max_model_len,
      max_num_batched_tokens, pin_memory, device, block_sizes,
      kernel_block_sizes, max_num_blocks=None,
      cp_kv_cache_interleave_size=1): vLLM 01edfd0's, and a4cd9d0's with
      num_speculative_tokens (an int) in max_num_blocks' place or by
      keyword; rows as those versions derive them (_blocks_for_model_len).

    Both also take dcp_world_size and dcp_rank by keyword (vLLM reads them
    from its DCP group)."""

    def __init__(self, *args, **kwargs):
        form, arguments = _constructor_form(args, kwargs)
        block_sizes = _listed(arguments["block_sizes"], "block_sizes")
        count = len(block_sizes)
        kernel_block_sizes = _per_group(arguments["kernel_block_sizes"], count,
                                        "kernel_block_sizes")
        if form is _seed_form:
            slot_mapping_modes = arguments["slot_mapping_modes"]
            if slot_mapping_modes is None:
                slot_mapping_modes = [SlotMappingMode.TOKEN_TO_KV_SLOT] * count
            slot_mapping_modes = _per_group(slot_mapping_modes, count, "slot_mapping_modes")
            max_num_blocks = _per_group(arguments["max_num_blocks"], count, "max_num_blocks")
        else:
            slot_mapping_modes = [SlotMappingMode.TOKEN_TO_KV_SLOT] * count
            max_num_blocks = _blocks_for_model_len(arguments, block_sizes)
        groups = [_core.Group(b, n, kernel_block_size=k, slot_mode=_slot_mode(m))
                  for b, k, n, m in zip(block_sizes, kernel_block_sizes, max_num_blocks,
                                        slot_mapping_modes)]
        pin_memory, device = arguments["pin_memory"], arguments["device"]
        self._engine = _Engine(device, groups, arguments["max_num_reqs"],
                               arguments["max_num_batched_tokens"], arguments["dcp_world_size"],
                               arguments["dcp_rank"], arguments["cp_kv_cache_interleave_size"],
                               exact_widths=form is _model_len_form)
        self.block_tables = [BlockTable._of(self._engine, g, pin_memory, device, mode, self)
                             for g, mode in enumerate(slot_mapping_modes)]

    def __getitem__(self, idx):
        """The BlockTable of the idx-th KV-cache group."""
        return self.block_tables[idx]

    def __len__(self):
        return len(self.block_tables)

    _g = None  # _RowOperations: every group

    def _rows(self):
        return self._engine.table

    def commit_block_table(self, num_reqs):
        """Owes the device rows [0, num_reqs) of every group: the next
        compute_slot_mapping commits them in its step (a read of a device
        array commits at once). Departure: the step commits every changed
        row, not only rows below num_reqs."""
        engine = self._engine
        engine.commit_rows = max(engine.commit_rows, _owed_rows(num_reqs, "num_reqs", engine))

    def compute_slot_mapping(self, num_reqs, query_start_loc, positions, *, num_tokens=None):
        """Every group's slot mapping in one step, with an owed commit;
        inputs and departures as BlockTable.compute_slot_mapping's."""
        engine = self._engine
        if engine.wanted is not engine.layout:
            engine.relayout()
        num_reqs = check.u32(num_reqs, "num_reqs")
        count = _token_count(positions, num_tokens)
        query_start_loc, positions = _batch_inputs(num_reqs, count, query_start_loc, positions)
        if engine.commit_rows:
            engine.step(num_reqs, query_start_loc, positions, num_tokens=count)
        else:
            engine.map_slots(engine.table, num_reqs, query_start_loc, positions, count)

    # The CP layout of every sharded group (clbt's multi-group table has one).
    dcp_world_size = property(lambda self: self.block_tables[0].dcp_world_size,
                              lambda self, v: setattr(self.block_tables[0], "dcp_world_size", v))
    dcp_rank = property(lambda self: self.block_tables[0].dcp_rank,
                        lambda self, v: setattr(self.block_tables[0], "dcp_rank", v))

    def close(self):
        """Extension: frees the tables now; later calls raise clbt.Error."""
        self._engine.close()

    def __repr__(self):
        return "clbt.vllm.MultiGroupBlockTable(%d groups, max_num_reqs=%d)" % (
            len(self.block_tables), self._engine.max_num_reqs)


# ---- Model Runner V2 ------------------------------------------------------


@_serialised
class _NumBlocks:
    """BlockTables.num_blocks: ``np``, the host lengths [G, max_num_reqs]
    (a new int32 array at each read, with the appends so far), and ``gpu``,
    the committed lengths on the device (a StackedDeviceArray)."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def np(self):
        return np.stack(self._engine.lengths)

    @property
    def gpu(self):
        engine = self._engine
        return StackedDeviceArray(engine.device_array("lengths", g)
                                  for g in range(len(engine.groups)))


@one_thread_at_a_time(lambda self: self._owner._engine.lock)
class _GroupRows:
    """One group's persistent rows, as Model Runner V2's StagedWriteTensor:
    ``gpu`` (the committed rows, a DeviceArray [max_num_reqs, width]),
    ``apply_write()`` and the writes staged since the last apply."""

    def __init__(self, owner, g):
        self._owner, self._g = owner, g

    @property
    def gpu(self):
        return self._owner._engine.device_array("rows", self._g)

    def apply_write(self):
        """Applies this group's staged writes alone: its commit, now."""
        owner = self._owner
        owner._engine.groups[self._g].commit(owner.max_num_reqs)
        owner._applied[self._g] = len(owner._staged)

    def _writes(self):
        """(row, start column, KV block ids) of each write staged to this
        group since it was last applied."""
        owner, g = self._owner, self._g
        return [(row, starts[g], ids[sum(counts[:g]):sum(counts[:g + 1])])
                for row, starts, ids, counts in owner._staged[owner._applied[g]:] if counts[g]]

    @property
    def _staged_write_indices(self):
        return [row for row, _, _ in self._writes()]

    @property
    def _staged_write_starts(self):
        return [start for _, start, _ in self._writes()]

    @property
    def _staged_write_contents(self):
        k = self._owner.blocks_per_kv_block[self._g]
        return [b * k + j for _, _, ids in self._writes() for b in ids for j in range(k)]

    @property
    def _staged_write_cu_lens(self):
        k = self._owner.blocks_per_kv_block[self._g]
        return list(accumulate(len(ids) * k for _, _, ids in self._writes()))


def _slot_modes(count, slot_mapping_enabled, slot_mapping_modes):
    """Each group's SlotMappingMode from MRV2's slot_mapping_modes (newer
    copies) or slot_mapping_enabled (main's), whichever is given."""
    if slot_mapping_modes is None:
        enabled = _per_group([True] * count if slot_mapping_enabled is None
                             else slot_mapping_enabled, count, "slot_mapping_enabled")
        return [SlotMappingMode.TOKEN_TO_KV_SLOT if e else SlotMappingMode.NONE for e in enabled]
    if slot_mapping_enabled is not None:
        raise _wrong_type("give slot_mapping_modes or slot_mapping_enabled, not both")
    return _per_group(slot_mapping_modes, count, "slot_mapping_modes")


@_serialised
class BlockTables(_Closes):
    """Model Runner V2's BlockTables on a clbt multi-group table: each
    request keeps one row (its request slot, req_index) from arrival to
    end, and each step reads the rows through idx_mapping (batch index ->
    slot; negative: a padding request).

    One MRV2 step (append_block_ids per request, apply_staged_writes,
    gather_block_tables, compute_slot_mappings) is a C call per append and
    one clbt step: apply owes the commit, the gather is kept until
    compute_slot_mappings (or a read of the gathered tables), and
    compute_slot_mappings runs commit, slot mappings and gather as one
    clbt_multi_table_enqueue_step. docs/python.md lists the differences
    from MRV2; in short, clbt's bounds guard (out-of-range idx_mapping
    entries and block indices past a row's length give -1 and zero rows,
    where MRV2 reads out of bounds) and zeroed gathered tails
    (zero_gathered_tails=False keeps MRV2's stale ones) stay."""

    def __init__(self, block_sizes, max_num_reqs, max_num_batched_tokens,
                 max_num_blocks_per_group=None, device=None, kernel_block_sizes=None,
                 cp_size=1, cp_rank=0, cp_interleave=1, slot_mapping_enabled=None,
                 dcp_sharded=None, *, max_model_len=None, zero_gathered_tails=True,
                 slot_mapping_modes=None):
        block_sizes = _listed(block_sizes, "block_sizes")
        count = len(block_sizes)
        for g, b in enumerate(block_sizes):  # before anything divides by one
            if check.u32(b, "block_sizes[%d]" % g) < 1:
                raise Error(_INVALID_CONFIG, "block_sizes[%d] is 0; it must be >= 1" % g)
        self._block_sizes = list(block_sizes)
        kernel_block_sizes = _per_group(kernel_block_sizes or block_sizes, count,
                                        "kernel_block_sizes")
        for b, k in zip(block_sizes, kernel_block_sizes):
            if not k or b % k:
                raise Error(_INVALID_CONFIG, "kernel_block_size %r must divide block_size %r"
                            % (k, b))
        if max_num_blocks_per_group is None:
            if max_model_len is None:
                raise _wrong_type("BlockTables needs max_num_blocks_per_group (or, as older "
                                  "Model Runner V2 versions took, max_model_len)")
            if check.u32(cp_size, "cp_size") < 1:
                raise Error(_INVALID_CONFIG, "cp_size is 0; it must be >= 1 (max_model_len "
                            "gives cdiv(max_model_len, block_size x cp_size) blocks)")
            max_model_len = check.u32(max_model_len, "max_model_len")
            max_num_blocks_per_group = [-(-max_model_len // (b * cp_size)) for b in block_sizes]
        elif max_model_len is not None:
            raise _wrong_type("give max_num_blocks_per_group or max_model_len, not both")
        max_num_blocks_per_group = _per_group(max_num_blocks_per_group, count,
                                              "max_num_blocks_per_group")
        modes = _slot_modes(count, slot_mapping_enabled, slot_mapping_modes)
        sharded = _per_group([True] * count if dcp_sharded is None else dcp_sharded, count,
                             "dcp_sharded")
        groups = [_core.Group(b, n, kernel_block_size=k, slot_mode=_slot_mode(m),
                              cp_replicated=not s)
                  for b, k, n, m, s in zip(block_sizes, kernel_block_sizes,
                                           max_num_blocks_per_group, modes, sharded)]
        self._engine = _Engine(device, groups, max_num_reqs, max_num_batched_tokens, cp_size,
                               cp_rank, cp_interleave, exact_widths=True,
                               zero_gathered_tails=zero_gathered_tails)
        self._kernel_block_sizes = kernel_block_sizes
        self._max_num_blocks = max_num_blocks_per_group
        self._modes = modes
        self._dcp_sharded = [bool(s) for s in sharded]
        self._cp = (cp_size, cp_rank, cp_interleave)
        self.device = device
        self.blocks_per_kv_block = list(self._engine.per_kv)
        self._no_starts = [0] * count
        self.block_tables = [_GroupRows(self, g) for g in range(count)]
        self.num_blocks = _NumBlocks(self._engine)
        self._staged = []  # (row, starts, ids, counts) since the last apply
        self._applied = [0] * count  # per group: staged entries applied alone

    block_sizes = _fixed(lambda self: list(self._block_sizes), "block_sizes")
    kernel_block_sizes = _fixed(lambda self: list(self._kernel_block_sizes),
                                "kernel_block_sizes")
    max_num_reqs = _fixed(lambda self: self._engine.max_num_reqs, "max_num_reqs")
    max_num_batched_tokens = _fixed(lambda self: self._engine.max_num_batched_tokens,
                                    "max_num_batched_tokens")
    max_num_blocks_per_group = _fixed(lambda self: list(self._max_num_blocks),
                                      "max_num_blocks_per_group")
    num_kv_cache_groups = _fixed(lambda self: len(self._block_sizes), "num_kv_cache_groups")
    cp_size = _fixed(lambda self: self._cp[0], "cp_size")
    cp_rank = _fixed(lambda self: self._cp[1], "cp_rank")
    cp_interleave = _fixed(lambda self: self._cp[2], "cp_interleave")
    slot_mapping_enabled = _fixed(lambda self: [m == SlotMappingMode.TOKEN_TO_KV_SLOT
                                                for m in self._modes], "slot_mapping_enabled")
    slot_mapping_modes = _fixed(lambda self: list(self._modes), "slot_mapping_modes")
    dcp_sharded = _fixed(lambda self: list(self._dcp_sharded), "dcp_sharded")

    def _null_entries(self):
        """Per group: (each live row entry that is a kernel block of the
        null block, KV block 0: [max_num_reqs, width] bool; the lengths)."""
        engine = self._engine
        for g, group in enumerate(engine.groups):
            rows, lengths = group.host_rows, engine.lengths[g]
            live = np.arange(rows.shape[1]) < lengths[:, None]
            yield (rows < engine.per_kv[g]) & live, lengths

    @property
    def num_null_blocks(self):
        """[G, max_num_reqs] int32: the kernel blocks of the null block (KV
        block 0) in each slot's row, from the host rows (a new array at
        each read)."""
        return np.stack([null.sum(axis=1, dtype=np.int32) for null, _ in self._null_entries()])

    @property
    def num_nulled_blocks(self):
        """[G, max_num_reqs] int32: how many of each slot's first kernel
        blocks are the null block's, the leading run null_leading_blocks
        writes (a new array at each read, from the host rows)."""
        return np.stack([np.where(null.all(axis=1), lengths, null.argmin(axis=1)).astype(np.int32)
                         for null, lengths in self._null_entries()])

    @property
    def input_block_tables(self):
        """Each group's gathered table [max_num_reqs, width] int32
        (DeviceArrays), at addresses fixed for the table's life."""
        engine = self._engine
        return [engine.device_array("gathered", g) for g in range(len(engine.groups))]

    @property
    def slot_mappings(self):
        """Every group's slot mapping, [G, max_num_batched_tokens] int64 (a
        StackedDeviceArray over the groups' buffers). A group without slot
        mapping holds -1 throughout."""
        engine = self._engine
        return StackedDeviceArray(engine.device_array("slots", g)
                                  for g in range(len(engine.groups)))

    def init_block_table_layout_tensors(self):
        """MRV2 rebuilds its tables of device pointers after a sleep-mode
        wake-up; clbt keeps no device pointers (its kernels bind the
        buffers themselves), so nothing needs rebuilding."""

    def append_block_ids(self, req_index, new_block_ids, overwrite):
        """Stages new_block_ids[g] into slot req_index of every group g:
        appended after the slot's blocks, or with overwrite written from
        column 0 (columns past the new length keep their old ids, as in
        MRV2). C checks every group before any changes: a row that would
        outgrow its width raises RowCapacityError (a RuntimeError) and
        stages nothing (MRV2 may have staged the groups before)."""
        engine = self._engine
        with engine.lock:
            engine.run_gather()  # it holds the rows as they were when asked
            try:
                ids = engine.table._update_row(req_index, new_block_ids,
                                               ROW_REPLACE if overwrite else ROW_APPEND)
            except Error as error:
                raise _capacity(error) from None
            counts = [len(group_ids) for group_ids in new_block_ids]  # as C took them
            starts = self._no_starts if overwrite else [
                lengths.item(req_index) - n * k
                for lengths, n, k in zip(engine.lengths, counts, engine.per_kv)]
            self._staged.append((req_index, starts, ids, counts))

    def update_block_ids(self, updates, req_id_to_index):
        """Newer MRV2: the slot of each running request in updates (req_id
        -> its block ids per group) is overwritten with them, as
        append_block_ids(..., overwrite=True) writes; a req_id that
        req_id_to_index does not hold is skipped, as MRV2 skips it. All or
        nothing (MRV2 may have staged the requests before a refused one)."""
        self._overwrite([(index, block_ids) for req_id, block_ids in updates.items()
                         if (index := req_id_to_index.get(req_id)) is not None], "updates")

    def overwrite_rows(self, idx_mapping, batch_rows, rows):
        """Newer MRV2 (named there; no stored copy has its body, so this is
        what its name and its siblings say: docs/python.md): the slot of
        each batch position batch_rows[i], idx_mapping[batch_rows[i]], is
        overwritten with rows[i], one list of block ids per group, as
        append_block_ids(..., overwrite=True) writes. All or nothing."""
        idx, num_reqs = self._idx(idx_mapping, host=True)
        positions = np.asarray(check.host_array(batch_rows, check.UINT32, "batch_rows")[0],
                               np.int64)
        rows = check.sequence(rows, "rows")
        if len(rows) != positions.size:
            raise Error(_INVALID_ARGUMENT, "rows holds %d entries; batch_rows holds %d" % (
                len(rows), positions.size))
        beyond = positions[positions >= num_reqs]
        if beyond.size:
            raise Error(_ROW_OUT_OF_RANGE, "batch_rows holds %d; idx_mapping holds %d "
                        "requests" % (beyond[0], num_reqs))
        slots = idx[positions]
        if (slots < 0).any():
            raise Error(_ROW_OUT_OF_RANGE, "batch_rows holds %d, whose idx_mapping entry %d is "
                        "a padding request's" % (positions[slots < 0][0], slots.min()))
        self._overwrite(list(zip(slots.tolist(), rows)), "rows")

    def _overwrite(self, entries, name):
        """(slot, block ids per group) entries written from column 0 in one
        C call for every group, then staged as MRV2 stages them."""
        engine = self._engine
        updates = []
        for i, (slot, block_ids) in enumerate(entries):
            sizes = array.array(check.SIZE, [0]) * len(engine.groups)
            updates.append((slot, check.group_ids(block_ids, sizes, "%s[%d]" % (name, i)), sizes))
        counts = [np.array([sizes[g] for _, _, sizes in updates], np.uint32)
                  for g in range(len(engine.groups))]
        ids = [np.array([b for _, flat, sizes in updates
                         for b in flat[sum(sizes[:g]):sum(sizes[:g + 1])]], np.int32)
               for g in range(len(engine.groups))]
        with engine.lock:
            engine.run_gather()
            try:
                engine.table.add_rows([slot for slot, _, _ in updates], counts, ids)
            except Error as error:
                raise _capacity(error) from None
            self._staged.extend((slot, self._no_starts, flat, sizes)
                                for slot, flat, sizes in updates)

    def null_leading_blocks(self, group, req_indices, num_blocks):
        """Newer MRV2 (named there; no stored copy has its body, so this is
        what its name says: docs/python.md): the first num_blocks[i]
        KV-manager blocks of slot req_indices[i]'s row in group become the
        null block (KV block 0), the row keeping its length: what a
        sliding-window group's blocks become once they leave the window.
        Staged as a write of that group alone. All or nothing; nulling more
        blocks than a row holds is refused (CLBT_INVALID_ARGUMENT)."""
        engine = self._engine
        g = check.integer(group, "group")
        if not 0 <= g < len(engine.groups):
            raise Error(_INVALID_ARGUMENT, "group %d is not a group: there are %d" % (
                g, len(engine.groups)))
        slots = np.asarray(check.host_array(req_indices, check.UINT32, "req_indices")[0],
                           np.int64)
        nulled = np.asarray(check.host_array(num_blocks, check.UINT32, "num_blocks")[0],
                            np.int64)
        if nulled.size != slots.size:
            raise Error(_INVALID_ARGUMENT, "num_blocks holds %d entries; req_indices holds "
                        "%d" % (nulled.size, slots.size))
        with engine.lock:
            engine.run_gather()
            table, k = engine.groups[g], engine.per_kv[g]
            try:  # the rows as the host holds them, read by their index
                rows, held = table.host_rows[slots], engine.lengths[g][slots] // k
            except IndexError as error:
                raise Error(_ROW_OUT_OF_RANGE, "req_indices: %s (max_num_reqs)" % error) from None
            over = np.flatnonzero(nulled > held)
            if over.size:
                i = over[0]
                raise Error(_INVALID_ARGUMENT, "num_blocks[%d] = %d exceeds the %d blocks slot %d "
                            "holds in group %d" % (i, nulled[i], held[i], slots[i], g))
            kv = [np.concatenate([np.zeros(n, np.int32), row[n * k:h * k:k] // k])
                  for row, n, h in zip(rows, nulled, held)]
            table.add_rows(slots, held, np.concatenate(kv) if kv else [])
            sizes = [0] * len(engine.groups)
            for slot, ids in zip(slots.tolist(), kv):
                sizes[g] = ids.size
                self._staged.append((slot, self._no_starts, ids.tolist(), list(sizes)))

    def apply_staged_writes(self):
        """Applies the staged writes of every group: the host rows hold
        them already (each went to C when staged); the device commit, of
        every group at once, is owed to the next step (or to the first
        read of a device array)."""
        engine = self._engine
        engine.table._live()  # a closed table raises
        engine.commit_rows = engine.max_num_reqs
        self._unstage()

    def _unstage(self):
        self._staged = []
        self._applied = [0] * len(self._applied)

    def _idx(self, idx_mapping, host=False):
        """idx_mapping as an int32 host copy (the step uploads it), or a
        PyOpenCL array as it is (read back with host); and its length."""
        if isinstance(idx_mapping, (DeviceArray, StackedDeviceArray)):
            idx_mapping = idx_mapping.numpy()
        shape = getattr(idx_mapping, "shape", None)
        if shape is not None and hasattr(idx_mapping, "get") and hasattr(idx_mapping, "queue"):
            if not host:
                return idx_mapping, int(shape[0])  # a pyopencl.array.Array
            idx_mapping = idx_mapping.get()
        values = np.array(idx_mapping, copy=True)
        if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
            raise _wrong_type("idx_mapping has dtype %s and shape %s; a 1-D array of ints "
                              "expected" % (values.dtype, values.shape))
        return check.convert(values, np.int32, "idx_mapping"), values.size

    def _padded(self, num_reqs_padded, num_reqs):
        return num_reqs if num_reqs_padded is None else _owed_rows(
            num_reqs_padded, "num_reqs_padded", self._engine, num_reqs)

    def gather_block_tables(self, idx_mapping, num_reqs_padded=None, out=None, out_ptrs=None):
        """Each group's input block table in batch order: row b < num_reqs
        is slot idx_mapping[b]'s committed entries, rows up to
        num_reqs_padded are 0. Returns each group's first num_reqs_padded
        rows (views of input_block_tables). The gather itself runs in the
        next compute_slot_mappings' step when its idx_mapping is the same,
        else first; a read of the returned arrays, or a write staged
        before that step, runs it at once: it holds the rows as they were at
        this call, as MRV2's does. With out (newer MRV2: one int32 device
        array per group, the group's width, at least num_reqs_padded
        rows), the gather runs now and its rows are copied into out on the
        device; out_ptrs, MRV2's table of out's addresses, is not needed
        (clbt binds buffers itself)."""
        engine = self._engine
        idx, num_reqs = self._idx(idx_mapping)
        padded = self._padded(num_reqs_padded, num_reqs)
        tables = self.input_block_tables
        if out is not None:
            out = _per_group(out, len(tables), "out")
            targets = [_out_rows(target, "out[%d]" % g, _INT32, padded, source.shape[1], True)
                       for g, (target, source) in enumerate(zip(out, tables))]
        engine.run_gather()
        engine.gather = (idx, padded)
        if out is None:
            return tuple(table[:padded] for table in tables)
        engine.run_gather()
        for (handle, at, _, width), source in zip(targets, tables):
            copy_buffer(engine.table._queue, source.cl_mem, 0, handle, at, padded * width * 4)
        return tuple(target[:padded] for target in out)

    def get_dummy_block_tables(self, num_reqs):
        """The first num_reqs rows of every input block table, zeroed (a
        dummy run: CLBT_STEP_DUMMY with a gather, which commits nothing),
        at the persistent addresses a recorded graph reads."""
        engine = self._engine
        padded = self._padded(num_reqs, 0)
        engine.run_gather()
        engine.dummy(padded, STEP_DUMMY | STEP_GATHER)
        return tuple(table[:padded] for table in self.input_block_tables)

    def get_dummy_slot_mappings(self, num_tokens):
        """Every slot of every group set to -1 (CLBT_STEP_DUMMY, which
        commits nothing); returns slot_mappings[:, :num_tokens]."""
        engine = self._engine
        num_tokens = check.u32(num_tokens, "num_tokens")
        engine.run_gather()
        engine.dummy(0, STEP_DUMMY)
        return self.slot_mappings[:, :num_tokens]

    def compute_slot_mappings(self, idx_mapping, query_start_loc, positions,
                              num_tokens_padded=None, out=None, *, num_tokens=None):
        """Every group's slot mapping, request r's tokens through slot
        idx_mapping[r] (negative: a padding request, whose tokens get -1),
        with the staged writes and an owed gather of the same idx_mapping,
        in one clbt step; returns slot_mappings[:, :num_tokens_padded]
        (num_tokens_padded None: positions' length). With out (newer MRV2:
        an int64 device array [G, N], N from the batch's tokens to
        max_num_batched_tokens), each group's first N slots are copied
        into its row on the device, and out[:, :num_tokens_padded] is
        returned (a group without slot mapping gives -1 there)."""
        engine = self._engine
        idx, num_reqs = self._idx(idx_mapping)
        count = _token_count(positions, num_tokens)
        query_start_loc, positions = _batch_inputs(num_reqs, count, query_start_loc, positions)
        padded = count if num_tokens_padded is None else check.u32(num_tokens_padded,
                                                                   "num_tokens_padded")
        if out is not None:
            handle, at, pitch, width = _out_rows(out, "out", _INT64, len(engine.groups), count)
        options = {}
        if engine.gather is not None and _same_indices(engine.gather[0], idx):
            options = dict(flags=STEP_GATHER, num_reqs_padded=engine.gather[1])
            engine.gather = None  # merged into this step
        engine.run_gather()
        engine.step(num_reqs, query_start_loc, positions, num_tokens=count, idx_mapping=idx,
                    **options)
        self._unstage()
        if out is None:
            return self.slot_mappings[:, :padded]
        queue, copied = engine.table._queue, min(width, engine.max_num_batched_tokens)
        for g, source in enumerate(self.slot_mappings.members):
            copy_buffer(queue, source.cl_mem, 0, handle, at + g * pitch, copied * 8)
            if width > copied:  # past what the table maps: padding, as MRV2 pads
                fill_buffer(queue, handle, at + g * pitch + copied * 8, (width - copied) * 8,
                            np.int64(PAD_SLOT_ID))
        return out[:, :padded]

    def step(self, idx_mapping, query_start_loc, positions, num_reqs_padded=None, *,
             gather=True, num_tokens=None):
        """Extension: the commit, every group's slot mapping and (gather)
        the gather in one call. Returns (the gathered tables' first
        num_reqs_padded rows, or None; slot_mappings[:, :num_tokens])."""
        engine = self._engine
        idx, num_reqs = self._idx(idx_mapping)
        padded = self._padded(num_reqs_padded, num_reqs)
        count = _token_count(positions, num_tokens)
        query_start_loc, positions = _batch_inputs(num_reqs, count, query_start_loc, positions)
        engine.run_gather()
        engine.step(num_reqs, query_start_loc, positions, num_tokens=count, idx_mapping=idx,
                    num_reqs_padded=padded, flags=STEP_GATHER if gather else 0)
        self._unstage()
        tables = tuple(t[:padded] for t in self.input_block_tables) if gather else None
        return tables, self.slot_mappings[:, :count]

    def compute_step_host(self, idx_mapping, query_start_loc, positions, num_reqs_padded=None,
                          *, gather=True, gathered_rows=None):
        """Extension: the step computed on the host from the host rows
        (clbt_multi_table_compute_step_host), for checks and as a CPU
        fallback. Returns (per group: slot mapping or None for a group
        without slot mapping; gathered table after the step)."""
        engine = self._engine
        idx, num_reqs = self._idx(idx_mapping)
        return engine.table.compute_step_host(
            num_reqs, np.asarray(query_start_loc), np.asarray(positions), idx_mapping=idx,
            num_reqs_padded=self._padded(num_reqs_padded, num_reqs),
            flags=STEP_GATHER if gather else 0, gathered_rows=gathered_rows)

    def close(self):
        """Extension: frees the tables now; later calls raise clbt.Error."""
        self._engine.close()

    def __repr__(self):
        return "clbt.vllm.BlockTables(block_sizes=%s, max_num_reqs=%d)" % (
            self._block_sizes, self.max_num_reqs)


def _same_indices(a, b):
    """Whether two idx_mapping inputs are the same batch: equal host
    arrays, or one PyOpenCL array."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return a is b


def _capacity(error):
    """MRV2's RowCapacityError (a RuntimeError) for C's CLBT_ROW_OVERFLOW;
    any other refusal as it is."""
    if error.code == _ROW_OVERFLOW:
        return RowCapacityError(error.code, error.message)
    return error


def _out_rows(target, name, dtype, rows, least, packed=False):
    """Where a copy out of clbt's buffers writes: (buffer handle, byte
    offset, row pitch in bytes, row length) of a device array (a
    DeviceArray or a pyopencl.array.Array) of dtype with at least rows rows
    of least elements (packed: exactly least, the rows back to back)."""
    handle, at, shape, strides, kind = _tensor(target, name, 2)
    pitch = strides[0] if shape[0] > 1 else shape[1]
    if kind != dtype or shape[0] < rows or shape[1] < least or pitch < shape[1] or (
            packed and not shape[1] == pitch == least):
        raise Error(_INVALID_ARGUMENT, "%s is %s %s with strides %s; at least %d rows of %s%d %s "
                    "elements expected" % (name, kind, shape, strides, rows,
                                           "" if packed else "at least ", least,
                                           "contiguous " + dtype.name if packed else dtype.name))
    return handle, at * dtype.itemsize, pitch * dtype.itemsize, shape[1]
