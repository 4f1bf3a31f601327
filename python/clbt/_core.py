"""Devices and tables: the C library's handles as Python objects."""
import array
import collections
import ctypes
import enum
import operator
from ctypes import byref, c_uint32, c_void_p

import numpy as np

from . import _opencl
from ._library import (CommitInfo, ExportBuffers, ExportRequest, GroupConfig, HostStep,
                       MultiHostStep, MultiTableConfig, Step, TableConfig, lib)

PAD_SLOT_ID = -1
_INVALID_ARGUMENT = -4002
_NULL_ARGUMENT = -4001
_ROW_OUT_OF_RANGE = -4005
_TOO_MANY_REQUESTS = -4008
_TOO_MANY_TOKENS = -4009

Export = collections.namedtuple("Export", (
    "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len", "past_lens",
    "subsequence_begins", "page_size"))
Export.__doc__ = """A table's export (clbt_export_buffers): FlashInfer's
paged_kv_indptr (OpenVINO's block_indices_begins), paged_kv_indices
(block_indices), paged_kv_last_page_len, OpenVINO's past_lens and
subsequence_begins, all int32, and page_size (kernel_block_size)."""


class Error(Exception):
    """What a clbt call refused, or why it failed: the status's name
    (``status``, e.g. "CLBT_ROW_OVERFLOW"), its value (``code``) and the
    message naming the argument and its bound (``message``). A refused call
    changes nothing."""

    def __init__(self, code, message):
        self.code = code
        self.status = lib.clbt_status_name(code).decode()
        self.message = message
        super().__init__("%s (%d): %s" % (self.status, code, message))


def _check(status):
    if status:
        raise Error(status, lib.clbt_last_error().decode())


def _u32(value, name):
    """A row index or count as the C call takes it; refused when it would
    not fit (ctypes would silently wrap)."""
    value = operator.index(value)
    if not 0 <= value <= 0xFFFFFFFF:
        status = _ROW_OUT_OF_RANGE if name in ("row", "src", "dst", "a", "b") else _INVALID_ARGUMENT
        raise Error(status, "%s %d is outside [0, 4294967295]" % (name, value))
    return value


# The C types arrays hold, by array-module type code.
_INT32, _UINT32, _INT64 = "i", "I", "q"
_DTYPES = {_INT32: np.int32, _UINT32: np.uint32, _INT64: np.int64}
assert all(array.array(code).itemsize == np.dtype(t).itemsize for code, t in _DTYPES.items())


def _array(values, typecode, name):
    """(keep-alive, address, length) of values as a contiguous C array of
    the array-module type typecode. Lists and tuples go through the array
    module (the fast path for a step's few ids); anything else with
    __array__ (numpy, torch CPU tensors) through numpy. Values that do not
    fit the C type are refused, never wrapped."""
    kind = type(values)
    if kind is list or kind is tuple or kind is range:
        try:
            held = array.array(typecode, values)
        except (OverflowError, TypeError) as error:
            raise Error(_INVALID_ARGUMENT, "%s: %s" % (name, error)) from None
        address, count = held.buffer_info()
        return held, address, count
    dtype = _DTYPES[typecode]
    held = np.asarray(values)
    if held.dtype != dtype:
        held = _convert(held, dtype, name)
    held = np.ascontiguousarray(held).reshape(-1)
    return held, held.ctypes.data, held.size


def _convert(values, dtype, name):
    if values.size == 0:
        return values.astype(dtype)
    if values.dtype.kind not in "iu":
        raise Error(_INVALID_ARGUMENT, "%s has dtype %s; integers expected" % (name, values.dtype))
    bounds = np.iinfo(dtype)
    low, high = int(values.min()), int(values.max())
    if low < bounds.min or high > bounds.max:
        raise Error(_INVALID_ARGUMENT, "%s holds %d; %s takes [%d, %d]" % (
            name, low if low < bounds.min else high, np.dtype(dtype).name, bounds.min, bounds.max))
    return values.astype(dtype)


def _readonly_view(address, shape, ctype):
    view = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctype)), shape)
    view.flags.writeable = False
    return view


class SlotMode(enum.IntEnum):
    """What a table's rows hold: KV-cache blocks whose slots tokens write, or
    state indices (Mamba) that map no tokens."""
    TOKEN_TO_KV_SLOT = 0
    NONE = 1


class CommitMode(enum.IntEnum):
    """How commits move rows (see clbt_commit_mode in clbt.h)."""
    AUTO = 0
    WHOLE = 1
    SCATTER = 2


def devices():
    """The selector (for CLBT_DEVICE or Device()) of every OpenCL device
    installed, such as ["portable:cpu:0"]."""
    selectors = []
    for device in _opencl.device_ids():
        text = ctypes.create_string_buffer(64)
        _check(lib.clbt_device_selector(device, text, len(text)))
        selectors.append(text.value.decode())
    return selectors


class _Closable:
    """A C handle released once, by close() or on leaving a with block;
    any later call raises Error."""
    _handle = None
    _kind = "object"

    def _live(self):
        if self._handle is None:
            raise Error(_NULL_ARGUMENT, "the %s is closed" % self._kind)
        return self._handle

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Releases the C object now; closing twice is fine."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._release(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.close()

    def __del__(self):
        self.close()


class Device(_Closable):
    """An OpenCL device with its context and in-order queue.

    Device(selector) opens the device a selector picks
    ("portable:cpu", "nvidia:gpu:0"; None reads CLBT_DEVICE, else the first
    GPU). Device(queue=q) wraps the caller's queue (a pyopencl.CommandQueue,
    or an integer cl_command_queue with context= and device= handles):
    clbt's commands then go to that queue."""
    _kind = "device"

    def __init__(self, selector=None, *, queue=None, context=None, device=None):
        out = c_void_p()
        if queue is None:
            _check(lib.clbt_device_open(None if selector is None else selector.encode(),
                                        byref(out)))
        else:
            if context is None:
                context, device = queue.context, queue.device
            _check(lib.clbt_device_wrap(_opencl.handle(context), _opencl.handle(device),
                                        _opencl.handle(queue), byref(out)))
        self._handle = out.value

    _release = staticmethod(lib.clbt_device_release)

    @property
    def selector(self):
        text = ctypes.create_string_buffer(64)
        _check(lib.clbt_device_selector(lib.clbt_device_id(self._live()), text, len(text)))
        return text.value.decode()

    @property
    def context(self):
        """The OpenCL context: a pyopencl.Context, or its handle."""
        context = lib.clbt_device_context(self._live())
        return pyopencl_object("Context", context)

    @property
    def queue(self):
        """The in-order queue clbt enqueues on: a pyopencl.CommandQueue, or
        its handle."""
        return pyopencl_object("CommandQueue", lib.clbt_device_queue(self._live()))

    def finish(self):
        """Waits until the queue has run every command enqueued so far."""
        _opencl.finish(lib.clbt_device_queue(self._live()))

    def __repr__(self):
        return "clbt.Device(%r)" % (None if self.closed else self.selector)


def pyopencl_object(kind, handle):
    if _opencl.pyopencl is None:
        return handle
    return getattr(_opencl.pyopencl, kind).from_int_ptr(handle, retain=True)


# The batch inputs a call may take as host arrays, with their C types.
_BATCH_INPUTS = {"query_start_loc": _INT32, "positions": _INT64, "idx_mapping": _INT32,
                 "seq_lens": _INT32}


def _needed(name, num_reqs, count):
    """The entries of a batch input a call reads: every position, and
    num_reqs (+ 1) of the per-request arrays."""
    if name == "positions":
        return count
    return num_reqs + (name == "query_start_loc")


class _BatchInputs:
    """Device copies of a batch's inputs given as host arrays, kept per
    table and reused step to step. Two slots alternate, each with its own
    host staging copies: a write reads its staging copy after the call
    returns, so a slot is reused only once its last write is done, and the
    caller may change its arrays at once."""

    def __init__(self, device, max_num_reqs, max_num_tokens):
        context = lib.clbt_device_context(device)
        self.queue = lib.clbt_device_queue(device)
        capacity = {"query_start_loc": max_num_reqs + 1, "positions": max(max_num_tokens, 1),
                    "idx_mapping": max(max_num_reqs, 1), "seq_lens": max(max_num_reqs, 1)}
        self.slots = []
        self.next = 0
        try:
            for _ in range(2):
                slot = [{}, {}, None]  # staging, buffers, the last write's event
                self.slots.append(slot)
                for name, typecode in _BATCH_INPUTS.items():
                    slot[0][name] = np.empty(capacity[name], _DTYPES[typecode])
                    slot[1][name] = _opencl.create_buffer(context, slot[0][name].nbytes)
        except Error:
            self.release()
            raise

    def upload(self, num_reqs, arrays):
        """Enqueues the writes of arrays ({name: host values}); returns
        ({name: buffer}, the number of positions, None without them)."""
        slot = self.slots[self.next]
        self.next ^= 1
        staging, buffers, written = slot
        if written is not None:
            _opencl.wait(written)
            _opencl.release_event(written)
            slot[2] = None
        sources, counts = {}, {}
        for name, values in arrays.items():
            held, _, count = _array(values, _BATCH_INPUTS[name], name)
            needed = _needed(name, num_reqs, count)
            # What the C call would refuse, refused before the staging
            # copies are written past their ends.
            if needed > staging[name].size:
                if name == "positions":
                    raise Error(_TOO_MANY_TOKENS, "num_tokens %d exceeds max_num_batched_tokens "
                                "%d" % (count, staging[name].size))
                raise Error(_TOO_MANY_REQUESTS, "num_reqs %d exceeds max_num_reqs %d" % (
                    num_reqs, staging["query_start_loc"].size - 1))
            if count < needed:
                raise Error(_INVALID_ARGUMENT, "%s holds %d values; num_reqs %d needs %d" % (
                    name, count, num_reqs, needed))
            sources[name], counts[name] = held, needed
        # The last write's event: the queue is in order, so once it is done
        # every staging copy of the slot is free.
        last = [name for name in counts if counts[name]][-1:]
        event = c_void_p()
        for name, needed in counts.items():
            if not needed:
                continue
            host = staging[name]
            host[:needed] = np.asarray(sources[name])[:needed]
            _opencl.write(self.queue, buffers[name], host.ctypes.data, needed * host.itemsize,
                          event if [name] == last else None)
        slot[2] = event if last else None
        return {name: buffers[name] for name in arrays}, counts.get("positions")

    def release(self):
        for _, buffers, written in self.slots:
            if written is not None:
                _opencl.wait(written)
                _opencl.release_event(written)
            for buffer in buffers.values():
                _opencl.release_buffer(buffer)
        self.slots = []


def _is_device_buffer(obj):
    if isinstance(obj, int):
        return True
    pyopencl = _opencl.pyopencl
    return pyopencl is not None and isinstance(obj, (pyopencl.Buffer, pyopencl.array.Array))


class _Rows(_Closable):
    """What tables and multi-group tables share: the row operations that
    take the same arguments, commits, slot mappings and clearing. _c is
    "clbt_table_" or "clbt_multi_table_"."""

    _inputs = None

    def __init__(self, device, handle, max_num_reqs, max_num_batched_tokens):
        self.device = device
        # The C table holds a reference to the device: these stay valid
        # even once the Device object is closed.
        self._device = device._live()
        self._queue = lib.clbt_device_queue(self._device)
        self.max_num_reqs = max_num_reqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self._handle = handle
        self._inputs = None
        c = self._c
        self._clear_row = getattr(lib, c + "clear_row")
        self._move_row = getattr(lib, c + "move_row")
        self._swap_row = getattr(lib, c + "swap_row")
        self._commit = getattr(lib, c + "enqueue_commit")
        self._slot_mapping = getattr(lib, c + "enqueue_slot_mapping")
        self._step = getattr(lib, c + "enqueue_step")
        self._export = getattr(lib, c + "enqueue_export")
        self._clear = getattr(lib, c + "clear")

    def clear_row(self, row):
        """Zeroes a row and sets its length to 0."""
        _check(self._clear_row(self._live(), _u32(row, "row")))

    def move_row(self, src, dst):
        """Moves row src to dst and clears src (moving a row onto itself
        leaves it as it is)."""
        _check(self._move_row(self._live(), _u32(src, "src"), _u32(dst, "dst")))

    def swap_row(self, a, b):
        """Exchanges two whole rows and their lengths."""
        _check(self._swap_row(self._live(), _u32(a, "a"), _u32(b, "b")))

    def commit(self, num_reqs, *, wait_for=None, event=False):
        """Copies rows [0, num_reqs) to the device (only what changed).
        wait_for: events to wait for; event=True returns the commit's event
        (a pyopencl.Event, or a handle to release with clbt.release_event)."""
        return self._enqueue(self._commit, (_u32(num_reqs, "num_reqs"),), wait_for, event)

    def compute_slot_mapping(self, num_reqs, query_start_loc, positions, num_tokens=None, *,
                             wait_for=None, event=False):
        """Enqueues the slot-mapping kernel for a batch and returns without
        waiting. query_start_loc (int32[num_reqs + 1]) and positions
        (int64[num_tokens]) are each a device buffer (pyopencl Buffer or
        Array, or a handle) or a host array (numpy, torch CPU tensor, list),
        which is uploaded into a buffer the table keeps. num_tokens defaults
        to the length of positions (needed for a Buffer or a handle)."""
        num_reqs = _u32(num_reqs, "num_reqs")
        inputs, num_tokens = self._batch(num_reqs, num_tokens, query_start_loc=query_start_loc,
                                         positions=positions)
        return self._enqueue(self._slot_mapping,
                             (num_reqs, inputs["query_start_loc"], inputs["positions"],
                              num_tokens), wait_for, event)

    def step(self, num_reqs, query_start_loc, positions, num_tokens=None, *, idx_mapping=None,
             num_reqs_padded=0, flags=0, seq_lens=None, wait_for=None, event=False):
        """Enqueues a whole serving step (clbt_*_enqueue_step) and returns
        without waiting: the commit of every row's changes, the slot
        mapping of request r through row idx_mapping[r] (None: row r; a
        negative entry: a padding request), with flags STEP_GATHER the
        gather into gathered_rows, with STEP_EXPORT the export. The batch
        inputs (idx_mapping and seq_lens int32[num_reqs]) are device buffers
        or host arrays, as for compute_slot_mapping. num_reqs_padded 0
        means num_reqs."""
        num_reqs = _u32(num_reqs, "num_reqs")
        inputs, num_tokens = self._batch(num_reqs, num_tokens, query_start_loc=query_start_loc,
                                         positions=positions, idx_mapping=idx_mapping,
                                         seq_lens=seq_lens)
        step = Step(flags=_u32(flags, "flags"), num_reqs=num_reqs,
                    num_reqs_padded=_u32(num_reqs_padded, "num_reqs_padded"),
                    num_tokens=num_tokens, **inputs)
        return self._enqueue(self._step, (byref(step),), wait_for, event)

    def export(self, num_reqs, query_start_loc, positions, num_tokens=None, *, idx_mapping=None,
               num_reqs_padded=0, seq_lens=None, wait_for=None, event=False):
        """Enqueues the export of the committed rows' page tables for a
        batch (clbt_*_enqueue_export) into export_buffers: FlashInfer's
        CSR arrays and OpenVINO's. Request r reads row idx_mapping[r]
        (None: row r); seq_lens (None: each request's last position + 1).
        Inputs as for step."""
        num_reqs = _u32(num_reqs, "num_reqs")
        inputs, num_tokens = self._batch(num_reqs, num_tokens, query_start_loc=query_start_loc,
                                         positions=positions, idx_mapping=idx_mapping,
                                         seq_lens=seq_lens)
        request = ExportRequest(num_reqs=num_reqs,
                                num_reqs_padded=_u32(num_reqs_padded, "num_reqs_padded"),
                                num_tokens=num_tokens, **inputs)
        return self._enqueue(self._export, (byref(request),), wait_for, event)

    def _batch(self, num_reqs, num_tokens, **inputs):
        """The handles of a batch's inputs (None stays NULL, device buffers
        are passed as they are, host arrays are uploaded) and num_tokens:
        host positions' length, or a device array's."""
        handles, host = {}, {}
        for name, value in inputs.items():
            if value is None or _is_device_buffer(value):
                handles[name] = _opencl.handle(value)
            else:
                host[name] = value
        if host:
            if self._inputs is None:
                self._inputs = _BatchInputs(self._device, self.max_num_reqs,
                                            self.max_num_batched_tokens)
            uploaded, count = self._inputs.upload(num_reqs, host)
            handles.update(uploaded)
        positions = inputs["positions"]
        if "positions" in host:
            if num_tokens is not None and num_tokens != count:
                raise Error(_INVALID_ARGUMENT, "num_tokens is %d; positions holds %d" % (
                    num_tokens, count))
            num_tokens = count
        elif num_tokens is None:
            if positions is not None and not hasattr(positions, "shape"):
                raise Error(_INVALID_ARGUMENT, "num_tokens is needed with a positions buffer")
            num_tokens = 0 if positions is None else positions.shape[0]
        return handles, _u32(num_tokens, "num_tokens")

    def _enqueue(self, function, arguments, wait_for, event):
        count, address, held = _opencl.wait_list(wait_for)
        out = c_void_p() if event else None
        _check(function(self._live(), *arguments, count, address,
                        None if out is None else byref(out)))
        return _opencl.event_object(out.value) if event else None

    def clear(self):
        """Zeroes every row and length, on the host and the device (vLLM
        keeps the lengths: docs/semantics.md)."""
        _check(self._clear(self._live()))

    def close(self):
        if self._inputs is not None and self._handle is not None:
            self._inputs.release()
            self._inputs = None
        super().close()


class Table(_Rows):
    """One KV-cache group's block table: host rows, their committed device
    copy, and the slot-mapping output.

    Table(device, block_size=16, max_num_reqs=256,
          max_num_blocks_per_req=8192, max_num_batched_tokens=16384)
    takes clbt_table_config's fields as keywords (kernel_block_size,
    cp_world_size, cp_rank, cp_interleave_size, slot_mode: 0 means the
    default; zero_gathered_tails: step's gathered rows are 0 past each
    row's committed length, instead of what earlier steps left there)."""
    _kind = "table"
    _c = "clbt_table_"

    def __init__(self, device, *, block_size, max_num_reqs, max_num_blocks_per_req,
                 max_num_batched_tokens, kernel_block_size=0, cp_world_size=0, cp_rank=0,
                 cp_interleave_size=0, slot_mode=SlotMode.TOKEN_TO_KV_SLOT,
                 zero_gathered_tails=False):
        config = TableConfig(
            block_size=block_size, kernel_block_size=kernel_block_size,
            max_num_reqs=max_num_reqs, max_num_blocks_per_req=max_num_blocks_per_req,
            max_num_batched_tokens=max_num_batched_tokens, cp_world_size=cp_world_size,
            cp_rank=cp_rank, cp_interleave_size=cp_interleave_size, slot_mode=int(slot_mode),
            zero_gathered_tails=int(zero_gathered_tails))
        out = c_void_p()
        _check(lib.clbt_table_create(device._live(), byref(config), byref(out)))
        self._owner = None
        self._setup(device, out.value, max_num_reqs, max_num_batched_tokens)
        self.block_size = kernel_block_size or block_size
        self.kv_block_size = block_size
        self.slot_mode = SlotMode(slot_mode)

    @classmethod
    def _group(cls, owner, handle, group):
        """A group of a multi-group table, which owns it."""
        table = cls.__new__(cls)
        table._owner = owner
        table._setup(owner.device, handle, owner.max_num_reqs, owner.max_num_batched_tokens)
        table.block_size = group.kernel_block_size or group.block_size
        table.kv_block_size = group.block_size
        table.slot_mode = SlotMode(group.slot_mode)
        return table

    def _setup(self, device, handle, max_num_reqs, max_num_batched_tokens):
        _Rows.__init__(self, device, handle, max_num_reqs, max_num_batched_tokens)
        self.width = lib.clbt_table_width(handle)

    def _live(self):
        if self._owner is not None and self._owner.closed:
            self._handle = None
        return _Rows._live(self)

    def _release(self, handle):
        if self._owner is None:
            lib.clbt_table_destroy(handle)

    def append_row(self, row, block_ids):
        """Appends KV-manager block ids to a row (each split into kernel
        blocks when kernel_block_size is smaller)."""
        held, address, count = _array(block_ids, _INT32, "block_ids")
        _check(lib.clbt_table_append_row(self._live(), _u32(row, "row"), address, count))

    def add_row(self, row, block_ids):
        """Replaces a row's blocks with block_ids."""
        held, address, count = _array(block_ids, _INT32, "block_ids")
        _check(lib.clbt_table_add_row(self._live(), _u32(row, "row"), address, count))

    def truncate_row(self, row, num_blocks):
        """Keeps a row's first num_blocks KV-manager blocks and zeroes the
        rest (speculative decoding's rollback)."""
        if num_blocks < 0:
            raise Error(_INVALID_ARGUMENT, "num_blocks %d is negative" % num_blocks)
        _check(lib.clbt_table_truncate_row(self._live(), _u32(row, "row"), num_blocks))

    def append_rows(self, rows, counts, block_ids):
        """Many appends in one call: row rows[i] gains counts[i] ids, entry
        i's ids right after entry i-1's in block_ids. All or nothing; a row
        named twice gains both entries' ids."""
        self._rows(lib.clbt_table_append_rows, rows, counts, block_ids)

    def add_rows(self, rows, counts, block_ids):
        """Many replacements in one call, laid out as append_rows."""
        self._rows(lib.clbt_table_add_rows, rows, counts, block_ids)

    def _rows(self, function, rows, counts, block_ids):
        rows_held, rows_address, num_rows = _array(rows, _UINT32, "rows")
        counts_held, counts_address, num_counts = _array(counts, _UINT32, "counts")
        ids_held, ids_address, _ = _array(block_ids, _INT32, "block_ids")
        if num_counts != num_rows:
            raise Error(_INVALID_ARGUMENT, "counts holds %d entries; rows %d" % (num_counts, num_rows))
        _check(function(self._live(), num_rows, rows_address, counts_address, ids_address))

    @property
    def row_lengths(self):
        """Every row's length in kernel blocks: a read-only view, live until
        the table is closed."""
        return _readonly_view(lib.clbt_table_row_lengths(self._live()), (self.max_num_reqs,),
                              ctypes.c_uint32)

    @property
    def host_rows(self):
        """The host rows, [max_num_reqs, width] int32: a read-only view,
        live until the table is closed (write rows through the row
        operations, which record what the next commit moves)."""
        return _readonly_view(lib.clbt_table_host_data(self._live()),
                              (self.max_num_reqs, self.width), ctypes.c_int32)

    @property
    def device_rows(self):
        """The committed rows on the device: a pyopencl.array.Array
        [max_num_reqs, width] int32 on the same memory, or the cl_mem
        handle."""
        return _opencl.buffer_object(lib.clbt_table_device_data(self._live()),
                                     self._queue, (self.max_num_reqs, self.width),
                                     np.int32)

    @property
    def slot_mapping(self):
        """The slot-mapping output: a pyopencl.array.Array
        [max_num_batched_tokens] int64 on the same memory, or the handle."""
        return _opencl.buffer_object(lib.clbt_table_slot_mapping(self._live()),
                                     self._queue, (self.max_num_batched_tokens,),
                                     np.int64)

    def read_slot_mapping(self, num_tokens=None):
        """The slot-mapping output read back into a new numpy array (waits
        for the queue)."""
        out = np.empty(self.max_num_batched_tokens if num_tokens is None else num_tokens,
                       np.int64)
        return _opencl.read(self._queue, lib.clbt_table_slot_mapping(self._live()), out)

    def read_device_rows(self, num_reqs=None):
        """The committed rows read back into a new numpy array (waits)."""
        return self._read_rows(lib.clbt_table_device_data(self._live()), num_reqs)

    @property
    def gathered_rows(self):
        """The input block table a step with STEP_GATHER builds in batch
        order: a pyopencl.array.Array [max_num_reqs, width] int32 on the
        same memory, at an address fixed for the table's life, or the
        handle."""
        return _opencl.buffer_object(lib.clbt_table_gathered_rows(self._live()), self._queue,
                                     (self.max_num_reqs, self.width), np.int32)

    def read_gathered_rows(self, num_reqs=None):
        """The gathered rows read back into a new numpy array (waits)."""
        return self._read_rows(lib.clbt_table_gathered_rows(self._live()), num_reqs)

    def _read_rows(self, buffer, num_reqs):
        out = np.empty((self.max_num_reqs if num_reqs is None else num_reqs, self.width),
                       np.int32)
        return _opencl.read(self._queue, buffer, out)

    def _export_buffers(self):
        buffers = ExportBuffers()
        _check(lib.clbt_table_export_buffers(self._live(), byref(buffers)))
        return buffers

    @property
    def export_buffers(self):
        """Where export and step with STEP_EXPORT write: an Export of
        pyopencl.array.Array int32 views (or handles) of the table's
        regions, sized for its worst case, at fixed addresses. Raises
        clbt.Error for a SlotMode.NONE table, which has none."""
        buffers = self._export_buffers()
        per_request = self.max_num_reqs
        sizes = (per_request + 1, per_request * self.width, per_request, per_request,
                 per_request + 1)
        return Export(*[_opencl.buffer_object(getattr(buffers, name), self._queue, (size,),
                                              np.int32)
                        for name, size in zip(Export._fields, sizes)], buffers.page_size)

    def read_export(self, num_reqs_padded):
        """What an export of num_reqs_padded requests wrote, read back into
        numpy arrays (waits): an Export of indptr [n + 1], indices
        [indptr[n]], last_page_len [n], past_lens [n] and
        subsequence_begins [n + 1], n = num_reqs_padded."""
        buffers = self._export_buffers()
        n = _u32(num_reqs_padded, "num_reqs_padded")
        if n > self.max_num_reqs:
            raise Error(_TOO_MANY_REQUESTS, "num_reqs_padded %d exceeds max_num_reqs %d" % (
                n, self.max_num_reqs))
        indptr = _opencl.read(self._queue, buffers.paged_kv_indptr, np.empty(n + 1, np.int32))
        pages = int(indptr[n])
        if not 0 <= pages <= self.max_num_reqs * self.width:
            raise Error(_INVALID_ARGUMENT, "paged_kv_indptr[%d] is %d: no export of %d "
                        "requests was written" % (n, pages, n))
        read = [indptr]
        for name, size in zip(Export._fields[1:5], (pages, n, n, n + 1)):
            read.append(_opencl.read(self._queue, getattr(buffers, name),
                                     np.empty(size, np.int32)))
        return Export(*read, buffers.page_size)

    def compute_step_host(self, num_reqs, query_start_loc, positions, *, idx_mapping=None,
                          num_reqs_padded=0, flags=0, gathered_rows=None):
        """A step computed on the host from the host rows
        (clbt_table_compute_step_host): clbt's reference of step's slot
        mapping and gather. gathered_rows is the gathered table before the
        step ([max_num_reqs, width]; None: zeros, as a new table's); it is
        not changed. Returns (slot_mapping int64[max_num_batched_tokens],
        None for a SlotMode.NONE table; the gathered table after the step,
        a new int32 [max_num_reqs, width] array, rewritten only with
        STEP_GATHER)."""
        num_reqs = _u32(num_reqs, "num_reqs")
        qsl_held, qsl, qsl_count = _array(query_start_loc, _INT32, "query_start_loc")
        positions_held, address, num_tokens = _array(positions, _INT64, "positions")
        idx_held, idx, idx_count = (None, None, None) if idx_mapping is None else \
            _array(idx_mapping, _INT32, "idx_mapping")
        # The C call reads num_reqs (+ 1) entries of these: refused when
        # shorter, before it reads past their ends.
        for name, count in (("query_start_loc", qsl_count), ("idx_mapping", idx_count)):
            needed = _needed(name, num_reqs, 0)
            if count is not None and count < needed:
                raise Error(_INVALID_ARGUMENT, "%s holds %d values; num_reqs %d needs %d" % (
                    name, count, num_reqs, needed))
        shape = (self.max_num_reqs, self.width)
        gathered = np.zeros(shape, np.int32)
        if gathered_rows is not None:
            before = _array(gathered_rows, _INT32, "gathered_rows")[0]
            if np.shape(gathered_rows) != shape:
                raise Error(_INVALID_ARGUMENT, "gathered_rows has shape %s; the table's is %s" % (
                    np.shape(gathered_rows), shape))
            gathered[:] = np.asarray(before).reshape(shape)
        slots = None
        if self.slot_mode != SlotMode.NONE:
            slots = np.empty(self.max_num_batched_tokens, np.int64)
        step = HostStep(flags=_u32(flags, "flags"), num_reqs=num_reqs,
                        num_reqs_padded=_u32(num_reqs_padded, "num_reqs_padded"),
                        num_tokens=num_tokens, query_start_loc=qsl, positions=address,
                        idx_mapping=idx, slot_mapping=None if slots is None else slots.ctypes.data,
                        gathered_rows=gathered.ctypes.data)
        _check(lib.clbt_table_compute_step_host(self._live(), byref(step)))
        return slots, gathered

    def compute_slot_mapping_host(self, num_reqs, query_start_loc, positions):
        """The same mapping computed on the host from the host rows: clbt's
        reference and CPU fallback. Returns int64[max_num_batched_tokens]."""
        qsl_held, qsl, _ = _array(query_start_loc, _INT32, "query_start_loc")
        positions_held, address, num_tokens = _array(positions, _INT64, "positions")
        out = np.empty(self.max_num_batched_tokens, np.int64)
        _check(lib.clbt_table_compute_slot_mapping_host(self._live(), _u32(num_reqs, "num_reqs"),
                                                        qsl, address, num_tokens,
                                                        out.ctypes.data))
        return out

    @property
    def rejected_tokens(self):
        """Tokens the kernel refused since creation or the last reset
        (waits for the queue)."""
        count = c_uint32()
        _check(lib.clbt_table_read_rejected_tokens(self._live(), byref(count)))
        return count.value

    def reset_rejected_tokens(self):
        _check(lib.clbt_table_reset_rejected_tokens(self._live()))

    @property
    def commit_mode(self):
        return self._commit_mode if hasattr(self, "_commit_mode") else CommitMode.AUTO

    @commit_mode.setter
    def commit_mode(self, mode):
        _check(lib.clbt_table_set_commit_mode(self._live(), int(mode)))
        self._commit_mode = CommitMode(mode)

    @property
    def last_commit(self):
        """(mode, rows, bytes) the last commit moved."""
        info = CommitInfo()
        _check(lib.clbt_table_last_commit(self._live(), byref(info)))
        return CommitMode(info.mode), info.rows, info.bytes


class Group:
    """One KV-cache group of a MultiTable (clbt_group_config)."""

    def __init__(self, block_size, max_num_blocks, *, kernel_block_size=0,
                 slot_mode=SlotMode.TOKEN_TO_KV_SLOT, cp_replicated=False):
        self.block_size = block_size
        self.max_num_blocks = max_num_blocks
        self.kernel_block_size = kernel_block_size
        self.slot_mode = SlotMode(slot_mode)
        self.cp_replicated = cp_replicated


class MultiTable(_Rows):
    """One table per KV-cache group, edited together and all or nothing
    (vLLM's MultiGroupBlockTable). table[g] is group g's Table, owned by
    the multi-group table; slot mappings cover every group in one launch.

    MultiTable(device, groups=[Group(16, 8192), Group(32, 4096)],
               max_num_reqs=256, max_num_batched_tokens=16384)

    commit_mode sets every group's clbt_commit_mode at creation;
    zero_gathered_tails is Table's, for every group; exact_widths sizes
    each group's row at exactly max_num_blocks KV blocks, with no 128-token
    alignment (Model Runner V2's rows)."""
    _kind = "multi-group table"
    _c = "clbt_multi_table_"

    def __init__(self, device, *, groups, max_num_reqs, max_num_batched_tokens,
                 cp_world_size=0, cp_rank=0, cp_interleave_size=0,
                 commit_mode=CommitMode.AUTO, zero_gathered_tails=False, exact_widths=False):
        groups = list(groups)
        configs = (GroupConfig * len(groups))(*[
            GroupConfig(block_size=g.block_size, kernel_block_size=g.kernel_block_size,
                        max_num_blocks=g.max_num_blocks, slot_mode=int(g.slot_mode),
                        cp_replicated=int(g.cp_replicated)) for g in groups])
        config = MultiTableConfig(
            max_num_reqs=max_num_reqs, max_num_batched_tokens=max_num_batched_tokens,
            cp_world_size=cp_world_size, cp_rank=cp_rank,
            cp_interleave_size=cp_interleave_size, num_groups=len(groups), groups=configs,
            commit_mode=int(commit_mode), zero_gathered_tails=int(zero_gathered_tails),
            exact_widths=int(exact_widths))
        out = c_void_p()
        _check(lib.clbt_multi_table_create(device._live(), byref(config), byref(out)))
        super().__init__(device, out.value, max_num_reqs, max_num_batched_tokens)
        self.groups = [Table._group(self, lib.clbt_multi_table_group(out.value, g), group)
                       for g, group in enumerate(groups)]
        for table in self.groups:
            table._commit_mode = CommitMode(commit_mode)

    _release = staticmethod(lib.clbt_multi_table_destroy)

    def __len__(self):
        return len(self.groups)

    def __getitem__(self, group):
        return self.groups[group]

    def append_row(self, row, block_ids):
        """Appends block_ids[g] to the row of each group g."""
        self._row(lib.clbt_multi_table_append_row, row, block_ids)

    def add_row(self, row, block_ids):
        """Replaces the row of each group g with block_ids[g]."""
        self._row(lib.clbt_multi_table_add_row, row, block_ids)

    def truncate_row(self, row, num_blocks):
        """Keeps the first num_blocks[g] KV-manager blocks of the row of each
        group g, all or nothing."""
        if len(num_blocks) != len(self.groups) or min(num_blocks) < 0:
            raise Error(_INVALID_ARGUMENT, "num_blocks needs %d counts >= 0; got %r" % (
                len(self.groups), list(num_blocks)))
        counts = array.array("Q", num_blocks)  # size_t
        _check(lib.clbt_multi_table_truncate_row(self._live(), _u32(row, "row"),
                                                 counts.buffer_info()[0]))

    def _row(self, function, row, block_ids):
        if len(block_ids) != len(self.groups):
            raise Error(_INVALID_ARGUMENT, "block_ids has %d groups; the table has %d" % (
                len(block_ids), len(self.groups)))
        arrays = [_array(ids, _INT32, "block_ids[%d]" % g) for g, ids in enumerate(block_ids)]
        addresses = array.array("Q", [a[1] for a in arrays])
        counts = array.array("Q", [a[2] for a in arrays])  # size_t
        _check(function(self._live(), _u32(row, "row"), addresses.buffer_info()[0],
                        counts.buffer_info()[0]))

    def append_rows(self, rows, counts, block_ids):
        """Table.append_rows for every group in one call: counts[g] and
        block_ids[g] are group g's, the rows are shared."""
        self._rows(lib.clbt_multi_table_append_rows, rows, counts, block_ids)

    def add_rows(self, rows, counts, block_ids):
        """Table.add_rows for every group in one call."""
        self._rows(lib.clbt_multi_table_add_rows, rows, counts, block_ids)

    def compute_step_host(self, num_reqs, query_start_loc, positions, *, idx_mapping=None,
                          num_reqs_padded=0, flags=0, gathered_rows=None):
        """Table.compute_step_host for every group in one call
        (clbt_multi_table_compute_step_host): gathered_rows is None or one
        array (or None) per group. Returns (one slot mapping per group,
        None for a SlotMode.NONE group; one gathered table per group)."""
        num_reqs = _u32(num_reqs, "num_reqs")
        qsl_held, qsl, qsl_count = _array(query_start_loc, _INT32, "query_start_loc")
        positions_held, address, num_tokens = _array(positions, _INT64, "positions")
        idx_held, idx, idx_count = (None, None, None) if idx_mapping is None else \
            _array(idx_mapping, _INT32, "idx_mapping")
        for name, count in (("query_start_loc", qsl_count), ("idx_mapping", idx_count)):
            needed = _needed(name, num_reqs, 0)
            if count is not None and count < needed:
                raise Error(_INVALID_ARGUMENT, "%s holds %d values; num_reqs %d needs %d" % (
                    name, count, num_reqs, needed))
        before = [None] * len(self.groups) if gathered_rows is None else list(gathered_rows)
        if len(before) != len(self.groups):
            raise Error(_INVALID_ARGUMENT, "gathered_rows has %d groups; the table has %d" % (
                len(before), len(self.groups)))
        slots, gathered = [], []
        for g, (table, rows) in enumerate(zip(self.groups, before)):
            shape = (self.max_num_reqs, table.width)
            out = np.zeros(shape, np.int32)
            if rows is not None:
                if np.shape(rows) != shape:
                    raise Error(_INVALID_ARGUMENT, "gathered_rows[%d] has shape %s; the group's "
                                "is %s" % (g, np.shape(rows), shape))
                out[:] = np.asarray(_array(rows, _INT32, "gathered_rows[%d]" % g)[0]).reshape(shape)
            gathered.append(out)
            slots.append(None if table.slot_mode == SlotMode.NONE else
                         np.empty(self.max_num_batched_tokens, np.int64))
        slot_addresses = array.array("Q", [0 if a is None else a.ctypes.data for a in slots])
        gathered_addresses = array.array("Q", [a.ctypes.data for a in gathered])
        step = MultiHostStep(flags=_u32(flags, "flags"), num_reqs=num_reqs,
                             num_reqs_padded=_u32(num_reqs_padded, "num_reqs_padded"),
                             num_tokens=num_tokens, query_start_loc=qsl, positions=address,
                             idx_mapping=idx, slot_mappings=slot_addresses.buffer_info()[0],
                             gathered_rows=gathered_addresses.buffer_info()[0])
        _check(lib.clbt_multi_table_compute_step_host(self._live(), byref(step)))
        return slots, gathered

    def _rows(self, function, rows, counts, block_ids):
        if len(counts) != len(self.groups) or len(block_ids) != len(self.groups):
            raise Error(_INVALID_ARGUMENT, "counts and block_ids need %d groups each" %
                        len(self.groups))
        rows_held, rows_address, num_rows = _array(rows, _UINT32, "rows")
        count_arrays = [_array(c, _UINT32, "counts[%d]" % g) for g, c in enumerate(counts)]
        id_arrays = [_array(i, _INT32, "block_ids[%d]" % g) for g, i in enumerate(block_ids)]
        for g, held in enumerate(count_arrays):
            if held[2] != num_rows:
                raise Error(_INVALID_ARGUMENT, "counts[%d] holds %d entries; rows %d" % (
                    g, held[2], num_rows))
        count_addresses = array.array("Q", [a[1] for a in count_arrays])
        id_addresses = array.array("Q", [a[1] for a in id_arrays])
        _check(function(self._live(), num_rows, rows_address, count_addresses.buffer_info()[0],
                        id_addresses.buffer_info()[0]))
