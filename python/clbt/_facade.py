"""What vLLM's block-table classes on clbt share (vllm.py's v1 classes and
_mrv2.py's BlockTables): the engine, a clbt multi-group table with what the
facade defers on it, the batch inputs as the step takes them, and the
per-group arguments. clbt.vllm is the public module.
"""
import enum
import threading
from ctypes import byref

import numpy as np

from . import _arguments as check
from . import _core, _opencl
from ._device_array import DeviceArray, Memory, StackedDeviceArray
from ._errors import (BUFFER_TOO_SMALL as _BUFFER_TOO_SMALL, INVALID_ARGUMENT as _INVALID_ARGUMENT,
                      INVALID_CONFIG as _INVALID_CONFIG, TOO_MANY_REQUESTS as _TOO_MANY_REQUESTS,
                      Error, wrong_type as _wrong_type)
from ._opencl import describe
from ._threads import one_thread_at_a_time
from ._library import STEP_GATHER, Step


class RowCapacityError(Error, RuntimeError):
    """An append that would outgrow a row: the RuntimeError Model Runner
    V2's BlockTables raises, with clbt's CLBT_ROW_OVERFLOW status."""


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
