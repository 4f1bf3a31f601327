"""Model Runner V2's BlockTables (vllm/v1/worker/gpu/block_table.py) on
clbt: rows that are persistent request slots, read through idx_mapping.
clbt.vllm is the public module; _facade.py has what this shares with the
v1 classes.
"""
import array
from itertools import accumulate

import numpy as np

from . import _arguments as check
from . import _core
from ._kv_cache import tensor_view
from ._core import PAD_SLOT_ID
from ._device_array import DeviceArray, StackedDeviceArray, copy_buffer, fill_buffer
from ._errors import (INVALID_ARGUMENT as _INVALID_ARGUMENT,
                      INVALID_CONFIG as _INVALID_CONFIG, ROW_OUT_OF_RANGE as _ROW_OUT_OF_RANGE,
                      ROW_OVERFLOW as _ROW_OVERFLOW, Error, wrong_type as _wrong_type)
from ._facade import (_INT32, _INT64, RowCapacityError, SlotMappingMode, _batch_inputs,
                      _Closes, _Engine, _fixed, _listed, _owed_rows, _per_group, _serialised,
                      _slot_mode, _token_count)
from ._threads import one_thread_at_a_time
from ._library import ROW_APPEND, ROW_REPLACE, STEP_DUMMY, STEP_GATHER


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
    handle, at, shape, strides, kind = tensor_view(target, name, 2)
    pitch = strides[0] if shape[0] > 1 else shape[1]
    if kind != dtype or shape[0] < rows or shape[1] < least or pitch < shape[1] or (
            packed and not shape[1] == pitch == least):
        raise Error(_INVALID_ARGUMENT, "%s is %s %s with strides %s; at least %d rows of %s%d %s "
                    "elements expected" % (name, kind, shape, strides, rows,
                                           "" if packed else "at least ", least,
                                           "contiguous " + dtype.name if packed else dtype.name))
    return handle, at * dtype.itemsize, pitch * dtype.itemsize, shape[1]
