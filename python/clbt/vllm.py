"""vLLM's block tables on clbt: ``BlockTable``, ``MultiGroupBlockTable``,
``get_block_table_width``, ``SlotMappingMode`` and ``PAD_SLOT_ID`` with the
constructor arguments, methods and attributes of
vllm/v1/worker/block_table.py, so that code written against those classes
runs on any OpenCL device by changing an import::

    from clbt.vllm import MultiGroupBlockTable

Where clbt departs from vLLM on purpose, the docstring of the method says
so; docs/python.md lists every departure. In short:

- ``device`` is a clbt.Device or a CLBT_DEVICE selector; anything else (a
  torch.device) means the default device (CLBT_DEVICE, else the first GPU),
  opened once and shared. ``pin_memory`` is accepted and ignored.
- Context parallelism comes from the keywords ``dcp_world_size`` and
  ``dcp_rank`` (vLLM reads them from its distributed groups).
- Errors are clbt.Error (vLLM raises ValueError or IndexError, or writes
  out of bounds).
- The host rows (``get_numpy_array``, ``get_cpu_tensor``, ``block_table.np``,
  ``num_blocks_per_row``) are read-only views: rows change through the row
  operations, which record what the next commit moves.
- Batch updates, an extension: ``append_rows`` and ``add_rows`` change many
  rows in one call.

``BlockTables`` is Model Runner V2's class (vllm/v1/worker/gpu/
block_table.py): rows are persistent request slots, and each step reads
them through ``idx_mapping``; its methods are thin calls of clbt's step.
"""
import enum
from ctypes import byref, c_uint32

import numpy as np

from . import _arguments, _core, _opencl
from ._core import PAD_SLOT_ID, Error
from ._library import STEP_GATHER, lib

__all__ = ["BlockTable", "BlockTables", "MultiGroupBlockTable", "PAD_SLOT_ID",
           "SlotMappingMode", "get_block_table_width"]

_INVALID_ARGUMENT = -4002


def get_block_table_width(max_num_blocks, block_size, kernel_block_size=None, *,
                          token_alignment=128):
    """The row width after optional alignment (token_alignment tokens; None:
    none) and kernel-block splitting. Raises clbt.Error where vLLM raises
    ValueError."""
    if token_alignment is not None and token_alignment <= 0:
        raise Error(_INVALID_ARGUMENT, "token_alignment must be positive")
    width = c_uint32()
    u32 = _arguments.u32
    _core._check(lib.clbt_block_table_width(
        u32(max_num_blocks, "max_num_blocks"), u32(block_size, "block_size"),
        u32(kernel_block_size or 0, "kernel_block_size"),
        u32(token_alignment or 0, "token_alignment"), byref(width)))
    return width.value


class SlotMappingMode(enum.Enum):
    TOKEN_TO_KV_SLOT = "token_to_kv_slot"
    NONE = "none"


_SLOT_MODES = {SlotMappingMode.TOKEN_TO_KV_SLOT: _core.SlotMode.TOKEN_TO_KV_SLOT,
               SlotMappingMode.NONE: _core.SlotMode.NONE}
_default_device = None


def _device(device):
    global _default_device
    if isinstance(device, _core.Device):
        return device
    if isinstance(device, str):
        return _core.Device(device)
    if _default_device is None:
        _default_device = _core.Device()
    return _default_device


def _torch_view(array):
    """A torch CPU tensor on the same memory when torch is installed, else
    the numpy array. Read-only: torch would warn on every call."""
    try:
        import torch
    except ImportError:
        return array
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(array)


class _CpuGpuBuffer:
    """vLLM's CpuGpuBuffer as its callers read it: ``.gpu`` on the device (a
    pyopencl.array.Array, or a clbt.Buffer without PyOpenCL), ``.np``
    and ``.cpu`` on the host, read-only. Departure: a slot mapping has no
    host copy, so its ``.np`` reads the device buffer back (and waits)."""

    def __init__(self, gpu, host):
        self._gpu, self._host = gpu, host

    @property
    def gpu(self):
        return self._gpu()

    @property
    def np(self):
        return self._host()

    @property
    def cpu(self):
        return _torch_view(self._host())


class _RowOperations:
    """The methods BlockTable and MultiGroupBlockTable share; on a
    MultiGroupBlockTable they act on every group, all or nothing, and the
    block ids of append_row and add_row are one list per group."""

    def append_row(self, block_ids, row_idx):
        self._table.append_row(row_idx, block_ids)

    def add_row(self, block_ids, row_idx):
        self._table.add_row(row_idx, block_ids)

    def append_rows(self, rows, counts, block_ids):
        """Extension: many append_row calls in one. Entry i appends
        counts[i] ids to rows[i], its ids right after entry i-1's in
        block_ids; on a MultiGroupBlockTable counts[g] and block_ids[g] are
        group g's. All or nothing."""
        self._table.append_rows(rows, counts, block_ids)

    def add_rows(self, rows, counts, block_ids):
        """Extension: many add_row calls in one, laid out as append_rows."""
        self._table.add_rows(rows, counts, block_ids)

    def clear_row(self, row_idx):
        self._table.clear_row(row_idx)

    def move_row(self, src, tgt):
        """Moves row src to tgt and clears src. Departure: move_row(r, r)
        keeps the row (vLLM erases it)."""
        self._table.move_row(src, tgt)

    def swap_row(self, src, tgt):
        self._table.swap_row(src, tgt)

    def commit_block_table(self, num_reqs):
        """Copies rows [0, num_reqs) to the device, only what changed."""
        self._table.commit(num_reqs)

    def compute_slot_mapping(self, num_reqs, query_start_loc, positions, *, num_tokens=None):
        """Enqueues the slot mapping into ``slot_mapping.gpu`` (every group's
        in one launch on a MultiGroupBlockTable). query_start_loc and
        positions are host arrays (numpy, torch CPU tensors; uploaded into
        buffers the table keeps) or device buffers (pyopencl Array; or, an
        extension, buffers (clbt.Buffer) with num_tokens given).
        Departure: every element of the output is written, and a token past
        its row's committed blocks, at a negative position or of a malformed
        batch gets -1 (vLLM reads whatever the row holds)."""
        self._table.compute_slot_mapping(num_reqs, query_start_loc, positions, num_tokens)

    def clear(self):
        """Zeroes every row on the host and the device. Departure: the row
        lengths are reset too (vLLM keeps them, so a later append would
        start after a run of block 0)."""
        self._table.clear()

    def close(self):
        """Extension: frees the table now (a group's table goes with its
        MultiGroupBlockTable); later calls raise clbt.Error."""
        self._table.close()


class BlockTable(_RowOperations):
    """vLLM's BlockTable on a clbt table (one KV-cache group). Departures
    are in the docstrings of move_row, compute_slot_mapping, clear and the
    host views (docs/python.md lists them all)."""

    def __init__(self, block_size, max_num_reqs, max_num_blocks_per_req, max_num_batched_tokens,
                 pin_memory, device, kernel_block_size, cp_kv_cache_interleave_size,
                 slot_mapping_mode=SlotMappingMode.TOKEN_TO_KV_SLOT, *, dcp_world_size=1,
                 dcp_rank=0):
        table = _core.Table(_device(device), block_size=block_size,
                            kernel_block_size=kernel_block_size, max_num_reqs=max_num_reqs,
                            max_num_blocks_per_req=max_num_blocks_per_req,
                            max_num_batched_tokens=max_num_batched_tokens,
                            cp_world_size=dcp_world_size, cp_rank=dcp_rank,
                            cp_interleave_size=cp_kv_cache_interleave_size,
                            slot_mode=_SLOT_MODES[slot_mapping_mode])
        self._attach(table, pin_memory, device, slot_mapping_mode, cp_kv_cache_interleave_size,
                     dcp_world_size, dcp_rank)

    @classmethod
    def _of(cls, table, *settings):
        """A group of a MultiGroupBlockTable."""
        block_table = cls.__new__(cls)
        block_table._attach(table, *settings)
        return block_table

    def _attach(self, table, pin_memory, device, slot_mapping_mode, interleave, dcp_world_size,
                dcp_rank):
        self._table = table
        self.max_num_reqs = table.max_num_reqs
        self.max_num_batched_tokens = table.max_num_batched_tokens
        self.pin_memory = pin_memory
        self.device = device
        self.kv_cache_block_size = table.kv_block_size
        self.block_size = table.block_size
        self.blocks_per_kv_block = table.kv_block_size // table.block_size
        self.use_hybrid_blocks = self.blocks_per_kv_block != 1
        self.max_num_blocks_per_req = table.width
        self.slot_mapping_mode = slot_mapping_mode
        self.cp_kv_cache_interleave_size = interleave
        self.dcp_world_size, self.dcp_rank = dcp_world_size, dcp_rank
        self.block_table = _CpuGpuBuffer(lambda: table.device_rows, lambda: table.host_rows)
        self.slot_mapping = _CpuGpuBuffer(lambda: table.slot_mapping, table.read_slot_mapping)

    @property
    def num_blocks_per_row(self):
        """Each row's length in kernel blocks: a read-only uint32 view
        (vLLM's is a writable int32 array)."""
        return self._table.row_lengths

    @staticmethod
    def map_to_kernel_blocks(kv_manager_block_ids, blocks_per_kv_block, kernel_block_arange):
        """KV-manager block b as kernel blocks b*k .. b*k+k-1 (what
        append_row does itself; kept for callers)."""
        if blocks_per_kv_block == 1:
            return kv_manager_block_ids
        blocks = np.asarray(kv_manager_block_ids).reshape(-1, 1) * blocks_per_kv_block
        return (blocks + kernel_block_arange).reshape(-1)

    def get_device_tensor(self, num_reqs):
        """Rows [0, num_reqs) on the device: a pyopencl.array.Array view, or,
        without PyOpenCL, a clbt.Buffer of the whole rows buffer."""
        rows = self._table.device_rows
        return rows if _opencl.pyopencl is None else rows[:num_reqs]

    def get_cpu_tensor(self):
        """The host rows as a read-only torch tensor (numpy without torch)."""
        return _torch_view(self._table.host_rows)

    def get_numpy_array(self):
        """The host rows: a read-only numpy view."""
        return self._table.host_rows


class MultiGroupBlockTable(_RowOperations):
    """vLLM's MultiGroupBlockTable on a clbt multi-group table: row
    operations change every group or none, and compute_slot_mapping maps
    every group in one launch. Departures as BlockTable's."""

    def __init__(self, max_num_reqs, max_num_batched_tokens, pin_memory, device, block_sizes,
                 kernel_block_sizes, max_num_blocks, cp_kv_cache_interleave_size=1,
                 slot_mapping_modes=None, *, dcp_world_size=1, dcp_rank=0):
        if slot_mapping_modes is None:
            slot_mapping_modes = [SlotMappingMode.TOKEN_TO_KV_SLOT] * len(block_sizes)
        for name, values in (("kernel_block_sizes", kernel_block_sizes),
                             ("slot_mapping_modes", slot_mapping_modes),
                             ("max_num_blocks", max_num_blocks)):
            if len(values) != len(block_sizes):
                raise Error(_INVALID_ARGUMENT, "%s length (%d) must match block_sizes length "
                            "(%d)" % (name, len(values), len(block_sizes)))
        groups = [_core.Group(b, n, kernel_block_size=k, slot_mode=_SLOT_MODES[m])
                  for b, k, n, m in zip(block_sizes, kernel_block_sizes, max_num_blocks,
                                        slot_mapping_modes)]
        self._table = _core.MultiTable(_device(device), groups=groups, max_num_reqs=max_num_reqs,
                                       max_num_batched_tokens=max_num_batched_tokens,
                                       cp_world_size=dcp_world_size, cp_rank=dcp_rank,
                                       cp_interleave_size=cp_kv_cache_interleave_size)
        self.block_tables = [
            BlockTable._of(group, pin_memory, device, mode, cp_kv_cache_interleave_size,
                           dcp_world_size, dcp_rank)
            for group, mode in zip(self._table.groups, slot_mapping_modes)]

    def __getitem__(self, idx):
        """The BlockTable of the idx-th KV-cache group."""
        return self.block_tables[idx]


def _length(array, given, name):
    """The entries of a batch array: given, else its length (a buffer has
    none)."""
    if given is not None:
        return given
    if not hasattr(array, "__len__"):
        raise Error(_INVALID_ARGUMENT, "%s is needed with a buffer" % name)
    return len(array)


def _first(view, count):
    """A device view's first count rows (a clbt.Buffer stays whole)."""
    return view if _opencl.pyopencl is None else view[:count]


class BlockTables:
    """Model Runner V2's BlockTables on a clbt multi-group table: each
    request keeps one row (its request slot, req_index) from arrival to
    end, and each step reads the rows through idx_mapping (batch index ->
    slot; negative: a padding request). What maps to what:

    - append_block_ids(req_index, ids, overwrite): add_row (overwrite) or
      append_row of every group, all or nothing;
    - apply_staged_writes(): commit of every row (what clbt's step also
      does first, so calling it is optional);
    - gather_block_tables(idx_mapping, num_reqs_padded): a step with
      STEP_GATHER and no tokens; input_block_tables are the groups'
      gathered_rows, fixed addresses;
    - compute_slot_mappings(idx_mapping, query_start_loc, positions): a
      step without gather; slot_mappings are the groups' slot_mapping;
    - step(...), an extension: both in one launch.

    Departures: widths are clbt's (cdiv(max_model_len, block_size) KV
    blocks aligned to 128 tokens, times block_size / kernel_block_size);
    slot_mappings and the returned block tables are one array per group
    (vLLM: one [G, max_num_batched_tokens] tensor for the slots);
    gather_block_tables also sets every slot to -1; an idx_mapping entry
    at or above max_num_reqs gives -1 slots and a zero row, counted, where
    vLLM reads out of bounds; zero_gathered_tails=True zeroes the stale
    entries vLLM leaves past a row's length. Arrays as for BlockTable:
    host arrays or PyOpenCL arrays; with buffers, pass num_reqs= and
    num_tokens=."""

    def __init__(self, block_sizes, max_num_reqs, max_num_batched_tokens, max_model_len, device,
                 cp_kv_cache_interleave_size=1, *, kernel_block_sizes=None, dcp_world_size=1,
                 dcp_rank=0, zero_gathered_tails=False):
        kernel_block_sizes = kernel_block_sizes or block_sizes
        if len(kernel_block_sizes) != len(block_sizes):
            raise Error(_INVALID_ARGUMENT, "kernel_block_sizes length (%d) must match "
                        "block_sizes length (%d)" % (len(kernel_block_sizes), len(block_sizes)))
        groups = [_core.Group(b, -(-max_model_len // b), kernel_block_size=k)
                  for b, k in zip(block_sizes, kernel_block_sizes)]
        self._table = _core.MultiTable(_device(device), groups=groups, max_num_reqs=max_num_reqs,
                                       max_num_batched_tokens=max_num_batched_tokens,
                                       cp_world_size=dcp_world_size, cp_rank=dcp_rank,
                                       cp_interleave_size=cp_kv_cache_interleave_size,
                                       zero_gathered_tails=zero_gathered_tails)
        self.block_sizes = list(block_sizes)
        self.max_num_reqs = max_num_reqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.device = device
        self.num_kv_cache_groups = len(block_sizes)
        self._no_tokens = np.zeros(max_num_reqs + 1, np.int32)  # a batch of empty requests

    @property
    def input_block_tables(self):
        """Each group's gathered table [max_num_reqs, width] int32 (PyOpenCL
        arrays, or clbt.Buffers), at addresses fixed for the table's life."""
        return [group.gathered_rows for group in self._table]

    @property
    def slot_mappings(self):
        """Each group's slot mapping [max_num_batched_tokens] int64."""
        return [group.slot_mapping for group in self._table]

    @property
    def num_blocks(self):
        """[G][max_num_reqs] row lengths in kernel blocks, read-only host
        views (vLLM's num_blocks.np)."""
        return [group.row_lengths for group in self._table]

    def append_block_ids(self, req_index, new_block_ids, overwrite):
        """Appends new_block_ids[g] to slot req_index of every group g, or
        with overwrite replaces the slot's blocks (columns past the new
        length keep their old ids, as in vLLM)."""
        (self._table.add_row if overwrite else self._table.append_row)(req_index, new_block_ids)

    def apply_staged_writes(self):
        """Commits every slot's changes (only what changed moves)."""
        self._table.commit(self.max_num_reqs)

    def gather_block_tables(self, idx_mapping, num_reqs_padded, *, num_reqs=None):
        """Builds each group's input block table in batch order: row b <
        num_reqs is slot idx_mapping[b]'s committed entries, rows up to
        num_reqs_padded are 0; returns each group's first num_reqs_padded
        rows."""
        num_reqs = _length(idx_mapping, num_reqs, "num_reqs")
        self._table.step(num_reqs, self._no_tokens[:num_reqs + 1], None,
                         idx_mapping=idx_mapping, num_reqs_padded=num_reqs_padded,
                         flags=STEP_GATHER)
        return tuple(_first(rows, num_reqs_padded or num_reqs)
                     for rows in self.input_block_tables)

    def compute_slot_mappings(self, idx_mapping, query_start_loc, positions, *, num_reqs=None,
                              num_tokens=None):
        """Every group's slot mapping, request r's tokens through slot
        idx_mapping[r], in one launch; returns each group's first
        num_tokens slots."""
        return self.step(idx_mapping, query_start_loc, positions, gather=False,
                         num_reqs=num_reqs, num_tokens=num_tokens)[1]

    def step(self, idx_mapping, query_start_loc, positions, num_reqs_padded=0, *, gather=True,
             num_reqs=None, num_tokens=None):
        """Extension: the commit, every group's slot mapping and (gather)
        the gather in one call and one launch. Returns (block tables, or
        None without gather; slot mappings) as the two methods do."""
        num_reqs = _length(idx_mapping, num_reqs, "num_reqs")
        num_tokens = _length(positions, num_tokens, "num_tokens")
        self._table.step(num_reqs, query_start_loc, positions, num_tokens,
                         idx_mapping=idx_mapping, num_reqs_padded=num_reqs_padded,
                         flags=STEP_GATHER if gather else 0)
        tables = tuple(_first(rows, num_reqs_padded or num_reqs)
                       for rows in self.input_block_tables) if gather else None
        return tables, tuple(_first(slots, num_tokens) for slots in self.slot_mappings)

    def close(self):
        """Extension: frees the tables now."""
        self._table.close()
