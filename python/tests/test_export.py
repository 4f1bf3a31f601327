"""The export's parts of issue 21 through the bindings: the CSR with
last_page_len 0 for a request with no page, the context-only CSR
(context=True), the lengths (seq_lens, dcp_local_seq_lens, max_seq_len),
subsequence_begins giving padding no tokens, and the dense page table at a
pitch of the caller's (dense_row_pitch), by Table.step(..., STEP_EXPORT)
and Table.export, on single and multi-group tables, with and without
decode context parallelism.

Expected values come from a hand-worked example and from the independent
model (model.py's export_all, written from docs/semantics.md's Export
rules: FlashInfer's CSR and get_seq_lens, OpenVINO's PagedAttention
arrays, FA3's page_table + seqused_k), never from clbt. Every export region
is poisoned before each call; what the rules say is not written (past the
written entries, and the context CSR or the page table when not asked for)
must still hold the poison."""
import numpy as np
import pytest
from model import TableModel

import clbt
from clbt import _opencl

POISON = -7777
CONTEXT = ("context_kv_indptr", "context_kv_indices", "context_kv_last_page_len")


def regions(table):
    """Every export region and its entries, as clbt.h's clbt_export_buffers
    sizes them."""
    n, pages = table.max_num_reqs, table.max_num_reqs * table.width
    return dict(paged_kv_indptr=n + 1, paged_kv_indices=pages, paged_kv_last_page_len=n,
                past_lens=n, subsequence_begins=n + 1, seq_lens=n, dcp_local_seq_lens=n,
                max_seq_len=1, context_kv_indptr=n + 1, context_kv_indices=pages,
                context_kv_last_page_len=n, page_table=pages)


def poison_export(table):
    buffers = table._export_buffers()
    for name, size in regions(table).items():
        values = np.full(size, POISON, np.int32)
        _opencl.write(table._queue, getattr(buffers, name), values.ctypes.data,
                      values.nbytes).wait()


def read_regions(table):
    buffers = table._export_buffers()
    return {name: _opencl.read(table._queue, getattr(buffers, name), np.empty(size, np.int32))
            for name, size in regions(table).items()}


def flat(values):
    return [v for row in values for v in row] if values and isinstance(values[0], list) \
        else list(values)


def check_export(table, expected, padded, context, pitch):
    """read_export equals the expected arrays, and every region holds them
    followed by the poison (only the poison for a part not asked for)."""
    def asked(name):
        return not (name in CONTEXT and not context or name == "page_table" and pitch is None)

    got = table.read_export(padded, context=context, dense_row_pitch=pitch)
    assert got.page_size == table.block_size
    whole = read_regions(table)
    for name, region in whole.items():
        written = flat(expected[name]) if asked(name) else []
        if asked(name):
            assert getattr(got, name).tolist() == expected[name], name
        else:
            assert getattr(got, name) is None, name
        assert region[:len(written)].tolist() == written, name
        assert (region[len(written):] == POISON).all(), name + " written past its part"


def handle(view):
    """The int handle of a buffer view (a PyOpenCL array or a clbt.Buffer)."""
    return view.base_data.int_ptr if hasattr(view, "base_data") else view.int_ptr


def batch(requests):
    qsl = np.cumsum([0] + [len(p) for p in requests]).astype(np.int32)
    positions = np.array([p for ps in requests for p in ps], np.int64)
    return qsl, positions


def model_of(table, world=1, rank=0, interleave=1):
    return TableModel(table.kv_block_size, table.max_num_reqs, table.width,
                      table.max_num_batched_tokens, kernel_block_size=table.block_size,
                      cp_world_size=world, cp_rank=rank, interleave=interleave)


def test_the_model_local_lengths_are_vllms():
    # vLLM's get_dcp_local_seq_lens: base = L // interleave // world *
    # interleave; each rank then takes up to interleave of L - base * world
    # in rank order. The model counts positions instead; both must agree.
    for world, interleave in ((1, 1), (2, 1), (2, 4), (3, 2), (4, 8)):
        for rank in range(world):
            model = TableModel(8, 1, 1, 1, cp_world_size=world, cp_rank=rank,
                               interleave=interleave)
            for length in range(100):
                base = length // interleave // world * interleave
                rest = min(max(length - base * world - rank * interleave, 0), interleave)
                assert model.local_count(length) == base + rest, (world, rank, length)


def test_export_by_hand_on_a_dcp_rank(device):
    # Blocks of 4 tokens, 2 ranks, this rank 1, interleave 1: rank 1 holds
    # the odd positions, densely. Row 0 = blocks [10, 11]; row 1 is empty.
    # Request 0 (row 0) decodes position 9: L = 10, this rank holds 1, 3,
    # 5, 7, 9 (n = 5: pages [10, 11], the last with 1 token) and of its
    # context [0, 9) 1, 3, 5, 7 (c = 4: one full page [10]). Request 1 is
    # padding (idx -1) with a token: nothing, and no token in
    # subsequence_begins. Request 2 (row 1, empty) prefills position 0:
    # L = 1 but no local token, so no page and last_page_len 0 (not 1).
    # Request 3 is padding past num_reqs. Dense rows at pitch 3.
    with clbt.Table(device, block_size=4, max_num_reqs=4, max_num_blocks_per_req=3,
                    max_num_batched_tokens=4, cp_world_size=2, cp_rank=1) as table:
        assert table.width == 3
        table.add_row(0, [10, 11])
        poison_export(table)
        table.step(3, [0, 1, 2, 3], [9, 3, 0], idx_mapping=[0, -1, 1], num_reqs_padded=4,
                   flags=clbt.STEP_EXPORT, context=True, dense_row_pitch=3)
        by_hand = dict(
            paged_kv_indptr=[0, 2, 2, 2, 2], paged_kv_indices=[10, 11],
            paged_kv_last_page_len=[1, 0, 0, 0], past_lens=[4, 0, 0, 0],
            subsequence_begins=[0, 1, 1, 2, 2], seq_lens=[10, 0, 1, 0],
            dcp_local_seq_lens=[5, 0, 0, 0], max_seq_len=[10],
            context_kv_indptr=[0, 1, 1, 1, 1], context_kv_indices=[10],
            context_kv_last_page_len=[4, 0, 0, 0],
            page_table=[[10, 11, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
        check_export(table, by_hand, 4, True, 3)
        assert table.rejected_tokens == 0
        # the model agrees with the hand (it is what the other tests use)
        model = model_of(table, 2, 1)
        model.add_row([10, 11], 0)
        model.commit(4)
        assert model.export_all(3, [0, 1, 2, 3], [9, 3, 0], [0, -1, 1], 4,
                                dense_row_pitch=3) == by_hand


# Block 8 over kernel blocks of 4 (block b is kernel blocks 2b, 2b+1): 6
# request slots of 3 blocks (width 6), 32 tokens.
SETTINGS = dict(block_size=8, kernel_block_size=4, max_num_reqs=6, max_num_blocks_per_req=3,
                max_num_batched_tokens=32)
# (cp_world_size, cp_rank, cp_interleave_size)
CP = [(1, 0, 1), (2, 1, 1), (2, 0, 4), (3, 2, 2)]
# Each batch: (row changes, idx_mapping, each request's positions,
# num_reqs_padded, seq_lens, context, dense_row_pitch). idx -1: a padding
# request (some with tokens); 9: past max_num_reqs (rejected); row 3 stays
# empty (a request on it has no page, or is rejected where it holds a
# local token); pitch 2 is below the width (longer requests rejected), 9
# above it (6 x 9 exceeds the region, so the batch pads to 4).
BATCHES = [
    ([("add", 0, [3, 4, 5]), ("add", 2, [7]), ("add", 4, [1, 2])],
     [0, -1, 2, 3, 9, 4], [[20], [5], [0, 1, 2, 3, 4, 5], [0], [1], [10, 11, 12, 13]],
     6, None, True, 0),
    ([], [4, 0, -1, 2], [[14], [21], [], [6, 7]], 4, None, False, 9),
    ([("append", 2, [8]), ("truncate", 0, 2)], [2, 3, 0, -1, 4], [[8], [1], [16, 17], [2], [14]],
     6, [30, 2, 18, 0, 40], True, None),
    ([("add", 3, [6])], [3, 0, 2], [[3], [17], [23]], 0, None, True, 2),
    ([], [0, 4, 2], [[17], [15], [23]], 5, [18, 16, 24], False, 0),
]


def apply(table, model, changes):
    """Row changes on the table (None: the model alone) and the model."""
    for kind, row, arg in changes:
        if kind == "truncate":
            model.truncate_row(row, arg)
        else:
            getattr(model, kind + "_row")(arg, row)
        if table is not None:
            getattr(table, kind + "_row")(row, arg)


@pytest.mark.parametrize("cp", CP, ids=["no-cp", "dcp2-rank1", "dcp2-rank0-il4",
                                        "dcp3-rank2-il2"])
@pytest.mark.parametrize("path", ["step", "export"])
def test_export_parts_match_the_model(device, path, cp):
    world, rank, interleave = cp
    with clbt.Table(device, cp_world_size=world, cp_rank=rank, cp_interleave_size=interleave,
                    **SETTINGS) as table:
        assert table.width == 6
        model = model_of(table, world, rank, interleave)
        for changes, idx, requests, padded, seq_lens, context, pitch in BATCHES:
            apply(table, model, changes)
            qsl, positions = batch(requests)
            n = len(idx)
            poison_export(table)
            if path == "step":
                table.step(n, qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                           seq_lens=seq_lens, flags=clbt.STEP_EXPORT, context=context,
                           dense_row_pitch=pitch)
                slots = model.step(n, qsl, positions, idx)
                assert table.read_slot_mapping().tolist() == slots.tolist()
            else:
                table.commit(table.max_num_reqs)
                model.commit(table.max_num_reqs)
                table.export(n, qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                             seq_lens=seq_lens, context=context, dense_row_pitch=pitch)
            expected = model.export_all(n, qsl, positions, idx, padded, seq_lens, pitch)
            check_export(table, expected, padded or n, context, pitch)
            assert table.rejected_tokens == model.rejected
        # the batches reach every kind of request the rules single out
        assert model.rejected > 0


def test_the_batches_reach_every_rule():
    # Not a device test: that BATCHES, through the model, hold an empty
    # exported request with last_page_len 0, a padding request with tokens,
    # a context shorter than the KV, a request rejected by the pitch alone,
    # and DCP local lengths below the lengths.
    seen = set()
    for world, rank, interleave in CP:
        model = TableModel(8, 6, 6, 32, kernel_block_size=4, cp_world_size=world,
                           cp_rank=rank, interleave=interleave)
        for changes, idx, requests, padded, seq_lens, context, pitch in BATCHES:
            apply(None, model, changes)
            model.commit(6)
            qsl, positions = batch(requests)
            before = model.rejected
            out = model.export_all(len(idx), qsl, positions, idx, padded, seq_lens, pitch)
            wide = model.export_all(len(idx), qsl, positions, idx, padded, seq_lens)
            model.rejected = before
            for r in range(len(idx)):
                if idx[r] >= 0 and out["seq_lens"][r] and not out["dcp_local_seq_lens"][r]:
                    seen.add("empty exported")
                    assert out["paged_kv_last_page_len"][r] == 0
                if idx[r] < 0 and qsl[r + 1] > qsl[r]:
                    seen.add("padding with tokens")
                if 0 < out["past_lens"][r] < out["dcp_local_seq_lens"][r]:
                    seen.add("context")
                if wide["seq_lens"][r] and not out["seq_lens"][r]:
                    seen.add("pitch")
                if 0 < out["dcp_local_seq_lens"][r] < out["seq_lens"][r]:
                    seen.add("dcp")
    assert seen == {"empty exported", "padding with tokens", "context", "pitch", "dcp"}


# Two sharded token groups (one over kernel blocks), one replicated on
# every rank, one NONE group (no export). Rank 1 of 2, interleave 4.
GROUPS = [clbt.Group(16, 4), clbt.Group(32, 2, kernel_block_size=16),
          clbt.Group(8, 4, cp_replicated=True), clbt.Group(1, 4, slot_mode=clbt.SlotMode.NONE)]


@pytest.mark.parametrize("path", ["step", "export"])
def test_multi_group_export_matches_the_model_per_group(device, path):
    with clbt.MultiTable(device, groups=GROUPS, max_num_reqs=6, max_num_batched_tokens=16,
                         cp_world_size=2, cp_rank=1, cp_interleave_size=4) as multi:
        # 128-token alignment: 8, 8 (4 blocks of 32 as 8 of 16) and 16 kernel blocks
        assert [group.width for group in multi][:3] == [8, 8, 16]
        models = [model_of(group, *((2, 1, 4) if g < 2 else (1, 0, 1)))
                  for g, group in enumerate(multi)]
        rows = {4: ([1, 2], [3], [9, 10, 11], [5]), 0: ([5], [6], [1], [2]),
                2: ([7, 8, 9], [10, 11], [2, 3, 4, 12], [3])}
        for row, ids in rows.items():
            multi.add_row(row, ids)
            for model, group_ids in zip(models, ids):
                model.add_row(group_ids, row)
        for idx, requests, padded, context, pitch in (
                ([4, -1, 0, 2], [[20], [7], [3, 4], [33]], 5, True, 0),
                ([2, 0, 4], [[60], [0, 1, 2], [12]], 5, False, 9),
                ([0, 2], [[9], [1]], 3, True, None)):
            qsl, positions = batch(requests)
            for group in multi[:3]:
                poison_export(group)
            if path == "step":
                multi.step(len(idx), qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                           flags=clbt.STEP_EXPORT, context=context, dense_row_pitch=pitch)
            else:
                multi.commit(6)
                multi.export(len(idx), qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                             context=context, dense_row_pitch=pitch)
            for group, model in zip(multi[:3], models):
                model.commit(6)
                if path == "step":
                    model.slot_mapping(len(idx), qsl, positions, idx)
                expected = model.export_all(len(idx), qsl, positions, idx, padded,
                                            dense_row_pitch=pitch)
                check_export(group, expected, padded, context, pitch)
                assert group.rejected_tokens == model.rejected
        with pytest.raises(clbt.InvalidArgumentError, match="NONE"):
            multi[3].export_buffers


def test_export_buffers_are_the_regions_read_export_reads(device):
    # The views are the regions (sized as clbt.h says, one fixed address):
    # what read_export returns is what the views hold.
    with clbt.Table(device, **SETTINGS) as table:
        table.add_row(1, [2, 3])
        views = table.export_buffers
        assert views.page_size == 4
        table.step(1, [0, 2], [6, 7], idx_mapping=[1], flags=clbt.STEP_EXPORT, context=True,
                   dense_row_pitch=0)
        got = table.read_export(1, context=True, dense_row_pitch=0)
        for name, size in regions(table).items():
            view = getattr(views, name)
            held = view.get() if hasattr(view, "get") else \
                _opencl.read(table._queue, view.int_ptr, np.empty(size, np.int32))
            assert held.shape == (size,), name
            part = np.asarray(getattr(got, name)).reshape(-1)
            assert held[:part.size].tolist() == part.tolist(), name
        assert handle(table.export_buffers.page_table) == handle(views.page_table)


def test_bad_export_input_names_the_argument_and_changes_nothing(device):
    settings = dict(SETTINGS, max_num_reqs=4)  # width 6: 24 page-table entries
    with clbt.Table(device, **settings) as table, \
         clbt.Table(device, **dict(settings, slot_mode=clbt.SlotMode.NONE)) as none, \
         clbt.MultiTable(device, groups=GROUPS[:2], max_num_reqs=4,
                         max_num_batched_tokens=8) as multi:
        table.add_row(0, [1])
        table.commit(4)
        table.append_row(0, [2])  # not committed: a refused step must not commit it
        multi.add_row(0, ([1], [2]))
        poison_export(table)
        for group in multi:
            poison_export(group)
        slots = np.full(32, POISON, np.int64)
        _opencl.write(table._queue, handle(table.slot_mapping), slots.ctypes.data,
                      slots.nbytes).wait()
        batch1 = dict(num_reqs=1, query_start_loc=[0, 1], positions=[0])
        step = dict(batch1, flags=clbt.STEP_EXPORT)
        cases = [
            # a pitch whose rows exceed the region: 7 x 4 > 4 x 6
            (lambda: table.step(num_reqs_padded=4, dense_row_pitch=7, **step),
             clbt.InvalidArgumentError, "dense_row_pitch 7 x num_reqs_padded 4"),
            (lambda: table.export(num_reqs_padded=4, dense_row_pitch=7, **batch1),
             clbt.InvalidArgumentError, "dense_row_pitch 7 x num_reqs_padded 4"),
            (lambda: table.export(dense_row_pitch=25, **batch1),
             clbt.InvalidArgumentError, "dense_row_pitch 25"),
            # absurd pitches: past uint32, negative, not an int
            (lambda: table.export(dense_row_pitch=2**32, **batch1),
             clbt.InvalidArgumentError, "dense_row_pitch 4294967296 is outside"),
            (lambda: table.step(dense_row_pitch=-1, **step),
             clbt.InvalidArgumentError, "dense_row_pitch -1 is outside"),
            (lambda: table.export(dense_row_pitch=2.0, **batch1),
             clbt.TypeMismatchError, "dense_row_pitch"),
            (lambda: table.step(dense_row_pitch=2**32 - 1, **step),
             clbt.InvalidArgumentError, "dense_row_pitch 4294967295 x num_reqs_padded 1"),
            # the parts asked of a step that exports nothing
            (lambda: table.step(context=True, **batch1), clbt.InvalidArgumentError,
             "export_flags 0x1"),
            (lambda: table.step(dense_row_pitch=0, **batch1), clbt.InvalidArgumentError,
             "export_flags 0x2"),
            (lambda: table.step(dense_row_pitch=3, **batch1), clbt.InvalidArgumentError,
             "dense_row_pitch 3"),
            # the parts asked of a table that has no export
            (lambda: none.export(context=True, **batch1), clbt.InvalidArgumentError, "NONE"),
            (lambda: none.export(dense_row_pitch=0, **batch1), clbt.InvalidArgumentError,
             "NONE"),
            (lambda: none.read_export(1, context=True), clbt.InvalidArgumentError, "NONE"),
            # a multi-group table names the group whose region is too small
            # (widths 8 and 8: 4 x 9 > 32)
            (lambda: multi.export(num_reqs_padded=4, dense_row_pitch=9, **batch1),
             clbt.InvalidArgumentError, "groups[0]: dense_row_pitch 9"),
            (lambda: multi.step(num_reqs_padded=4, dense_row_pitch=9, **step),
             clbt.InvalidArgumentError, "groups[0]: dense_row_pitch 9"),
            # reading back more than the region holds, or a part never written
            (lambda: table.read_export(4, dense_row_pitch=7), clbt.InvalidArgumentError,
             "dense_row_pitch 7 x num_reqs_padded 4"),
            (lambda: table.read_export(1, dense_row_pitch=-2), clbt.InvalidArgumentError,
             "dense_row_pitch -2"),
            (lambda: table.read_export(1), clbt.InvalidArgumentError,
             "paged_kv_indptr[1] is -7777: no export of 1 requests was written"),
        ]
        for call, kind, words in cases:
            with pytest.raises(kind) as raised:
                call()
            assert words in str(raised.value), (words, str(raised.value))
        for group in (table, *multi):
            assert all((region == POISON).all() for region in read_regions(group).values())
            assert group.rejected_tokens == 0
        assert (table.read_slot_mapping() == POISON).all()
        assert table.read_device_rows(1).tolist() == [[2, 3, 0, 0, 0, 0]]
        # and the table still exports (the uncommitted append with it)
        table.step(flags=clbt.STEP_EXPORT, dense_row_pitch=6, num_reqs_padded=4,
                   **dict(batch1, positions=[15]))
        assert table.read_export(4, dense_row_pitch=6).page_table.tolist() == [
            [2, 3, 4, 5, 0, 0]] + [[0] * 6] * 3
        # which wrote no context CSR: reading it back is refused
        with pytest.raises(clbt.InvalidArgumentError, match=r"context_kv_indptr\[4\] is -7777"):
            table.read_export(4, context=True)

