"""vLLM's block tables on clbt, as vLLM's own code and tests use them.

``BlockTable``, ``MultiGroupBlockTable``, ``get_block_table_width``,
``SlotMappingMode`` and ``PAD_SLOT_ID`` are vllm/v1/worker/block_table.py's;
``BlockTables`` is Model Runner V2's (vllm/v1/worker/gpu/block_table.py),
where rows are persistent request slots read through ``idx_mapping``. Code
written against those classes runs on any OpenCL device by changing an
import::

    from clbt.vllm import MultiGroupBlockTable

``reshape_and_cache_flash`` (vLLM's cache write) and ``unified_attention``
(its Triton backend's paged attention, with ``KVQuantMode``) run on
clbt.KVCache and clbt.Attention.

The tables' device tensors (``.gpu``, ``input_block_tables``, ``slot_mappings``,
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
import inspect

import numpy as np

from . import _arguments as check
from . import _core
from ._cache_ops import reshape_and_cache_flash
from ._core import PAD_SLOT_ID
from ._errors import (INVALID_ARGUMENT as _INVALID_ARGUMENT, INVALID_CONFIG as _INVALID_CONFIG,
                      Error, wrong_type as _wrong_type)
from ._facade import (RowCapacityError, SlotMappingMode, _batch_inputs, _Closes, _Engine,
                      _fixed, _listed, _owed_rows, _per_group, _serialised, _slot_mode,
                      _token_count)
from ._library import ROW_APPEND, ROW_REPLACE
from ._mrv2 import BlockTables
from ._opencl import describe
from ._unified_attention import KVQuantMode, unified_attention

__all__ = ["BlockTable", "BlockTables", "KVQuantMode", "MultiGroupBlockTable", "PAD_SLOT_ID",
           "RowCapacityError", "SlotMappingMode", "get_block_table_width",
           "reshape_and_cache_flash", "unified_attention"]
for _public in (BlockTables, KVQuantMode, RowCapacityError, SlotMappingMode,
                reshape_and_cache_flash, unified_attention):
    _public.__module__ = __name__  # shown as clbt.vllm's, where callers find them


def __dir__():
    """What dir() and completion list: the public names and the module's
    own dunders, not the imports and helpers the module runs on (lib, np,
    Step, ...), which are no part of its interface (PEP 562)."""
    return sorted(__all__ + [name for name in globals() if name.startswith("__")])


def get_block_table_width(max_num_blocks, block_size, kernel_block_size=None, *,
                          token_alignment=128):
    """The row width after optional alignment (token_alignment tokens; None:
    none) and kernel-block splitting."""
    if token_alignment is not None and token_alignment <= 0:
        raise Error(_INVALID_ARGUMENT, "token_alignment must be positive")
    return _core.block_table_width(max_num_blocks, block_size, kernel_block_size or 0,
                                   token_alignment or 0)


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
    max_model_len = check.u32(arguments["max_model_len"], "max_model_len")
    world = check.u32(arguments["dcp_world_size"], "dcp_world_size")
    speculative = arguments["num_speculative_tokens"]
    max_num_blocks = arguments["max_num_blocks"]
    if max_num_blocks is not None and not _is_list(max_num_blocks):
        if speculative is not None:  # a4cd9d0's eighth argument, given twice
            raise _wrong_type("max_num_blocks is %s; a list of one entry per group expected"
                              % describe(max_num_blocks))
        speculative, max_num_blocks = max_num_blocks, None
    for g, b in enumerate(block_sizes):  # before anything divides by one
        if check.u32(b, "block_sizes[%d]" % g) < 1:
            raise Error(_INVALID_CONFIG, "block_sizes[%d] is 0; it must be >= 1" % g)
    if world < 1:
        raise Error(_INVALID_CONFIG, "dcp_world_size is 0; it must be >= 1 (max_model_len "
                    "gives cdiv(max_model_len, block_size x dcp_world_size) blocks)")
    if speculative is not None:
        if max_num_blocks is not None:
            raise _wrong_type("give max_num_blocks (vLLM 01edfd0's) or num_speculative_tokens "
                              "(a4cd9d0's), not both")
        least = 1 + check.u32(speculative, "num_speculative_tokens")
        return [max(_cdiv(max_model_len, b * world), least) for b in block_sizes]
    if max_num_blocks is None:
        max_num_blocks = [_cdiv(max_model_len, b * world) for b in block_sizes]
    max_num_blocks = _per_group(max_num_blocks, len(block_sizes), "max_num_blocks")
    return [_cdiv(check.u32(n, "max_num_blocks[%d]" % g), 128 // b) * (128 // b) if b <= 128
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
