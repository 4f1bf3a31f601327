"""Devices and tables: the C library's handles as Python objects.

Every argument is checked (_arguments) before C reads it. A closed object
raises InvalidArgumentError (CLBT_NULL_ARGUMENT) on every later call; the
C object itself goes once nothing needs it any more: the Python object
closed, and no host view of its memory left (views keep it).
"""
from __future__ import annotations

import array
import collections
import contextlib
import ctypes
import enum
import operator
import threading
import weakref
from ctypes import byref, c_int, c_uint32, c_void_p
from typing import Any, Iterable, Optional, Sequence, Tuple

import numpy as np

from . import _arguments as check
from . import _opencl, _uploads
from ._arguments import INT32, INT64, SIZE, UINT32
from ._errors import (BUFFER_TOO_SMALL, INVALID_ARGUMENT, NULL_ARGUMENT, TOO_MANY_REQUESTS,
                      TOO_MANY_TOKENS, Error, InvalidArgumentError, TypeMismatchError)
from ._threads import one_thread_at_a_time
from ._library import (EXPORT_CONTEXT, EXPORT_DENSE, ROW_APPEND, ROW_REPLACE, CommitInfo,
                       ExportBuffers, ExportRequest, GroupConfig, HostStep, MultiHostStep,
                       MultiTableConfig, Step, TableConfig, TokenSlotsRequest, lib)

PAD_SLOT_ID = -1

#: Host values: a list, tuple, range, numpy array or anything with
#: __array__ (a torch CPU tensor), 1-D, of ints.
HostArray = Any
#: A batch input: host values, or a device array (pyopencl.array.Array,
#: pyopencl.Buffer, clbt.Buffer).
BatchArray = Any
#: What an event=True call returns: a pyopencl.Event or a clbt.Event.
EventLike = Any

Export = collections.namedtuple("Export", (
    "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len", "past_lens",
    "subsequence_begins", "page_size", "seq_lens", "dcp_local_seq_lens", "max_seq_len",
    "context_kv_indptr", "context_kv_indices", "context_kv_last_page_len", "page_table"),
    defaults=(None,) * 7)
Export.__doc__ = """A table's export (clbt_export_buffers): FlashInfer's
paged_kv_indptr (OpenVINO's block_indices_begins), paged_kv_indices
(block_indices), paged_kv_last_page_len, OpenVINO's past_lens and
subsequence_begins, all int32, and page_size (kernel_block_size); then the
lengths the dense paths read (seq_lens, dcp_local_seq_lens, max_seq_len:
OpenVINO's max_context_len), the CSR of each request's context alone
(context_kv_*: vLLM's BatchDCPPrefillWrapper) and the dense page_table
(FA3's page_table, FlashMLA's block_table, trtllm-gen's block_tables)."""


def _export_parts(context: bool, dense_row_pitch: Optional[int]) -> Tuple[int, int]:
    """The export's flags (CLBT_EXPORT_*) and dense_row_pitch for the
    parts asked for: the context CSR, and the dense page table at a pitch
    (0: the width; None: none)."""
    flags = EXPORT_CONTEXT if context else 0
    if dense_row_pitch is None:
        return flags, 0
    return flags | EXPORT_DENSE, check.u32(dense_row_pitch, "dense_row_pitch")


def _check(status: int) -> None:
    if status:
        raise Error(status, lib.clbt_last_error().decode())


def block_table_width(max_num_blocks: int, block_size: int, kernel_block_size: int = 0,
                      token_alignment: int = 0) -> int:
    """clbt_block_table_width: a row's width in kernel blocks
    (kernel_block_size 0: block_size; token_alignment 0: none)."""
    width = c_uint32()
    _check(lib.clbt_block_table_width(check.u32(max_num_blocks, "max_num_blocks"),
                                      check.u32(block_size, "block_size"),
                                      check.u32(kernel_block_size, "kernel_block_size"),
                                      check.u32(token_alignment, "token_alignment"),
                                      byref(width)))
    return width.value


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


def devices() -> list:
    """The selector (for CLBT_DEVICE or Device()) of every OpenCL device
    installed, such as ["portable:cpu:0"]."""
    selectors = []
    for device in _opencl.device_ids():
        text = ctypes.create_string_buffer(64)
        _check(lib.clbt_device_selector(device, text, len(text)))
        selectors.append(text.value.decode())
    return selectors


class _CObject:
    """One C object (a device, table or multi-group table), freed when the
    last Python object holding it lets go: its owner, which closes it, and
    the host views of its memory. ``open`` is False once its owner closed."""
    __slots__ = ("pointer", "_free", "open", "__weakref__")

    def __init__(self, pointer, free):
        self.pointer, self._free, self.open = pointer, free, True

    def __del__(self):
        self._free(self.pointer)


def _host_view(owner: _CObject, address: int, shape: tuple, ctype) -> np.ndarray:
    """A read-only numpy view of C memory that keeps the C object alive."""
    count = 1
    for extent in shape:
        count *= extent
    memory = (ctype * count).from_address(address)
    memory.owner = owner  # the view's base chain ends here
    view = np.ctypeslib.as_array(memory).reshape(shape)
    view.flags.writeable = False
    return view


class _Closable:
    """A C object released by close() or on leaving a with block; any later
    call raises InvalidArgumentError (CLBT_NULL_ARGUMENT)."""
    _c: Optional[_CObject] = None
    _kind = "object"

    def _object(self) -> _CObject:
        """The open C object. A caller that keeps it in a local for the
        length of its C call keeps the C object alive through it: a close()
        in another thread then frees it only once the call has returned."""
        c = self._c
        if c is None or not c.open:
            raise Error(NULL_ARGUMENT, "the %s is closed" % self._kind)
        return c

    def _live(self) -> int:
        c = self._c
        if c is None or not c.open:
            raise Error(NULL_ARGUMENT, "the %s is closed" % self._kind)
        return c.pointer

    @property
    def closed(self) -> bool:
        c = self._c
        return c is None or not c.open

    def close(self) -> None:
        """Releases the C object now (or, while a host view of it is
        alive, once the last view goes); closing twice is fine."""
        c, self._c = self._c, None
        if c is not None:
            c.open = False

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
    GPU). Device(queue=q) wraps the caller's queue (a pyopencl.CommandQueue
    or a clbt.CommandQueue; its context and device come with it, or from
    context= and device=): clbt's commands then go to that queue."""
    _kind = "device"

    def __init__(self, selector: Optional[str] = None, *, queue: Any = None,
                 context: Any = None, device: Any = None):
        out = c_void_p()
        if queue is None:
            if selector is not None and not isinstance(selector, str):
                raise TypeMismatchError(INVALID_ARGUMENT, "selector is %s; a str "
                                        "expected" % _opencl.describe(selector))
            _check(lib.clbt_device_open(None if selector is None else selector.encode(),
                                        byref(out)))
        else:
            queue_handle = _opencl.handle(queue, "queue", "queue")
            context_handle, device_handle = _opencl.queue_context_and_device(queue_handle)
            if context is not None:
                context_handle = _opencl.handle(context, "context", "context")
            if device is not None:
                device_handle = _opencl.handle(device, "device", "device")
            _check(lib.clbt_device_wrap(context_handle, device_handle, queue_handle,
                                        byref(out)))
        self._c = _CObject(out.value, lib.clbt_device_release)

    # A device is shared between threads and has no lock: each call holds
    # its C object (_object) until it returns, so that another thread's
    # close() cannot free the queue under it.

    @property
    def selector(self) -> str:
        held = self._object()
        text = ctypes.create_string_buffer(64)
        _check(lib.clbt_device_selector(lib.clbt_device_id(held.pointer), text, len(text)))
        return text.value.decode()

    @property
    def context(self) -> Any:
        """The OpenCL context: a pyopencl.Context, or a clbt.Context."""
        held = self._object()
        return _opencl.wrapped("context", lib.clbt_device_context(held.pointer))

    @property
    def queue(self) -> Any:
        """The in-order queue clbt enqueues on: a pyopencl.CommandQueue, or a
        clbt.CommandQueue."""
        held = self._object()
        return _opencl.wrapped("queue", lib.clbt_device_queue(held.pointer))

    def finish(self) -> None:
        """Waits until the queue has run every command enqueued so far."""
        held = self._object()
        _opencl.finish(lib.clbt_device_queue(held.pointer))

    def __repr__(self):
        if self.closed:
            return "<clbt.Device closed>"
        return "clbt.Device(%r)" % self.selector


_default_device = []


def shared_device(device: Any) -> Device:
    """A clbt.Device as given, a CLBT_DEVICE selector opened, or for
    anything else (a torch.device, as vLLM's code passes) the process's
    default device, opened once and shared (the vLLM facade's)."""
    if isinstance(device, Device):
        return device
    if isinstance(device, str) and device not in ("cpu", "cuda") and \
            not device.startswith(("cuda:", "cpu:")):
        return Device(device)
    if not _default_device:
        _default_device.append(Device())
    return _default_device[0]


def _needed(name, num_reqs, num_tokens):
    """The entries of a batch input a call reads: num_tokens positions, and
    num_reqs (+ 1) of the per-request arrays."""
    if name == "positions":
        return num_tokens
    return num_reqs + (name == "query_start_loc")


_serialised = one_thread_at_a_time(operator.attrgetter("_lock"))


@_serialised
class _Rows(_Closable):
    """What tables and multi-group tables share: the row operations that
    take the same arguments, commits, slot mappings and clearing. _prefix
    is "clbt_table_" or "clbt_multi_table_". A batch call checks every
    argument, its wait list included, before it uploads anything. Every
    public call holds the table's lock (_threads): one thread at a time."""

    _uploads = None
    _lock = contextlib.nullcontext()  # until __init__ has made the table's

    def __init__(self, device, c_object, max_num_reqs, max_num_batched_tokens):
        self._lock = threading.RLock()
        self.device = device
        self._c = c_object
        # The C table holds a reference to the device: these stay valid
        # while the C table lives, even once the Device object is closed.
        self._device = device._live()
        self._queue = lib.clbt_device_queue(self._device)
        self.max_num_reqs = max_num_reqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self._uploads = None
        prefix = self._prefix
        self._clear_row = getattr(lib, prefix + "clear_row")
        self._move_row = getattr(lib, prefix + "move_row")
        self._swap_row = getattr(lib, prefix + "swap_row")
        self._commit = getattr(lib, prefix + "enqueue_commit")
        self._slot_mapping = getattr(lib, prefix + "enqueue_slot_mapping")
        self._step = getattr(lib, prefix + "enqueue_step")
        self._export = getattr(lib, prefix + "enqueue_export")
        self._token_slots = getattr(lib, prefix + "enqueue_token_slots")
        self._clear = getattr(lib, prefix + "clear")

    def clear_row(self, row: int) -> None:
        """Zeroes a row and sets its length to 0."""
        handle = self._live()
        _check(self._clear_row(handle, check.u32(row, "row")))

    def move_row(self, src: int, dst: int) -> None:
        """Moves row src to dst and clears src (moving a row onto itself
        leaves it as it is)."""
        handle = self._live()
        _check(self._move_row(handle, check.u32(src, "src"), check.u32(dst, "dst")))

    def swap_row(self, a: int, b: int) -> None:
        """Exchanges two whole rows and their lengths."""
        handle = self._live()
        _check(self._swap_row(handle, check.u32(a, "a"), check.u32(b, "b")))

    def commit(self, num_reqs: int, *, wait_for: Optional[Sequence[EventLike]] = None,
               event: bool = False) -> Optional[EventLike]:
        """Copies rows [0, num_reqs) to the device (only what changed).
        wait_for: events to wait for; event=True returns the commit's event
        (a pyopencl.Event, or a clbt.Event)."""
        handle = self._live()
        num_reqs = check.u32(num_reqs, "num_reqs")
        return self._enqueue(self._commit, handle, (num_reqs,), _opencl.wait_list(wait_for),
                             event)

    def compute_slot_mapping(self, num_reqs: int, query_start_loc: BatchArray,
                             positions: BatchArray, num_tokens: Optional[int] = None, *,
                             wait_for: Optional[Sequence[EventLike]] = None,
                             event: bool = False) -> Optional[EventLike]:
        """Enqueues the slot-mapping kernel for a batch and returns without
        waiting. query_start_loc (int32[num_reqs + 1]) and positions
        (int64[num_tokens]) are each a device array (pyopencl Array or
        Buffer, clbt.Buffer) or host values (numpy, torch CPU tensor, list),
        which are uploaded into a buffer the table keeps. num_tokens
        defaults to the length of positions (needed for a Buffer)."""
        handle = self._live()
        num_reqs = check.u32(num_reqs, "num_reqs")
        waits = _opencl.wait_list(wait_for)
        inputs, num_tokens = self._batch(num_reqs, num_tokens, query_start_loc=query_start_loc,
                                         positions=positions)
        return self._enqueue(self._slot_mapping, handle,
                             (num_reqs, inputs["query_start_loc"], inputs["positions"],
                              num_tokens), waits, event)

    def step(self, num_reqs: int, query_start_loc: BatchArray, positions: Optional[BatchArray],
             num_tokens: Optional[int] = None, *, idx_mapping: Optional[BatchArray] = None,
             num_reqs_padded: int = 0, flags: int = 0, seq_lens: Optional[BatchArray] = None,
             context: bool = False, dense_row_pitch: Optional[int] = None,
             num_state_slots: int = 0, state_null_block: int = 0,
             wait_for: Optional[Sequence[EventLike]] = None,
             event: bool = False) -> Optional[EventLike]:
        """Enqueues a whole serving step (clbt_*_enqueue_step) and returns
        without waiting: the commit of every row's changes, the slot
        mapping of request r through row idx_mapping[r] (None: row r; a
        negative entry: a padding request), with flags STEP_GATHER the
        gather into gathered_rows, with STEP_EXPORT the export, with
        STEP_STATE_SLOTS each NONE group's num_state_slots (0: 1) state ids
        a request into state_slots (state_null_block for none). The batch
        inputs (idx_mapping and seq_lens int32[num_reqs]) are device arrays
        or host values, as for compute_slot_mapping. num_reqs_padded 0
        means num_reqs. With STEP_EXPORT, context and dense_row_pitch ask
        for the export's parts as in export."""
        handle = self._live()
        export_flags, pitch = _export_parts(context, dense_row_pitch)
        counts = dict(flags=check.u32(flags, "flags"), num_reqs=check.u32(num_reqs, "num_reqs"),
                      num_reqs_padded=check.u32(num_reqs_padded, "num_reqs_padded"),
                      export_flags=export_flags, dense_row_pitch=pitch,
                      num_state_slots=check.u32(num_state_slots, "num_state_slots"),
                      state_null_block=check.integer(state_null_block, "state_null_block",
                                                     c_int))
        waits = _opencl.wait_list(wait_for)
        inputs, num_tokens = self._batch(counts["num_reqs"], num_tokens,
                                         query_start_loc=query_start_loc, positions=positions,
                                         idx_mapping=idx_mapping, seq_lens=seq_lens)
        step = Step(num_tokens=num_tokens, **counts, **inputs)
        return self._enqueue(self._step, handle, (byref(step),), waits, event)

    def export(self, num_reqs: int, query_start_loc: BatchArray, positions: BatchArray,
               num_tokens: Optional[int] = None, *, idx_mapping: Optional[BatchArray] = None,
               num_reqs_padded: int = 0, seq_lens: Optional[BatchArray] = None,
               context: bool = False, dense_row_pitch: Optional[int] = None,
               wait_for: Optional[Sequence[EventLike]] = None,
               event: bool = False) -> Optional[EventLike]:
        """Enqueues the export of the committed rows' page tables for a
        batch (clbt_*_enqueue_export) into export_buffers: FlashInfer's
        CSR arrays, OpenVINO's and the lengths; with context, the CSR of
        each request's context alone; with a dense_row_pitch (0: the
        width), the dense page table. Request r reads row idx_mapping[r]
        (None: row r); seq_lens (None: each request's last position + 1).
        Inputs as for step."""
        handle = self._live()
        flags, pitch = _export_parts(context, dense_row_pitch)
        counts = dict(num_reqs=check.u32(num_reqs, "num_reqs"),
                      num_reqs_padded=check.u32(num_reqs_padded, "num_reqs_padded"),
                      flags=flags, dense_row_pitch=pitch)
        waits = _opencl.wait_list(wait_for)
        inputs, num_tokens = self._batch(counts["num_reqs"], num_tokens,
                                         query_start_loc=query_start_loc, positions=positions,
                                         idx_mapping=idx_mapping, seq_lens=seq_lens)
        request = ExportRequest(num_tokens=num_tokens, **counts, **inputs)
        return self._enqueue(self._export, handle, (byref(request),), waits, event)

    def token_slots(self, num_reqs: int, query_start_loc: BatchArray, token_indices: Any,
                    token_slots: Any, *, num_rows: int, indices_per_row: int,
                    idx_mapping: Optional[BatchArray] = None,
                    wait_for: Optional[Sequence[EventLike]] = None,
                    event: bool = False) -> Optional[EventLike]:
        """Enqueues the translation of an index matrix of request-local
        token indices into KV-cache slots (clbt_*_enqueue_token_slots):
        row i of token_indices (int32, num_rows x indices_per_row entries,
        row-major; -1: none) belongs to the request whose query_start_loc
        range holds i, and token_slots (int32) receives one section of as
        many entries per token-mapping group. token_indices and token_slots
        are device arrays (a 2-D array flattened with reshape(-1));
        query_start_loc and idx_mapping are as for step."""
        handle = self._live()
        counts = dict(num_reqs=check.u32(num_reqs, "num_reqs"),
                      num_rows=check.u32(num_rows, "num_rows"),
                      indices_per_row=check.u32(indices_per_row, "indices_per_row"))
        waits = _opencl.wait_list(wait_for)
        matrix = self._matrix(counts, token_indices=token_indices, token_slots=token_slots)
        inputs, _ = self._batch(counts["num_reqs"], 0, query_start_loc=query_start_loc,
                                positions=None, idx_mapping=idx_mapping)
        del inputs["positions"]
        request = TokenSlotsRequest(**counts, **inputs, **matrix)
        return self._enqueue(self._token_slots, handle, (byref(request),), waits, event)

    def _matrix(self, counts, **arrays):
        """The int handles of token_slots' index matrix and output, each
        checked for its type and, when a pyopencl Array, for its own length
        (C checks its buffer's size, which may go on past the Array's end):
        num_rows x indices_per_row entries in, as many out for each
        token-mapping group."""
        matrix = "num_rows %d x indices_per_row %d" % (counts["num_rows"],
                                                       counts["indices_per_row"])
        entries = counts["num_rows"] * counts["indices_per_row"]
        sections = self._token_sections()
        needed = dict(token_indices=(entries, matrix), token_slots=(
            sections * entries, "%d section%s of %s" % (sections, "s" * (sections != 1), matrix)))
        pyopencl = _opencl.pyopencl
        handles = {}
        for name, value in arrays.items():
            if not check.is_device_array(value):
                raise TypeMismatchError(INVALID_ARGUMENT, "%s is %s; a device array "
                                        "expected" % (name, _opencl.describe(value)))
            handles[name], length = check.device_array(value, np.int32, name)
            count, why = needed[name]
            if count and pyopencl is not None and isinstance(value, pyopencl.array.Array):
                check.at_least(name, length, count, why, BUFFER_TOO_SMALL)
        return handles

    def _batch(self, num_reqs, num_tokens, **inputs):
        """The int handles of a batch's inputs (None stays NULL, device
        arrays are passed as they are, host values are uploaded) and
        num_tokens (given, else the length of positions), each input
        checked against the entries the call will read."""
        handles, host, lengths = _batch_inputs(inputs)
        num_tokens = self._num_tokens(num_tokens, inputs["positions"], host, lengths)
        if host:  # what C would refuse, refused before an upload is written past its end
            if num_tokens > self.max_num_batched_tokens and "positions" in host:
                raise Error(TOO_MANY_TOKENS, "num_tokens %d exceeds "
                            "max_num_batched_tokens %d" % (num_tokens,
                                                           self.max_num_batched_tokens))
            if num_reqs > self.max_num_reqs:
                raise Error(TOO_MANY_REQUESTS, "num_reqs %d exceeds max_num_reqs %d" % (
                    num_reqs, self.max_num_reqs))
        for name, length in lengths.items():
            why = "num_tokens %d" % num_tokens if name == "positions" else "num_reqs %d" % num_reqs
            check.at_least(name, length, _needed(name, num_reqs, num_tokens), why,
                           INVALID_ARGUMENT if name in host else BUFFER_TOO_SMALL)
        if host:
            if self._uploads is None:
                self._uploads = _uploads.Uploads(self._queue, lib.clbt_device_context(
                    self._device), self.max_num_reqs, self.max_num_batched_tokens)
            handles.update(self._uploads.upload({
                name: (address, _needed(name, num_reqs, num_tokens))
                for name, (held, address, count) in host.items()}))
        return handles, num_tokens

    @staticmethod
    def _num_tokens(num_tokens, positions, host, lengths):
        """num_tokens as given (equal to host positions' length), else the
        length of positions; a buffer, whose length is its capacity, needs
        it given."""
        if num_tokens is not None:
            num_tokens = check.u32(num_tokens, "num_tokens")
            if "positions" in host and num_tokens != lengths["positions"]:
                raise InvalidArgumentError(INVALID_ARGUMENT, "num_tokens is %d; positions "
                                           "holds %d" % (num_tokens, lengths["positions"]))
            return num_tokens
        if positions is not None and "positions" not in host and not hasattr(positions, "shape"):
            raise InvalidArgumentError(INVALID_ARGUMENT,
                                       "num_tokens is needed with a positions buffer")
        return check.u32(lengths.get("positions", 0), "num_tokens")

    def _enqueue_step(self, step) -> None:
        """Enqueues a step whose struct the caller filled (step: byref() of
        a Step; its batch inputs buffer handles, which C checks), without
        the table's lock: for the vLLM facade, which holds its own for
        every call that reaches C."""
        _check(self._step(self._live(), step, 0, None, None))

    def _enqueue_slot_mapping(self, num_reqs: int, query_start_loc: int, positions: int,
                              num_tokens: int) -> None:
        """compute_slot_mapping of two buffer handles, as _enqueue_step."""
        _check(self._slot_mapping(self._live(), check.u32(num_reqs, "num_reqs"),
                                  query_start_loc, positions,
                                  check.u32(num_tokens, "num_tokens"), 0, None, None))

    def _enqueue(self, function, handle, arguments, waits, event):
        count, address, held = waits
        out = c_void_p() if event else None
        _check(function(handle, *arguments, count, address, None if out is None else byref(out)))
        return _opencl.event_object(out.value) if event else None

    def clear(self) -> None:
        """Zeroes every row and length, on the host and the device (vLLM
        keeps the lengths: docs/semantics.md)."""
        _check(self._clear(self._live()))

    def close(self) -> None:
        """Waits for the uploads of host arrays in flight (as
        clbt_table_destroy waits for its commits), then releases the
        table; closing twice is fine."""
        uploads, self._uploads = self._uploads, None
        try:
            if uploads is not None:
                uploads.release()
        finally:
            super().close()


def _batch_inputs(inputs):
    """({name: None or a device array's handle}, {name: (keep-alive,
    address, length) of host values}, {name: entries held}) of a batch's
    inputs, each checked for its type and dtype."""
    handles, host, lengths = {}, {}, {}
    for name, value in inputs.items():
        if value is None:
            handles[name] = None
        elif check.is_device_array(value):
            handles[name], lengths[name] = check.device_array(value, _uploads.DTYPES[name], name)
        else:
            host[name] = check.host_array(value, INT64 if name == "positions" else INT32, name)
            lengths[name] = host[name][2]
    return handles, host, lengths


def _host_batch(num_reqs, query_start_loc, positions, idx_mapping=None):
    """The host forms' inputs (Table's and MultiTable's compute_*_host)
    checked against what C reads: (keep-alive, query_start_loc address,
    positions address, num_tokens, idx_mapping address or None)."""
    qsl_held, qsl, qsl_count = check.host_array(query_start_loc, INT32, "query_start_loc")
    positions_held, address, num_tokens = check.host_array(positions, INT64, "positions")
    check.at_least("query_start_loc", qsl_count, num_reqs + 1, "num_reqs %d" % num_reqs)
    idx_held, idx = None, None
    if idx_mapping is not None:
        idx_held, idx, idx_count = check.host_array(idx_mapping, INT32, "idx_mapping")
        check.at_least("idx_mapping", idx_count, num_reqs, "num_reqs %d" % num_reqs)
    return (qsl_held, positions_held, idx_held), qsl, address, num_tokens, idx


def _total(held):
    """The sum of a checked array of counts, without overflow (a Python
    sum is the quicker for a step's few entries)."""
    if isinstance(held, array.array):
        return sum(held)
    return sum(held.tolist()) if held.size < 256 else int(held.sum(dtype=np.uint64))


@_serialised
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
    _prefix = "clbt_table_"
    # A group's multi-group table's C object, held weakly: what the group's
    # views keep alive (the group closes with its multi-group table).
    _group_of = None

    def __init__(self, device: Device, *, block_size: int, max_num_reqs: int,
                 max_num_blocks_per_req: int, max_num_batched_tokens: int,
                 kernel_block_size: int = 0, cp_world_size: int = 0, cp_rank: int = 0,
                 cp_interleave_size: int = 0, slot_mode: int = SlotMode.TOKEN_TO_KV_SLOT,
                 zero_gathered_tails: bool = False):
        config = check.struct(
            TableConfig, block_size=block_size, kernel_block_size=kernel_block_size,
            max_num_reqs=max_num_reqs, max_num_blocks_per_req=max_num_blocks_per_req,
            max_num_batched_tokens=max_num_batched_tokens, cp_world_size=cp_world_size,
            cp_rank=cp_rank, cp_interleave_size=cp_interleave_size, slot_mode=slot_mode,
            zero_gathered_tails=bool(zero_gathered_tails))
        _check_device(device)
        out = c_void_p()
        held = device._object()  # until the C table has its own reference
        _check(lib.clbt_table_create(held.pointer, byref(config), byref(out)))
        self._setup(device, _CObject(out.value, lib.clbt_table_destroy), config.max_num_reqs,
                    config.max_num_batched_tokens)
        self.block_size = config.kernel_block_size or config.block_size
        self.kv_block_size = config.block_size
        self.slot_mode = SlotMode(config.slot_mode)

    @classmethod
    def _group(cls, owner, handle, group):
        """A group of a multi-group table, which owns it."""
        table = cls.__new__(cls)
        table._setup(owner.device, _CObject(handle, lambda pointer: None),
                     owner.max_num_reqs, owner.max_num_batched_tokens)
        table._group_of = weakref.ref(owner._c)
        table._lock = owner._lock  # one C engine, one thread at a time
        table.block_size = group.kernel_block_size or group.block_size
        table.kv_block_size = group.block_size
        table.slot_mode = SlotMode(group.slot_mode)
        return table

    def _setup(self, device, c_object, max_num_reqs, max_num_batched_tokens):
        _Rows.__init__(self, device, c_object, max_num_reqs, max_num_batched_tokens)
        self.width = lib.clbt_table_width(c_object.pointer)
        self._views = {}

    def close(self) -> None:
        self._views = {}
        _Rows.close(self)

    def _token_sections(self):
        """token_slots' output sections: one, unless the table maps no
        tokens."""
        return int(self.slot_mode != SlotMode.NONE)

    def __repr__(self):
        if self.closed:
            return "<clbt.Table closed>"
        return ("clbt.Table(block_size=%d, kernel_block_size=%d, max_num_reqs=%d, width=%d, "
                "max_num_batched_tokens=%d, slot_mode=%s, device=%r)" % (
                    self.kv_block_size, self.block_size, self.max_num_reqs, self.width,
                    self.max_num_batched_tokens, self.slot_mode.name,
                    None if self.device.closed else self.device.selector))

    def append_row(self, row: int, block_ids: HostArray) -> None:
        """Appends KV-manager block ids to a row (each split into kernel
        blocks when kernel_block_size is smaller)."""
        self._update_row(row, block_ids, ROW_APPEND)

    def add_row(self, row: int, block_ids: HostArray) -> None:
        """Replaces a row's blocks with block_ids."""
        self._update_row(row, block_ids, ROW_REPLACE)

    def _update_row(self, row, block_ids, how):
        """append_row or add_row (how: ROW_APPEND, ROW_REPLACE) without the
        table's lock: for those two, which hold it, and for the vLLM
        facade's row updates, which hold the facade's."""
        # The decode step's hot path: _live, u32 and _check inlined.
        c = self._c
        if c is None or not c.open:
            self._live()  # raises: the table is closed
        held, address, count = check.host_array(block_ids, INT32, "block_ids")
        if type(row) is not int or not 0 <= row <= 0xFFFFFFFF:
            row = check.u32(row, "row")
        update = lib.clbt_table_add_row if how == ROW_REPLACE else lib.clbt_table_append_row
        status = update(c.pointer, row, address, count)
        if status:
            _check(status)

    def _buffers(self) -> dict:
        """The handles of the table's device buffers, by what they hold
        (what the vLLM facade's device arrays view)."""
        handle = self._live()
        return {"rows": lib.clbt_table_device_data(handle),
                "lengths": lib.clbt_table_device_row_lengths(handle),
                "slots": lib.clbt_table_slot_mapping(handle),
                "gathered": lib.clbt_table_gathered_rows(handle)}

    def truncate_row(self, row: int, num_blocks: int) -> None:
        """Keeps a row's first num_blocks KV-manager blocks and zeroes the
        rest (speculative decoding's rollback)."""
        handle = self._live()
        _check(lib.clbt_table_truncate_row(handle, check.u32(row, "row"),
                                           check.size(num_blocks, "num_blocks")))

    def append_rows(self, rows: HostArray, counts: HostArray, block_ids: HostArray) -> None:
        """Many appends in one call: row rows[i] gains counts[i] ids, entry
        i's ids right after entry i-1's in block_ids. All or nothing; a row
        named twice gains both entries' ids."""
        self._rows(lib.clbt_table_append_rows, rows, counts, block_ids)

    def add_rows(self, rows: HostArray, counts: HostArray, block_ids: HostArray) -> None:
        """Many replacements in one call, laid out as append_rows."""
        self._rows(lib.clbt_table_add_rows, rows, counts, block_ids)

    def _rows(self, function, rows, counts, block_ids):
        handle = self._live()
        rows_held, rows_address, num_rows = check.host_array(rows, UINT32, "rows")
        counts_held, counts_address, num_counts = check.host_array(counts, UINT32, "counts")
        ids_held, ids_address, num_ids = check.host_array(block_ids, INT32, "block_ids")
        if num_counts != num_rows:
            raise InvalidArgumentError(INVALID_ARGUMENT, "counts holds %d entries; rows %d"
                                       % (num_counts, num_rows))
        check.at_least("block_ids", num_ids, _total(counts_held), "sum(counts)")
        _check(function(handle, num_rows, rows_address, counts_address, ids_address))

    def _view(self, name, address, shape, ctype):
        view = self._views.get(name)
        if view is None:
            owner = self._object() if self._group_of is None else self._group_of()
            view = self._views[name] = _host_view(owner, address, shape, ctype)
        return view

    @property
    def row_lengths(self) -> np.ndarray:
        """Every row's length in kernel blocks: a read-only view of the C
        table's memory, which it keeps alive (after close() it holds the
        lengths at the close)."""
        handle = self._live()
        return self._view("row_lengths", lib.clbt_table_row_lengths(handle),
                          (self.max_num_reqs,), ctypes.c_uint32)

    @property
    def host_rows(self) -> np.ndarray:
        """The host rows, [max_num_reqs, width] int32: a read-only view of
        the C table's memory, which it keeps alive (write rows through the
        row operations, which record what the next commit moves)."""
        handle = self._live()
        return self._view("host_rows", lib.clbt_table_host_data(handle),
                          (self.max_num_reqs, self.width), ctypes.c_int32)

    @property
    def device_rows(self) -> Any:
        """The committed rows on the device: a pyopencl.array.Array
        [max_num_reqs, width] int32 on the same memory, or a clbt.Buffer."""
        return _opencl.buffer_object(lib.clbt_table_device_data(self._live()),
                                     self._queue, (self.max_num_reqs, self.width),
                                     np.int32)

    @property
    def slot_mapping(self) -> Any:
        """The slot-mapping output: a pyopencl.array.Array
        [max_num_batched_tokens] int64 on the same memory, or a
        clbt.Buffer."""
        return _opencl.buffer_object(lib.clbt_table_slot_mapping(self._live()),
                                     self._queue, (self.max_num_batched_tokens,),
                                     np.int64)

    def _count(self, value, name, bound, default, status):
        if value is None:
            return default
        value = check.u32(value, name)
        if value > bound:
            raise Error(status, "%s %d exceeds %d" % (name, value, bound))
        return value

    def read_slot_mapping(self, num_tokens: Optional[int] = None) -> np.ndarray:
        """The slot-mapping output's first num_tokens (default all) read
        back into a new numpy array (waits for the queue)."""
        buffer = lib.clbt_table_slot_mapping(self._live())
        count = self._count(num_tokens, "num_tokens", self.max_num_batched_tokens,
                            self.max_num_batched_tokens, TOO_MANY_TOKENS)
        return _opencl.read(self._queue, buffer, np.empty(count, np.int64))

    def read_device_rows(self, num_reqs: Optional[int] = None) -> np.ndarray:
        """The committed rows read back into a new numpy array (waits)."""
        return self._read_rows(lib.clbt_table_device_data(self._live()), num_reqs)

    @property
    def gathered_rows(self) -> Any:
        """The input block table a step with STEP_GATHER builds in batch
        order: a pyopencl.array.Array [max_num_reqs, width] int32 on the
        same memory, at an address fixed for the table's life, or a
        clbt.Buffer."""
        return _opencl.buffer_object(lib.clbt_table_gathered_rows(self._live()), self._queue,
                                     (self.max_num_reqs, self.width), np.int32)

    @property
    def state_slots(self) -> Any:
        """A NONE table's state slots (clbt_table_state_slots), which a
        step with STEP_STATE_SLOTS writes: a pyopencl.array.Array
        [max_num_reqs * width] int32 on the same memory, at an address fixed
        for the table's life, or a clbt.Buffer; None for a token-mapping
        table, which has none."""
        buffer = lib.clbt_table_state_slots(self._live())
        if not buffer:
            return None
        return _opencl.buffer_object(buffer, self._queue, (self.max_num_reqs * self.width,),
                                     np.int32)

    def read_state_slots(self, num_reqs_padded: int, num_state_slots: int = 1) -> np.ndarray:
        """The state slots of num_reqs_padded requests read back into a
        new numpy array [num_reqs_padded, num_state_slots] (waits)."""
        buffer = lib.clbt_table_state_slots(self._live())
        if not buffer:
            raise InvalidArgumentError(INVALID_ARGUMENT, "the table's slot_mode is "
                                       "TOKEN_TO_KV_SLOT: it has no state slots")
        count = self._count(num_reqs_padded, "num_reqs_padded", self.max_num_reqs,
                            self.max_num_reqs, TOO_MANY_REQUESTS)
        ids = self._count(num_state_slots, "num_state_slots", self.width, 1,
                          INVALID_ARGUMENT)
        return _opencl.read(self._queue, buffer, np.empty((count, ids), np.int32))

    def read_gathered_rows(self, num_reqs: Optional[int] = None) -> np.ndarray:
        """The gathered rows read back into a new numpy array (waits)."""
        return self._read_rows(lib.clbt_table_gathered_rows(self._live()), num_reqs)

    def _read_rows(self, buffer, num_reqs):
        count = self._count(num_reqs, "num_reqs", self.max_num_reqs, self.max_num_reqs,
                            TOO_MANY_REQUESTS)
        return _opencl.read(self._queue, buffer, np.empty((count, self.width), np.int32))

    def _export_buffers(self):
        buffers = ExportBuffers()
        _check(lib.clbt_table_export_buffers(self._live(), byref(buffers)))
        return buffers

    @property
    def export_buffers(self) -> Export:
        """Where export and step with STEP_EXPORT write: an Export of
        pyopencl.array.Array int32 views (or clbt.Buffers) of the table's
        regions, sized for its worst case, at fixed addresses. Raises
        clbt.Error for a SlotMode.NONE table, which has none."""
        buffers = self._export_buffers()
        n, pages = self.max_num_reqs, self.max_num_reqs * self.width
        sizes = dict(paged_kv_indptr=n + 1, paged_kv_indices=pages, paged_kv_last_page_len=n,
                     past_lens=n, subsequence_begins=n + 1, seq_lens=n, dcp_local_seq_lens=n,
                     max_seq_len=1, context_kv_indptr=n + 1, context_kv_indices=pages,
                     context_kv_last_page_len=n, page_table=pages)
        return Export(**{name: _opencl.buffer_object(getattr(buffers, name), self._queue,
                                                     (size,), np.int32)
                         for name, size in sizes.items()}, page_size=buffers.page_size)

    def read_export(self, num_reqs_padded: int, *, context: bool = False,
                    dense_row_pitch: Optional[int] = None) -> Export:
        """What an export of num_reqs_padded requests wrote, read back into
        numpy arrays (waits): an Export of indptr [n + 1], indices
        [indptr[n]], last_page_len [n], past_lens [n], subsequence_begins
        [n + 1], seq_lens [n], dcp_local_seq_lens [n] and max_seq_len [1],
        n = num_reqs_padded; with context, the context CSR likewise; with a
        dense_row_pitch (0: the width), page_table [n, pitch]. Ask only for
        the parts the export wrote; the others are None."""
        buffers = self._export_buffers()
        n = self._count(num_reqs_padded, "num_reqs_padded", self.max_num_reqs, 0,
                        TOO_MANY_REQUESTS)
        pitch = None
        if dense_row_pitch is not None:  # checked before anything is read
            pitch = check.u32(dense_row_pitch, "dense_row_pitch") or self.width
            if pitch * n > self.max_num_reqs * self.width:
                raise Error(INVALID_ARGUMENT, "dense_row_pitch %d x num_reqs_padded %d "
                            "entries exceed the page table's max_num_reqs %d x width %d" % (
                                pitch, n, self.max_num_reqs, self.width))
        read = dict(page_size=buffers.page_size)
        self._read_csr(buffers, n, "paged_kv_", read)
        if context:
            self._read_csr(buffers, n, "context_kv_", read)
        for name, size in (("past_lens", n), ("subsequence_begins", n + 1), ("seq_lens", n),
                           ("dcp_local_seq_lens", n), ("max_seq_len", 1)):
            read[name] = _opencl.read(self._queue, getattr(buffers, name),
                                      np.empty(size, np.int32))
        if pitch is not None:
            read["page_table"] = _opencl.read(self._queue, buffers.page_table,
                                              np.empty((n, pitch), np.int32))
        return Export(**read)

    def _read_csr(self, buffers, n, prefix, read):
        """One of the export's CSRs (paged_kv_ or context_kv_) into read."""
        indptr = _opencl.read(self._queue, getattr(buffers, prefix + "indptr"),
                              np.empty(n + 1, np.int32))
        pages = int(indptr[n])
        if not 0 <= pages <= self.max_num_reqs * self.width:
            raise Error(INVALID_ARGUMENT, "%sindptr[%d] is %d: no export of %d "
                        "requests was written" % (prefix, n, pages, n))
        read[prefix + "indptr"] = indptr
        for name, size in (("indices", pages), ("last_page_len", n)):
            read[prefix + name] = _opencl.read(self._queue, getattr(buffers, prefix + name),
                                               np.empty(size, np.int32))

    def compute_step_host(self, num_reqs: int, query_start_loc: HostArray, positions: HostArray,
                          *, idx_mapping: Optional[HostArray] = None, num_reqs_padded: int = 0,
                          flags: int = 0, gathered_rows: Optional[HostArray] = None
                          ) -> Tuple[Optional[np.ndarray], np.ndarray]:
        """A step computed on the host from the host rows
        (clbt_table_compute_step_host): clbt's reference of step's slot
        mapping and gather. gathered_rows is the gathered table before the
        step ([max_num_reqs, width]; None: zeros, as a new table's); it is
        not changed. Returns (slot_mapping int64[max_num_batched_tokens],
        None for a SlotMode.NONE table; the gathered table after the step,
        a new int32 [max_num_reqs, width] array, rewritten only with
        STEP_GATHER)."""
        handle = self._live()
        num_reqs = check.u32(num_reqs, "num_reqs")
        held, qsl, address, num_tokens, idx = _host_batch(num_reqs, query_start_loc, positions,
                                                          idx_mapping)
        shape = (self.max_num_reqs, self.width)
        gathered = np.zeros(shape, np.int32)
        if gathered_rows is not None:
            before = np.asarray(gathered_rows)
            if before.shape != shape:
                raise InvalidArgumentError(INVALID_ARGUMENT, "gathered_rows has shape %s; "
                                           "the table's is %s" % (before.shape, shape))
            gathered[:] = check.convert(before, np.int32, "gathered_rows")
        slots = None
        if self.slot_mode != SlotMode.NONE:
            slots = np.empty(self.max_num_batched_tokens, np.int64)
        step = check.struct(HostStep, flags=flags, num_reqs=num_reqs,
                            num_reqs_padded=num_reqs_padded, num_tokens=num_tokens,
                            query_start_loc=qsl, positions=address, idx_mapping=idx,
                            slot_mapping=None if slots is None else slots.ctypes.data,
                            gathered_rows=gathered.ctypes.data)
        _check(lib.clbt_table_compute_step_host(handle, byref(step)))
        return slots, gathered

    def compute_slot_mapping_host(self, num_reqs: int, query_start_loc: HostArray,
                                  positions: HostArray) -> Optional[np.ndarray]:
        """The same mapping computed on the host from the host rows: clbt's
        reference and CPU fallback. Returns int64[max_num_batched_tokens];
        None for a SlotMode.NONE table (as compute_step_host), whose batch
        is checked all the same."""
        handle = self._live()
        num_reqs = check.u32(num_reqs, "num_reqs")
        held, qsl, address, num_tokens, _ = _host_batch(num_reqs, query_start_loc, positions)
        out = np.empty(self.max_num_batched_tokens, np.int64)
        _check(lib.clbt_table_compute_slot_mapping_host(handle, num_reqs, qsl, address,
                                                        num_tokens, out.ctypes.data))
        # C leaves out unwritten for a table that maps no tokens: never
        # hand back np.empty's leftovers as slots.
        return None if self.slot_mode == SlotMode.NONE else out

    @property
    def rejected_tokens(self) -> int:
        """Tokens the kernel refused since creation or the last reset
        (waits for the queue)."""
        count = c_uint32()
        _check(lib.clbt_table_read_rejected_tokens(self._live(), byref(count)))
        return count.value

    def reset_rejected_tokens(self) -> None:
        _check(lib.clbt_table_reset_rejected_tokens(self._live()))

    @property
    def commit_mode(self) -> CommitMode:
        return self._commit_mode if hasattr(self, "_commit_mode") else CommitMode.AUTO

    @commit_mode.setter
    def commit_mode(self, mode: int) -> None:
        handle = self._live()
        _check(lib.clbt_table_set_commit_mode(handle, check.integer(mode, "mode", c_int)))
        self._commit_mode = CommitMode(mode)

    @property
    def last_commit(self) -> Tuple[CommitMode, int, int]:
        """(mode, rows, bytes) the last commit moved."""
        info = CommitInfo()
        _check(lib.clbt_table_last_commit(self._live(), byref(info)))
        return CommitMode(info.mode), info.rows, info.bytes


def _check_device(device):
    if not isinstance(device, Device):
        raise TypeMismatchError(INVALID_ARGUMENT, "device is %s; a clbt.Device "
                                "expected" % _opencl.describe(device))


class Group:
    """One KV-cache group of a MultiTable (clbt_group_config)."""

    def __init__(self, block_size: int, max_num_blocks: int, *, kernel_block_size: int = 0,
                 slot_mode: int = SlotMode.TOKEN_TO_KV_SLOT, cp_replicated: bool = False):
        self.block_size = block_size
        self.max_num_blocks = max_num_blocks
        self.kernel_block_size = kernel_block_size
        self.slot_mode = SlotMode(slot_mode)
        self.cp_replicated = cp_replicated

    def _config(self, g):
        fields = dict(block_size=self.block_size, kernel_block_size=self.kernel_block_size,
                      max_num_blocks=self.max_num_blocks, slot_mode=int(self.slot_mode),
                      cp_replicated=bool(self.cp_replicated))
        try:
            return check.struct(GroupConfig, **fields)
        except Error as error:
            raise type(error)(error.code, "groups[%d]: %s" % (g, error.message)) from None

    def __repr__(self):
        return "clbt.Group(%d, %d, kernel_block_size=%d, slot_mode=%s, cp_replicated=%r)" % (
            self.block_size, self.max_num_blocks, self.kernel_block_size, self.slot_mode.name,
            self.cp_replicated)


@_serialised
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
    _prefix = "clbt_multi_table_"

    def __init__(self, device: Device, *, groups: Iterable[Group], max_num_reqs: int,
                 max_num_batched_tokens: int, cp_world_size: int = 0, cp_rank: int = 0,
                 cp_interleave_size: int = 0, commit_mode: int = CommitMode.AUTO,
                 zero_gathered_tails: bool = False, exact_widths: bool = False):
        groups = list(groups)
        for g, group in enumerate(groups):
            if not isinstance(group, Group):
                raise TypeMismatchError(INVALID_ARGUMENT, "groups[%d] is %s; a "
                                        "clbt.Group expected" % (g, _opencl.describe(group)))
        configs = (GroupConfig * len(groups))(*[group._config(g) for g, group in
                                                enumerate(groups)])
        config = check.struct(
            MultiTableConfig, max_num_reqs=max_num_reqs,
            max_num_batched_tokens=max_num_batched_tokens, cp_world_size=cp_world_size,
            cp_rank=cp_rank, cp_interleave_size=cp_interleave_size, num_groups=len(groups),
            groups=configs, commit_mode=commit_mode,
            zero_gathered_tails=bool(zero_gathered_tails), exact_widths=bool(exact_widths))
        _check_device(device)
        out = c_void_p()
        held = device._object()  # until the C table has its own reference
        _check(lib.clbt_multi_table_create(held.pointer, byref(config), byref(out)))
        super().__init__(device, _CObject(out.value, lib.clbt_multi_table_destroy),
                         config.max_num_reqs, config.max_num_batched_tokens)
        self.groups = [Table._group(self, lib.clbt_multi_table_group(out.value, g), group)
                       for g, group in enumerate(groups)]
        self._counts = array.array(SIZE, [0]) * len(groups)  # _update_row's
        self._counts_at = self._counts.buffer_info()[0]
        for table in self.groups:
            table._commit_mode = CommitMode(commit_mode)

    def close(self) -> None:
        for table in getattr(self, "groups", ()):
            table.close()
        _Rows.close(self)

    def _token_sections(self):
        """token_slots' output sections: one a token-mapping group."""
        return sum(table._token_sections() for table in self.groups)

    def __repr__(self):
        if self.closed:
            return "<clbt.MultiTable closed>"
        return "clbt.MultiTable(groups=[%s], max_num_reqs=%d, max_num_batched_tokens=%d)" % (
            ", ".join("%d x %d" % (table.kv_block_size, table.width) for table in self.groups),
            self.max_num_reqs, self.max_num_batched_tokens)

    def __len__(self) -> int:
        return len(self.groups)

    def __getitem__(self, group: int) -> Table:
        return self.groups[group]

    def __iter__(self):
        return iter(self.groups)

    def append_row(self, row: int, block_ids: Sequence[HostArray]) -> None:
        """Appends block_ids[g] to the row of each group g."""
        self._update_row(row, block_ids, ROW_APPEND)

    def add_row(self, row: int, block_ids: Sequence[HostArray]) -> None:
        """Replaces the row of each group g with block_ids[g]."""
        self._update_row(row, block_ids, ROW_REPLACE)

    def _update_row(self, row, block_ids, how):
        """append_row or add_row in one C call (clbt_multi_table_update_row),
        without the table's lock: for those two, which hold it, and for the
        vLLM facade's row updates, which hold the facade's. Returns the
        ids it gave C, every group's end to end: the copy of the update."""
        # The decode step's hot path: _live, u32 and _check inlined, and
        # the counts written into the table's own array (_counts), which
        # one update at a time uses: its caller holds a lock.
        c = self._c
        if c is None or not c.open:
            self._live()  # raises: the table is closed
        ids = check.group_ids(block_ids, self._counts)
        if type(row) is not int or not 0 <= row <= 0xFFFFFFFF:
            row = check.u32(row, "row")
        status = lib.clbt_multi_table_update_row(c.pointer, row, self._counts_at,
                                                 ids.buffer_info()[0], how)
        if status:
            _check(status)
        return ids

    def _per_group(self, values, name):
        if type(values) is tuple:
            values = list(values)
        elif type(values) is not list:
            values = check.sequence(values, name)
        if len(values) != len(self.groups):
            raise InvalidArgumentError(INVALID_ARGUMENT, "%s has %d entries; the table "
                                       "has %d groups" % (name, len(values), len(self.groups)))
        return values

    def truncate_row(self, row: int, num_blocks: Sequence[int]) -> None:
        """Keeps the first num_blocks[g] KV-manager blocks of the row of each
        group g, all or nothing."""
        handle = self._live()
        counts = array.array(SIZE, [check.size(n, "num_blocks[%d]" % g) for g, n in
                                    enumerate(self._per_group(num_blocks, "num_blocks"))])
        _check(lib.clbt_multi_table_truncate_row(handle, check.u32(row, "row"),
                                                 counts.buffer_info()[0]))

    def append_rows(self, rows: HostArray, counts: Sequence[HostArray],
                    block_ids: Sequence[HostArray]) -> None:
        """Table.append_rows for every group in one call: counts[g] and
        block_ids[g] are group g's, the rows are shared."""
        self._rows(lib.clbt_multi_table_append_rows, rows, counts, block_ids)

    def add_rows(self, rows: HostArray, counts: Sequence[HostArray],
                 block_ids: Sequence[HostArray]) -> None:
        """Table.add_rows for every group in one call."""
        self._rows(lib.clbt_multi_table_add_rows, rows, counts, block_ids)

    def compute_step_host(self, num_reqs: int, query_start_loc: HostArray, positions: HostArray,
                          *, idx_mapping: Optional[HostArray] = None, num_reqs_padded: int = 0,
                          flags: int = 0, gathered_rows: Optional[Iterable] = None
                          ) -> Tuple[list, list]:
        """Table.compute_step_host for every group in one call
        (clbt_multi_table_compute_step_host): gathered_rows is None or one
        gathered table (or None) per group, not changed. Returns (one slot
        mapping per group, None for a SlotMode.NONE group; one gathered
        table per group, new arrays)."""
        handle = self._live()
        num_reqs = check.u32(num_reqs, "num_reqs")
        held, qsl, address, num_tokens, idx = _host_batch(num_reqs, query_start_loc, positions,
                                                          idx_mapping)
        before = [None] * len(self.groups) if gathered_rows is None else \
            check.sequence(gathered_rows, "gathered_rows")
        if len(before) != len(self.groups):
            raise InvalidArgumentError(INVALID_ARGUMENT, "gathered_rows has %d groups; "
                                       "the table has %d" % (len(before), len(self.groups)))
        slots, gathered = [], []
        for g, (table, rows) in enumerate(zip(self.groups, before)):
            shape = (self.max_num_reqs, table.width)
            out = np.zeros(shape, np.int32)
            if rows is not None:
                rows = np.asarray(rows)
                if rows.shape != shape:
                    raise InvalidArgumentError(INVALID_ARGUMENT, "gathered_rows[%d] has "
                                               "shape %s; the group's is %s" % (g, rows.shape,
                                                                                 shape))
                out[:] = check.convert(rows, np.int32, "gathered_rows[%d]" % g)
            gathered.append(out)
            slots.append(None if table.slot_mode == SlotMode.NONE else
                         np.empty(self.max_num_batched_tokens, np.int64))
        slot_addresses = array.array("Q", [0 if a is None else a.ctypes.data for a in slots])
        gathered_addresses = array.array("Q", [a.ctypes.data for a in gathered])
        step = check.struct(MultiHostStep, flags=flags, num_reqs=num_reqs,
                            num_reqs_padded=num_reqs_padded, num_tokens=num_tokens,
                            query_start_loc=qsl, positions=address, idx_mapping=idx,
                            slot_mappings=slot_addresses.buffer_info()[0],
                            gathered_rows=gathered_addresses.buffer_info()[0])
        _check(lib.clbt_multi_table_compute_step_host(handle, byref(step)))
        return slots, gathered

    def _rows(self, function, rows, counts, block_ids):
        handle = self._live()
        rows_held, rows_address, num_rows = check.host_array(rows, UINT32, "rows")
        count_arrays = [check.host_array(c, UINT32, "counts[%d]" % g)
                        for g, c in enumerate(self._per_group(counts, "counts"))]
        id_arrays = [check.host_array(i, INT32, "block_ids[%d]" % g)
                     for g, i in enumerate(self._per_group(block_ids, "block_ids"))]
        for g, (held, _, count) in enumerate(count_arrays):
            if count != num_rows:
                raise InvalidArgumentError(INVALID_ARGUMENT, "counts[%d] holds %d "
                                           "entries; rows %d" % (g, count, num_rows))
            check.at_least("block_ids[%d]" % g, id_arrays[g][2], _total(held),
                           "sum(counts[%d])" % g)
        count_addresses = array.array(SIZE, [a[1] for a in count_arrays])
        id_addresses = array.array(SIZE, [a[1] for a in id_arrays])
        _check(function(handle, num_rows, rows_address, count_addresses.buffer_info()[0],
                        id_addresses.buffer_info()[0]))
