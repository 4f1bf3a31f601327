"""The step, the gather and the export through the bindings, against the
independent numpy model (model.py, written from docs/semantics.md and
clbt.h's rules, sharing no code with clbt). The slot mappings and the
export buffers are poisoned before every device call that the rules say
overwrites them, and the parts the rules say are kept must still hold the
poison. The gathered tables are not poisoned: the gather is incremental
(a position whose row did not change is not rewritten), which holds only
while clbt alone writes them; the model carries them from step to step
instead, stale tails included, as tests/calls/test_step.c does."""
import numpy as np
import pytest
from model import TableModel

import clbt
from clbt import _opencl

POISON = -7777


def handle(view):
    """The int handle of a buffer view (a PyOpenCL array or a clbt.Buffer)."""
    return view.base_data.int_ptr if hasattr(view, "base_data") else view.int_ptr


def poison(table, buffer, count, dtype):
    """Fills a device buffer (an int handle) with POISON (waits); returns
    what it holds."""
    values = np.full(count, POISON, dtype)
    _opencl.write(table._queue, buffer, values.ctypes.data, values.nbytes).wait()
    return values


def batch(requests):
    """query_start_loc and positions of a batch given each request's
    positions."""
    qsl = np.cumsum([0] + [len(p) for p in requests]).astype(np.int32)
    positions = np.array([p for ps in requests for p in ps], np.int64)
    return qsl, positions


def model_of(table, **settings):
    return TableModel(table.kv_block_size, table.max_num_reqs, table.width,
                      table.max_num_batched_tokens, kernel_block_size=table.block_size,
                      maps_tokens=table.slot_mode == clbt.SlotMode.TOKEN_TO_KV_SLOT, **settings)


# Block 16 over kernel blocks of 8 (each KV-manager block id b is kernel
# blocks 2b, 2b+1): 8 request slots of 3 blocks (width 6), 24 tokens.
SETTINGS = dict(block_size=16, kernel_block_size=8, max_num_reqs=8, max_num_blocks_per_req=3,
                max_num_batched_tokens=24)


def both_append(table, model, row, ids):
    table.append_row(row, ids)
    model.append_row(ids, row)


# Each step of a persistent serving loop: (row changes, idx_mapping,
# num_reqs_padded, each request's positions). Entries: -1 a padding
# request, 9 past max_num_reqs (rejected), 5 read twice.
STEPS = [
    ([("add", 5, [3, 4]), ("add", 2, [7]), ("add", 0, [11, 12, 13])],
     [5, -1, 2, 5, 9], 7, [[0, 17, 31], [4], [15], [20], [1, 2]]),
    # steady: the same idx_mapping, one row grows
    ([("append", 2, [8])], [5, -1, 2, 5, 9], 7, [[32 - 1], [], [16], [21], [3]]),
    # churn: slot 2's request leaves, another takes the slot; entries move
    ([("clear", 2), ("add", 2, [20])], [2, 0, 5, -1], 6, [[0, 1], [47], [18], [5]]),
    # rollback of slot 0 to one block, and a batch of one
    ([("truncate", 0, 1)], [0], 0, [[15, 16]]),
]


def apply(table, model, changes):
    for change in changes:
        kind, row = change[0], change[1]
        if kind == "add":
            table.add_row(row, change[2])
            model.add_row(change[2], row)
        elif kind == "append":
            both_append(table, model, row, change[2])
        elif kind == "clear":
            table.clear_row(row)
            model.clear_row(row)
        else:
            table.truncate_row(row, change[2])
            model.truncate_row(row, change[2])


@pytest.mark.parametrize("zero_tails", [False, True])
def test_persistent_steps_map_and_gather_through_idx_mapping(device, zero_tails):
    with clbt.Table(device, zero_gathered_tails=zero_tails, **SETTINGS) as table:
        model = model_of(table, zero_gathered_tails=zero_tails)
        assert (table.read_gathered_rows() == 0).all()  # the model's start
        for changes, idx, padded, requests in STEPS:
            apply(table, model, changes)
            qsl, positions = batch(requests)
            before = model.gathered.copy()
            poison(table, handle(table.slot_mapping), table.max_num_batched_tokens, np.int64)
            table.step(len(idx), qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                       flags=clbt.STEP_GATHER)
            slots = model.step(len(idx), qsl, positions, idx, padded, gather=True)
            assert table.read_slot_mapping().tolist() == slots.tolist()
            assert table.read_gathered_rows().tolist() == model.gathered.tolist()
            assert table.rejected_tokens == model.rejected
            # the host reference, from the host rows (committed by the step)
            host_slots, host_gathered = table.compute_step_host(
                len(idx), qsl, positions, idx_mapping=idx, num_reqs_padded=padded,
                flags=clbt.STEP_GATHER, gathered_rows=before)
            assert host_slots.tolist() == slots.tolist()
            assert host_gathered.tolist() == model.gathered.tolist()
        # the batches reach what the rules single out: rejected entries,
        # and a stale tail (slot 5's kernel blocks 8, 9 behind slot 0's two
        # live entries at position 0) exactly when tails are kept
        assert model.rejected > 0
        assert model.gathered[0, :4].tolist() == [22, 23] + ([0, 0] if zero_tails else [8, 9])


@pytest.mark.parametrize("zero_tails", [False, True])
def test_kept_tails_and_untouched_rows_by_hand(device, zero_tails):
    # Slot 3 holds block 3, 4 = kernel blocks [6, 7, 8, 9]; batch [3, 3]
    # gathers it at positions 0 and 1. Truncated to block 3 ([6, 7]),
    # batch [3] with no padding rewrites position 0 only: [6, 7, 8, 9]
    # with the tail kept, [6, 7, 0, 0] zeroed; position 1 is untouched.
    with clbt.Table(device, zero_gathered_tails=zero_tails, **SETTINGS) as table:
        table.add_row(3, [3, 4])
        table.step(2, [0, 1, 2], [0, 1], idx_mapping=[3, 3], flags=clbt.STEP_GATHER)
        table.truncate_row(3, 1)
        table.step(1, [0, 1], [0], idx_mapping=[3], flags=clbt.STEP_GATHER)
        tail = [0, 0] if zero_tails else [8, 9]
        assert table.read_gathered_rows(3).tolist() == [
            [6, 7] + tail + [0, 0], [6, 7, 8, 9, 0, 0], [0] * 6]
        assert table.read_slot_mapping(1).tolist() == [6 * 8]


def test_a_step_without_gather_leaves_the_gathered_rows(device):
    with clbt.Table(device, **SETTINGS) as table:
        table.add_row(1, [2])
        table.step(1, [0, 1], [9], idx_mapping=[1], flags=clbt.STEP_GATHER)
        table.append_row(1, [6])
        table.step(1, [0, 1], [17], idx_mapping=[1])
        assert table.read_gathered_rows(2).tolist() == [[4, 5, 0, 0, 0, 0], [0] * 6]
        assert table.read_slot_mapping(1).tolist() == [12 * 8 + 1]  # kernel block 12


def read_whole_export(table):
    buffers = table._export_buffers()
    n, width = table.max_num_reqs, table.width
    return [_opencl.read(table._queue, getattr(buffers, name), np.empty(size, np.int32))
            for name, size in zip(clbt.Export._fields[:5], (n + 1, n * width, n, n, n + 1))]


def poison_whole_export(table):
    n, width = table.max_num_reqs, table.width
    buffers = table._export_buffers()
    for name, size in zip(clbt.Export._fields[:5], (n + 1, n * width, n, n, n + 1)):
        poison(table, getattr(buffers, name), size, np.int32)


@pytest.mark.parametrize("with_seq_lens", [False, True])
def test_export_through_idx_mapping_gives_csr_arrays(device, with_seq_lens):
    with clbt.Table(device, **SETTINGS) as table:
        model = model_of(table)
        for row, ids in ((6, [3, 4]), (1, [9]), (4, [5, 6, 7])):
            both_append(table, model, row, ids)
        table.commit(8)
        model.commit(8)
        # requests: slot 6 decoding at 20, padding, slot 6 again, slot 4
        # prefilling 0..2, slot 9 (rejected), slot 1 asking past its row
        idx = [6, -1, 6, 4, 9, 1]
        qsl, positions = batch([[20], [], [5, 6], [0, 1, 2], [0], [16]])
        seq_lens = [30, 0, 7, 40, 1, 17] if with_seq_lens else None
        poison_whole_export(table)
        table.export(6, qsl, positions, idx_mapping=idx, num_reqs_padded=8, seq_lens=seq_lens)
        expected = model.export(6, qsl, positions, idx, 8, seq_lens)
        got = table.read_export(8)
        assert [a.tolist() for a in got[:5]] == [list(e) for e in expected]
        assert got.page_size == 8
        assert table.rejected_tokens == model.rejected
        # nothing past what the export writes changes
        whole = read_whole_export(table)
        assert (whole[1][expected[0][-1]:] == POISON).all()


def test_export_by_hand(device):
    # Slot 2 holds block 5 = kernel blocks 10, 11; a request at positions
    # 8, 9 reads it: L = 10 tokens, 2 pages [10, 11], the last holding 2
    # tokens, 8 tokens before the query. Padded to 2: an empty request.
    with clbt.Table(device, **SETTINGS) as table:
        table.add_row(2, [5])
        table.commit(8)
        table.export(1, [0, 2], [8, 9], idx_mapping=[2], num_reqs_padded=2)
        got = table.read_export(2)
        assert [a.tolist() for a in got[:5]] == [[0, 2, 2], [10, 11], [2, 0], [8, 0], [0, 2, 2]]


GROUPS = [clbt.Group(16, 4), clbt.Group(32, 2, kernel_block_size=16),
          clbt.Group(1, 4, slot_mode=clbt.SlotMode.NONE)]


@pytest.mark.parametrize("zero_tails", [False, True])
def test_multi_table_step_gathers_every_group_and_exports(device, zero_tails):
    with clbt.MultiTable(device, groups=GROUPS, max_num_reqs=6, max_num_batched_tokens=16,
                         zero_gathered_tails=zero_tails) as multi:
        models = [model_of(group, zero_gathered_tails=zero_tails) for group in multi]
        rows = {4: ([1, 2], [3], [9]), 0: ([5], [6], [1]), 3: ([7, 8, 9], [10, 11], [2])}
        for step, idx in enumerate(([4, 0, -1, 4], [3, 4, 0])):
            for row, ids in rows.items():
                multi.append_row(row, ids)
                for model, group_ids in zip(models, ids):
                    model.append_row(group_ids, row)
            qsl, positions = batch([[p + step] for p in (20, 3, 0, 21)][:len(idx)])
            for group in multi:
                poison(group, handle(group.slot_mapping), 16, np.int64)
                if group.slot_mode == clbt.SlotMode.TOKEN_TO_KV_SLOT:
                    poison_whole_export(group)
            multi.step(len(idx), qsl, positions, idx_mapping=idx, num_reqs_padded=5,
                       flags=clbt.STEP_GATHER | clbt.STEP_EXPORT)
            for group, model in zip(multi, models):
                slots = model.step(len(idx), qsl, positions, idx, 5, gather=True)
                assert group.read_gathered_rows().tolist() == model.gathered.tolist()
                if slots is None:  # a NONE group: no slot mapping, no export
                    assert (group.read_slot_mapping() == POISON).all()
                    with pytest.raises(clbt.Error, match="CLBT_INVALID_ARGUMENT"):
                        group.export_buffers
                    continue
                assert group.read_slot_mapping().tolist() == slots.tolist()
                expected = model.export(len(idx), qsl, positions, idx, 5)
                assert [a.tolist() for a in group.read_export(5)[:5]] == \
                    [list(e) for e in expected]
                assert group.rejected_tokens == model.rejected


def test_step_refusals_name_the_argument_and_change_nothing(device):
    with clbt.Table(device, **SETTINGS) as table, \
         clbt.Table(device, **dict(SETTINGS, block_size=8, kernel_block_size=0,
                                   slot_mode=clbt.SlotMode.NONE)) as none:
        table.add_row(0, [1])
        small = _opencl.create_buffer(handle(device.context), 4)  # one int32
        try:
            poison(table, handle(table.slot_mapping), 24, np.int64)
            cases = [
                (lambda: table.step(1, [0, 1], [0], flags=4), "CLBT_INVALID_ARGUMENT", "flags"),
                (lambda: table.step(2, [0, 1, 2], [0, 1], num_reqs_padded=1),
                 "CLBT_INVALID_ARGUMENT", "num_reqs_padded"),
                (lambda: table.step(1, [0, 1], [0], num_reqs_padded=9), "CLBT_TOO_MANY_REQUESTS",
                 "num_reqs_padded"),
                (lambda: table.step(2, [0, 1, 2], [0, 1], idx_mapping=[0]),
                 "CLBT_INVALID_ARGUMENT", "idx_mapping holds 1 values; num_reqs 2 needs 2"),
                (lambda: table.step(2, [0, 1, 2], [0, 1], idx_mapping=small),
                 "CLBT_BUFFER_TOO_SMALL", "idx_mapping"),
                (lambda: table.export(1, [0, 1], [0], num_reqs_padded=9),
                 "CLBT_TOO_MANY_REQUESTS", "num_reqs_padded"),
                (lambda: none.export(1, [0, 1], [0]), "CLBT_INVALID_ARGUMENT", "NONE"),
                (lambda: table.compute_step_host(1, [0, 1], [0], flags=4),
                 "CLBT_INVALID_ARGUMENT", "flags"),
                (lambda: table.compute_step_host(2, [0, 1, 2], [0, 1], idx_mapping=[0]),
                 "CLBT_INVALID_ARGUMENT", "idx_mapping"),
                (lambda: table.compute_step_host(1, [0, 1], [0], gathered_rows=np.zeros((2, 2))),
                 "CLBT_INVALID_ARGUMENT", "gathered_rows"),
            ]
            for call, status, words in cases:
                with pytest.raises(clbt.Error) as raised:
                    call()
                assert raised.value.status == status
                assert words in str(raised.value)
            assert (table.read_slot_mapping() == POISON).all()
            assert table.rejected_tokens == 0
        finally:
            small.close()



@pytest.mark.parametrize("mode", [clbt.CommitMode.WHOLE, clbt.CommitMode.SCATTER])
def test_multi_table_commit_mode_reaches_every_group(device, mode):
    # One short row changed: AUTO would scatter it; WHOLE must rewrite.
    with clbt.MultiTable(device, groups=GROUPS[:2], max_num_reqs=6, max_num_batched_tokens=16,
                         commit_mode=mode) as multi:
        multi.append_row(1, ([3], [4]))
        multi.commit(6)
        assert [group.last_commit[0] for group in multi] == [mode, mode]
        assert [group.commit_mode for group in multi] == [mode, mode]
