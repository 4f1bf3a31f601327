"""clbt.vllm.BlockTables, Model Runner V2's class, driven through MRV2's
call sequence (append_block_ids, apply_staged_writes, gather_block_tables,
compute_slot_mappings, the dummy runs) and checked by hand or against the
independent model of model.py, never against clbt's own host reference."""
import os
import random

import numpy as np
import pytest
from model import TableModel

import clbt
from clbt import vllm
from clbt._library import lib

SEED = int(os.environ.get("CLBT_TEST_SEED", random.randrange(1 << 30)))


def tables(device, **keywords):
    settings = dict(block_sizes=[16, 32, 8], max_num_reqs=4, max_num_batched_tokens=64,
                    max_num_blocks_per_group=[8, 8, 8], device=device)
    settings.update(keywords)
    return vllm.BlockTables(**settings)


def count_calls(monkeypatch, *names):
    """Records each call of the named C functions, in order."""
    calls = []
    for name in names:
        function = getattr(lib, name)
        monkeypatch.setattr(lib, name,
                            lambda *args, _f=function, _n=name: calls.append(_n) or _f(*args))
    return calls


def test_constructor_and_widths_as_mrv2_sizes_rows(device):
    # Widths are max_num_blocks_per_group x block / kernel block, with no
    # 128-token alignment: 8, 8 x 2, 8 (MultiGroupBlockTable would align
    # 8 blocks of 8 tokens to 16).
    t = tables(device, kernel_block_sizes=[16, 16, 8])
    assert t.block_sizes == [16, 32, 8] and t.kernel_block_sizes == [16, 16, 8]
    assert t.blocks_per_kv_block == [1, 2, 1] and t.num_kv_cache_groups == 3
    assert [table.gpu.shape for table in t.block_tables] == [(4, 8), (4, 16), (4, 8)]
    assert [table.shape for table in t.input_block_tables] == [(4, 8), (4, 16), (4, 8)]
    assert t.slot_mappings.shape == (3, 64) and t.num_blocks.np.shape == (3, 4)
    assert (t.cp_size, t.cp_rank, t.cp_interleave) == (1, 0, 1)
    assert (t.max_num_reqs, t.max_num_batched_tokens) == (4, 64)
    with pytest.raises(AttributeError, match="fixed when the table is made"):
        t.cp_size = 2
    # Older MRV2 versions took max_model_len: cdiv(max_model_len, block)
    old = vllm.BlockTables([16, 32], 2, 8, max_model_len=100, device=device)
    assert old.max_num_blocks_per_group == [7, 4]
    assert [table.gpu.shape[1] for table in old.block_tables] == [7, 4]
    with pytest.raises(clbt.Error, match="kernel_block_size 5 must divide block_size 16"):
        tables(device, kernel_block_sizes=[5, 32, 8])
    with pytest.raises(clbt.Error, match="max_num_blocks_per_group length \\(2\\)"):
        tables(device, max_num_blocks_per_group=[8, 8])
    # Issue 27: a number where a list per group belongs names the argument
    # (it was a bare TypeError from list(64)).
    for name in ("max_num_blocks_per_group", "kernel_block_sizes", "block_sizes"):
        with pytest.raises(clbt.TypeMismatchError) as raised:
            tables(device, **{name: 64})
        assert isinstance(raised.value, TypeError)
        assert raised.value.message.startswith("%s is an int; a list of one entry per group"
                                               % name)


def test_staged_writes_of_every_group_are_applied_together(device, monkeypatch):
    calls = count_calls(monkeypatch, "clbt_multi_table_update_row",
                        "clbt_multi_table_add_rows", "clbt_multi_table_append_rows",
                        "clbt_multi_table_enqueue_commit", "clbt_table_enqueue_commit")
    t = tables(device, kernel_block_sizes=[16, 16, 8])
    for table in t.block_tables:  # MRV2's test: the per-group apply is not used
        monkeypatch.setattr(table, "apply_write", lambda: pytest.fail("per-group apply"))
    t.append_block_ids(req_index=0, new_block_ids=([1, 2], [10, 11], []), overwrite=True)
    t.append_block_ids(req_index=1, new_block_ids=([3], [12], [5, 6]), overwrite=True)
    staged = t.block_tables[1]
    assert staged._staged_write_indices == [0, 1] and staged._staged_write_starts == [0, 0]
    assert staged._staged_write_contents == [20, 21, 22, 23, 24, 25]  # KV b -> 2b, 2b+1
    assert staged._staged_write_cu_lens == [4, 6]
    assert t.block_tables[2]._staged_write_indices == [1]  # an empty write is no write
    t.apply_staged_writes()
    for table in t.block_tables:
        assert not table._staged_write_indices and not table._staged_write_contents
    assert t.block_tables[0].gpu[0, :2].tolist() == [1, 2]
    assert t.block_tables[1].gpu[0, :4].tolist() == [20, 21, 22, 23]
    assert t.block_tables[1].gpu[1, :2].tolist() == [24, 25]
    assert t.block_tables[2].gpu[1, :2].tolist() == [5, 6]
    assert t.num_blocks.np[:, :2].tolist() == [[2, 1], [4, 2], [0, 2]]
    assert t.num_blocks.gpu[:, :2].tolist() == [[2, 1], [4, 2], [0, 2]]
    # one C call per append, every group in it; one commit for all groups
    assert calls == ["clbt_multi_table_update_row"] * 2 + ["clbt_multi_table_enqueue_commit"]
    t.append_block_ids(req_index=0, new_block_ids=([7], [13], [8]), overwrite=False)
    assert t.block_tables[1]._staged_write_starts == [4]
    t.apply_staged_writes()
    assert t.block_tables[0].gpu[0, :3].tolist() == [1, 2, 7]
    assert t.block_tables[1].gpu[0, :6].tolist() == [20, 21, 22, 23, 26, 27]
    assert t.block_tables[2].gpu[0, :1].tolist() == [8]
    assert t.num_blocks.np[:, 0].tolist() == [3, 6, 1]


def test_a_group_applies_its_own_writes(device):
    t = tables(device)
    t.append_block_ids(0, ([4], [5], [6]), overwrite=True)
    t.block_tables[1].apply_write()
    assert t.block_tables[1]._staged_write_indices == []
    assert t.block_tables[0]._staged_write_indices == [0]
    assert t.block_tables[1].gpu[0, :1].tolist() == [5]


def test_overwrite_starts_at_column_0_and_keeps_the_old_tail(device):
    t = tables(device, max_num_reqs=2)
    t.append_block_ids(0, ([1, 2, 3], [4], [5]), overwrite=True)
    t.append_block_ids(0, ([9], [8], []), overwrite=True)
    t.apply_staged_writes()
    assert t.num_blocks.np[:, 0].tolist() == [1, 1, 0]
    assert t.block_tables[0].gpu[0, :3].tolist() == [9, 2, 3]  # as MRV2: tail kept


def test_row_capacity_is_a_runtime_error_that_stages_nothing(device):
    t = tables(device, max_num_reqs=2, max_num_blocks_per_group=[4, 2, 4])
    t.append_block_ids(1, ([1, 2, 3], [4], [5]), overwrite=True)
    with pytest.raises(RuntimeError, match=r"groups\[1\] .*: n = 2 blocks of 1 kernel blocks "
                       "would overflow row 1: it holds 1 of width 2"):
        t.append_block_ids(1, ([6], [7, 8], [9]), overwrite=False)  # group 0 would fit
    assert t.num_blocks.np[:, 1].tolist() == [3, 1, 1]
    assert t.block_tables[0]._staged_write_indices == [1]
    with pytest.raises(clbt.Error) as refused:
        t.append_block_ids(1, ([6, 7], [], []), overwrite=False)
    assert refused.value.status == "CLBT_ROW_OVERFLOW"
    with pytest.raises(IndexError, match="row 2 is out of range: max_num_reqs is 2"):
        t.append_block_ids(2, ([1], [1], [1]), overwrite=True)
    with pytest.raises(TypeError):
        t.append_block_ids(0, [1, 2, 3], overwrite=True)


def test_null_blocks_counted_from_the_staged_rows(device):
    t = vllm.BlockTables([32], 2, 16, [4], device, kernel_block_sizes=[16])
    t.append_block_ids(0, ([0, 3],), overwrite=True)
    assert t.num_null_blocks[0, 0] == 2  # KV block 0 is kernel blocks 0 and 1
    t.append_block_ids(0, ([0],), overwrite=False)
    assert t.num_null_blocks[0, 0] == 4
    t.append_block_ids(0, ([5],), overwrite=True)
    assert t.num_null_blocks[0, 0] == 0


def test_groups_without_slot_mapping_read_pad(device):
    t = vllm.BlockTables([8, 262144], 1, 4, [1, 1], device, slot_mapping_enabled=[False, True])
    t.append_block_ids(0, ([7], [12]), overwrite=True)
    t.apply_staged_writes()
    slots = t.compute_slot_mappings(np.array([0], np.int32), np.array([0, 2], np.int32),
                                    np.array([153797, 165757]), num_tokens_padded=2)
    assert isinstance(slots, clbt.StackedDeviceArray) and slots.shape == (2, 2)
    assert slots[0].tolist() == [-1, -1]
    assert slots[1].tolist() == [12 * 262144 + 153797, 12 * 262144 + 165757]
    assert t.slot_mappings[:, 2:].tolist() == [[-1, -1], [-1, -1]]
    # the disabled group's rows are still gathered (Mamba state indices)
    gathered = t.gather_block_tables(np.array([0], np.int32), 1)
    assert gathered[0].tolist() == [[7]] and gathered[1].tolist() == [[12]]


def test_slot_mapping_modes_stand_for_slot_mapping_enabled(device):
    # Newer MRV2 copies take per-group SlotMappingModes in place of main's
    # booleans; both give the same table: a NONE group reads -1.
    old = vllm.BlockTables([8, 16], 1, 4, [1, 1], device, slot_mapping_enabled=[False, True])
    new = vllm.BlockTables([8, 16], 1, 4, [1, 1], device, slot_mapping_modes=[
        vllm.SlotMappingMode.NONE, vllm.SlotMappingMode.TOKEN_TO_KV_SLOT])
    for t in (old, new):
        assert t.slot_mapping_enabled == [False, True]
        assert t.slot_mapping_modes == [vllm.SlotMappingMode.NONE,
                                        vllm.SlotMappingMode.TOKEN_TO_KV_SLOT]
        t.append_block_ids(0, ([7], [12]), overwrite=True)
        t.apply_staged_writes()
        slots = t.compute_slot_mappings(np.array([0], np.int32), np.array([0, 2], np.int32),
                                        np.array([3, 17]), 2)
        assert slots.tolist() == [[-1, -1], [12 * 16 + 3, -1]]  # 17 is past its one block
    with pytest.raises(TypeError, match="give slot_mapping_modes or slot_mapping_enabled"):
        vllm.BlockTables([8], 1, 4, [1], device, slot_mapping_enabled=[True],
                         slot_mapping_modes=[vllm.SlotMappingMode.NONE])
    with pytest.raises(TypeError, match="slot_mapping_mode must be a SlotMappingMode"):
        vllm.BlockTables([8], 1, 4, [1], device, slot_mapping_modes=["none"])


def lengths_and_rows(t):
    """Every group's host lengths and rows, to show that nothing changed."""
    return t.num_blocks.np.tolist(), [g.host_rows.tolist() for g in t._engine.groups]


def test_update_block_ids_overwrites_the_running_requests_it_names(device):
    # MRV2: each req_id that req_id_to_index holds has its slot written from
    # column 0, as append_block_ids(..., overwrite=True); others are skipped.
    t = tables(device, kernel_block_sizes=[16, 16, 8])  # group 1: 2 kernel blocks a block
    t.append_block_ids(0, ([1, 2], [3], [4]), overwrite=True)
    t.append_block_ids(1, ([5, 6, 7], [8, 9], [10]), overwrite=True)
    t.apply_staged_writes()
    t.update_block_ids({"b": ([11], [12], []), "gone": ([1], [1], [1])}, {"a": 0, "b": 1})
    assert t.num_blocks.np[:, :2].tolist() == [[2, 1], [2, 2], [1, 0]]
    assert t.block_tables[0]._staged_write_indices == [1]
    assert t.block_tables[1]._staged_write_starts == [0]
    assert t.block_tables[1]._staged_write_contents == [24, 25]
    assert t.block_tables[2]._staged_write_indices == []  # no ids: no write
    t.apply_staged_writes()
    # columns past the new length keep their ids, as an overwrite does
    assert t.block_tables[0].gpu[1, :3].tolist() == [11, 6, 7]
    assert t.block_tables[1].gpu[1, :4].tolist() == [24, 25, 18, 19]
    assert t.block_tables[0].gpu[0, :2].tolist() == [1, 2]
    # all or nothing: "a" fits, "b" outgrows group 2's 8 blocks
    before = lengths_and_rows(t)
    with pytest.raises(vllm.RowCapacityError, match="groups\\[2\\]: .*would overflow row 1"):
        t.update_block_ids({"a": ([9], [9], [9]), "b": ([1], [1], list(range(9)))},
                           {"a": 0, "b": 1})
    assert lengths_and_rows(t) == before and t.block_tables[0]._staged_write_indices == []


def test_overwrite_rows_writes_the_slots_of_batch_positions(device):
    # Batch position b reads slot idx_mapping[b]: positions 0 and 2 of
    # [2, 0, 3] are slots 2 and 3; position 1 (slot 0) keeps its row.
    t = tables(device)
    t.append_block_ids(0, ([1], [2], [3]), overwrite=True)
    t.append_block_ids(3, ([4, 5], [6], [7]), overwrite=True)
    idx = np.array([2, 0, 3], np.int32)
    t.overwrite_rows(idx, [0, 2], [([9], [8], []), ([4], [], [6, 6])])
    lengths, rows = lengths_and_rows(t)
    assert [l[:4] for l in lengths] == [[1, 0, 1, 1], [1, 0, 1, 0], [1, 0, 0, 2]]
    assert [r[2][:1] for r in rows] == [[9], [8], [0]]
    assert [r[3][:2] for r in rows] == [[4, 5], [6, 0], [6, 6]]  # group 0 keeps its tail
    assert [r[0][:1] for r in rows] == [[1], [2], [3]]
    before = lengths_and_rows(t)
    for batch_rows, rows, status, words in (
            ([3], [([1], [1], [1])], "CLBT_ROW_OUT_OF_RANGE",
             "batch_rows holds 3; idx_mapping holds 3 requests"),
            ([0, 1], [([1], [1], [1])], "CLBT_INVALID_ARGUMENT",
             "rows holds 1 entries; batch_rows holds 2"),
            ([0, 1], [([1], [1], [1]), ([1], [1], [-1])], "CLBT_INVALID_BLOCK_ID",
             "block_ids\\[0\\] = -1 is outside")):
        with pytest.raises(clbt.Error, match=words) as refused:
            t.overwrite_rows(idx, batch_rows, rows)
        assert refused.value.status == status
    with pytest.raises(clbt.Error, match="a padding request's") as refused:
        t.overwrite_rows(np.array([1, -1], np.int32), [0, 1], [([1], [1], [1])] * 2)
    assert refused.value.status == "CLBT_ROW_OUT_OF_RANGE"
    assert lengths_and_rows(t) == before


def test_null_leading_blocks_nulls_a_groups_first_blocks(device):
    # Group 1 has 2 kernel blocks a KV block: slot 0's KV blocks 5 6 7 are
    # kernel blocks 10 .. 15. Nulling 2 makes them 0 1 0 1 14 15 (KV block
    # 0, the null block), the length stays 6, and groups 0 and 2 are as
    # they were.
    t = tables(device, kernel_block_sizes=[16, 16, 8])
    t.append_block_ids(0, ([1, 2], [5, 6, 7], [3]), overwrite=True)
    t.append_block_ids(1, ([4], [8], [9]), overwrite=True)
    t.apply_staged_writes()
    t.null_leading_blocks(1, [0], [2])
    assert t.num_blocks.np[:, 0].tolist() == [2, 6, 1]
    assert t._engine.groups[1].host_rows[0, :6].tolist() == [0, 1, 0, 1, 14, 15]
    assert t.num_nulled_blocks[:, :2].tolist() == [[0, 0], [4, 0], [0, 0]]
    assert t.num_null_blocks[1, 0] == 4
    assert t.block_tables[1]._staged_write_indices == [0]
    assert t.block_tables[1]._staged_write_contents == [0, 1, 0, 1, 14, 15]
    assert t.block_tables[0]._staged_write_indices == []
    t.apply_staged_writes()
    # position 0: kernel block 0 is block 0 -> slot 0; 17: kernel block 1 is
    # 1 -> 16 + 1; 64: kernel block 4 is 14 -> 14 * 16
    slots = t.compute_slot_mappings(np.array([0], np.int32), np.array([0, 3], np.int32),
                                    np.array([0, 17, 64]), 3)
    assert slots[1].tolist() == [0, 17, 224]
    before = lengths_and_rows(t)
    for call, status, words in (
            (lambda: t.null_leading_blocks(1, [1, 0], [1, 4]), "CLBT_INVALID_ARGUMENT",
             "num_blocks\\[1\\] = 4 exceeds the 3 blocks slot 0 holds in group 1"),
            (lambda: t.null_leading_blocks(3, [0], [1]), "CLBT_INVALID_ARGUMENT",
             "group 3 is not a group: there are 3"),
            (lambda: t.null_leading_blocks(0, [4], [1]), "CLBT_ROW_OUT_OF_RANGE",
             "req_indices: index 4 is out of bounds"),
            (lambda: t.null_leading_blocks(0, [0, 1], [1]), "CLBT_INVALID_ARGUMENT",
             "num_blocks holds 1 entries; req_indices holds 2")):
        with pytest.raises(clbt.Error, match=words) as refused:
            call()
        assert refused.value.status == status
    assert lengths_and_rows(t) == before


def caller_array(device, values):
    """values in a new device buffer of the caller's own, as a DeviceArray
    (what a caller hands MRV2's out=)."""
    from clbt import _opencl
    from clbt._device_array import DeviceArray, Memory
    handle = device._live()
    buffer = _opencl.create_buffer(lib.clbt_device_context(handle), values.nbytes)
    queue = lib.clbt_device_queue(handle)
    _opencl.write(queue, buffer.int_ptr, values.ctypes.data, values.nbytes).wait()
    memory = Memory(buffer.int_ptr, queue, values.nbytes)
    buffer.close()  # the Memory holds its own reference
    return DeviceArray(memory, values.shape, values.dtype)


def test_gather_and_slot_mappings_into_the_callers_arrays(device):
    # Newer MRV2: out= takes the caller's arrays. Slots 2 and 0 hold KV
    # blocks [4] and [1] in group 0 (block 16), [5] and [2] in group 1
    # (block 32 over 16: kernel 10 11 and 4 5), [6] and [3] in group 2
    # (block 8). The arrays are poisoned (-7): what is not written shows.
    t = tables(device, kernel_block_sizes=[16, 16, 8])
    t.append_block_ids(0, ([1], [2], [3]), overwrite=True)
    t.append_block_ids(2, ([4], [5], [6]), overwrite=True)
    t.apply_staged_writes()
    idx = np.array([2, 0], np.int32)
    widths = [8, 16, 8]
    out = [caller_array(device, np.full((4, w), -7, np.int32)) for w in widths]
    gathered = t.gather_block_tables(idx, 3, out=out, out_ptrs=object())
    assert [g.shape for g in gathered] == [(3, 8), (3, 16), (3, 8)]
    assert gathered[0].tolist() == [[4] + [0] * 7, [1] + [0] * 7, [0] * 8]
    assert out[1][:2, :3].tolist() == [[10, 11, 0], [4, 5, 0]]
    assert out[2][:, 0].tolist() == [6, 3, 0, -7]  # row 3, past num_reqs_padded, untouched
    # request 0 (slot 2): positions 1 2; request 1 (slot 0): 17, past block
    # 0's 16 tokens in groups 0 and 2, kernel block 1 (id 5) in group 1.
    # Rows 10 wide at a pitch of 12 (the last 2 are not out's), then rows
    # wider than the table's 64 tokens: -1 past the tokens, as MRV2 pads.
    expected = [[65, 66, -1], [161, 162, 81], [49, 50, -1]]
    for width, pitch in ((10, 12), (70, 70)):
        whole = caller_array(device, np.full((3, pitch), -7, np.int64))
        slots = t.compute_slot_mappings(idx, np.array([0, 2, 3], np.int32),
                                        np.array([1, 2, 17]), 4, out=whole[:, :width])
        assert slots.shape == (3, 4)
        assert whole.tolist() == [row + [-1] * (width - 3) + [-7] * (pitch - width)
                                  for row in expected]
    # refused before anything runs or is written
    poison = caller_array(device, np.full((3, 10), -7, np.int64))
    for call, words in (
            (lambda: t.gather_block_tables(idx, 3, out=out[:2]),
             "out length \\(2\\) must match"),
            (lambda: t.gather_block_tables(idx, 3, out=[out[1], out[0], out[2]]),
             "out\\[0\\] is int32 \\(4, 16\\)"),
            (lambda: t.gather_block_tables(idx, 4, out=[o[:3] for o in out]),
             "at least 4 rows"),
            (lambda: t.compute_slot_mappings(idx, np.array([0, 2, 3], np.int32),
                                             np.array([1, 2, 17]), out=poison[:, :2]),
             "at least 3 rows of at least 3 int64 elements"),
            (lambda: t.compute_slot_mappings(idx, np.array([0, 2, 3], np.int32),
                                             np.array([1, 2, 17]), out=poison[:2]),
             "at least 3 rows"),
            (lambda: t.compute_slot_mappings(idx, np.array([0, 2, 3], np.int32),
                                             np.array([1, 2, 17]), out=out[0]),
             "int32 \\(4, 8\\).*at least 3 int64 elements")):
        with pytest.raises(clbt.Error, match=words):
            call()
    assert poison.tolist() == [[-7] * 10] * 3


@pytest.mark.parametrize("cp_rank", range(4))
@pytest.mark.parametrize("kernel", [128, 64])
def test_dcp_shards_only_the_sharded_groups(device, cp_rank, kernel):
    # CP 4, interleave 128, block 128: a virtual block of 512 tokens, rank r
    # owns its offsets [128 r, 128 r + 128); group 0 sharded (blocks 5, 9),
    # group 1 whole on every rank (blocks 10 .. 17).
    t = vllm.BlockTables([128, 128], 1, 1024, [2, 8], device,
                         kernel_block_sizes=[kernel, kernel], cp_size=4, cp_rank=cp_rank,
                         cp_interleave=128, dcp_sharded=[True, False])
    t.append_block_ids(0, ([5, 9], list(range(10, 18))), overwrite=True)
    t.apply_staged_writes()
    positions = np.arange(1024)
    slots = t.compute_slot_mappings(np.zeros(1, np.int32), np.array([0, 1024], np.int32),
                                    positions, num_tokens_padded=1024)
    expected = np.full(1024, -1)
    expected[cp_rank * 128:cp_rank * 128 + 128] = np.arange(5 * 128, 6 * 128)
    expected[512 + cp_rank * 128:512 + cp_rank * 128 + 128] = np.arange(9 * 128, 10 * 128)
    assert slots[0].tolist() == expected.tolist()
    assert slots[1].tolist() == (positions + 10 * 128).tolist()


def test_padding_requests_get_pad_slots(device):
    t = vllm.BlockTables([4], 2, 16, [4], device)
    t.append_block_ids(0, ([7, 8],), overwrite=True)
    t.apply_staged_writes()
    qsl, positions = np.array([0, 3], np.int32), np.array([1, 2, 3])
    real = t.compute_slot_mappings(np.array([0], np.int32), qsl, positions, 3)
    assert real[0].tolist() == [29, 30, 31]
    assert t.compute_slot_mappings(np.array([-1], np.int32), qsl, positions, 3)[0].tolist() \
        == [-1, -1, -1]


def test_one_mrv2_step_is_one_clbt_step(device, monkeypatch):
    calls = count_calls(monkeypatch, "clbt_multi_table_update_row",
                        "clbt_multi_table_add_rows", "clbt_multi_table_append_rows",
                        "clbt_multi_table_enqueue_commit", "clbt_multi_table_enqueue_step")
    t = tables(device)
    t.append_block_ids(0, ([1], [2], [3]), overwrite=True)
    t.append_block_ids(2, ([4], [5], [6]), overwrite=True)
    t.apply_staged_writes()
    idx = np.array([2, 0], np.int32)
    gathered = t.gather_block_tables(idx, num_reqs_padded=3)
    slots = t.compute_slot_mappings(idx, np.array([0, 1, 2], np.int32), np.array([3, 17]), 2)
    assert calls == ["clbt_multi_table_update_row"] * 2 + ["clbt_multi_table_enqueue_step"]
    assert gathered[0].tolist() == [[4] + [0] * 7, [1] + [0] * 7, [0] * 8]
    assert gathered[1][:2, 0].tolist() == [5, 2] and gathered[2][:, 0].tolist() == [6, 3, 0]
    # request 1 reads slot 0 (block 1 of 16): position 17 is past its one
    # block, so -1; request 0 reads slot 2: 4 * 16 + 3
    assert slots.tolist() == [[67, -1], [5 * 32 + 3, 2 * 32 + 17], [51, -1]]
    # a gather read before the slot mapping runs on its own
    del calls[:]
    gathered = t.gather_block_tables(idx[::-1].copy(), 2)
    assert gathered[0][:, 0].tolist() == [1, 4]
    t.compute_slot_mappings(idx, np.array([0, 1, 1], np.int32), np.array([0]), 1)
    assert calls == ["clbt_multi_table_enqueue_step", "clbt_multi_table_enqueue_step"]


def test_a_gather_holds_the_rows_applied_before_it(device):
    # MRV2's gather copies the rows at its call; writes applied after it
    # change block_tables, not what it gathered. Slot 0 holds [1] in every
    # group, then [1, 7] once the gather was asked for: the gathered row
    # stays [1, 0, ...], and the next gather sees [1, 7].
    t = tables(device)
    t.append_block_ids(0, ([1], [1], [1]), overwrite=True)
    t.apply_staged_writes()
    idx = np.array([0], np.int32)
    gathered = t.gather_block_tables(idx)
    t.append_block_ids(0, ([7], [7], [7]), overwrite=False)
    t.apply_staged_writes()
    assert [g[0, :3].tolist() for g in gathered] == [[1, 0, 0]] * 3
    again = t.gather_block_tables(idx)
    assert [g[0, :3].tolist() for g in again] == [[1, 7, 0]] * 3


def test_gather_arguments_are_checked(device):
    t = tables(device)
    with pytest.raises(clbt.Error, match="num_reqs_padded 1 is below num_reqs 2"):
        t.gather_block_tables(np.array([0, 1], np.int32), 1)
    with pytest.raises(clbt.Error, match="num_reqs_padded 5 exceeds max_num_reqs 4"):
        t.gather_block_tables(np.array([0], np.int32), 5)
    with pytest.raises(TypeError, match="idx_mapping has dtype int32 and shape \\(2, 2\\)"):
        t.gather_block_tables(np.zeros((2, 2), np.int32), 2)
    with pytest.raises(TypeError, match="positions has shape"):
        t.compute_slot_mappings(np.array([0], np.int32), np.array([0, 1], np.int32),
                                np.zeros((1, 1), np.int64))


def test_dummy_runs_zero_rows_and_pad_slots_in_place(device):
    t = tables(device, max_num_reqs=4)
    t.append_block_ids(0, ([1, 2], [3], [4]), overwrite=True)
    t.apply_staged_writes()
    idx = np.zeros(1, np.int32)
    t.gather_block_tables(idx, 1)
    t.compute_slot_mappings(idx, np.array([0, 2], np.int32), np.array([0, 16]), 2)
    assert t.input_block_tables[0][0, :2].tolist() == [1, 2]
    assert t.slot_mappings[0, :2].tolist() == [16, 32]
    # a staged write the dummy run must leave staged
    t.append_block_ids(1, ([9], [9], [9]), overwrite=True)
    t.apply_staged_writes()
    dummy = t.get_dummy_block_tables(num_reqs=1)
    assert [d.tolist() for d in dummy] == [[[0] * 8], [[0] * 8], [[0] * 8]]
    assert dummy[0].data_ptr() == t.input_block_tables[0].data_ptr()
    dummy_slots = t.get_dummy_slot_mappings(3)
    assert dummy_slots.shape == (3, 3) and (t.slot_mappings.numpy() == -1).all()
    assert dummy_slots.data_ptr() == t.slot_mappings.data_ptr()
    # the dummy runs committed nothing; the next real step does
    gathered = t.gather_block_tables(np.array([1], np.int32), 1)
    assert gathered[0][0, 0].item() == 9


def model_of(t, g, zero_tails):
    table = t.block_tables[g].gpu
    return TableModel(t.block_sizes[g], t.max_num_reqs, table.shape[1],
                      t.max_num_batched_tokens, kernel_block_size=t.kernel_block_sizes[g],
                      zero_gathered_tails=zero_tails)


@pytest.mark.parametrize("zero_tails", [False, True])
def test_persistent_loop_matches_the_model(device, zero_tails):
    # MRV2's call sequence: arrivals take a free slot (overwrite), running
    # requests grow (append), finished ones free their slot; each step
    # gathers through idx_mapping (shuffled, padded, with a padding entry)
    # and maps the batch's tokens.
    rng = random.Random(SEED + zero_tails)
    print("CLBT_TEST_SEED=%d" % SEED)
    t = vllm.BlockTables([16, 32], 6, 24, [8, 4], device, kernel_block_sizes=[16, 16],
                         zero_gathered_tails=zero_tails)
    models = [model_of(t, g, zero_tails) for g in range(2)]
    running, free, next_id = {}, list(range(6)), 1  # slot -> tokens so far
    for step in range(12):
        for slot in [s for s in running if rng.random() < 0.2]:
            del running[slot]
            free.append(slot)
        while free and rng.random() < 0.6:
            slot = free.pop(rng.randrange(len(free)))
            ids = ([next_id, next_id + 1], [next_id + 2])  # 32 tokens in each group
            next_id += 3
            t.append_block_ids(slot, ids, overwrite=True)
            for model, group_ids in zip(models, ids):
                model.add_row(group_ids, slot)
            running[slot] = rng.randrange(1, 31)
        for slot in running:  # decode: one token, one new block when full
            if running[slot] % 32 == 0 and running[slot] < 96:
                ids = ([next_id, next_id + 1], [next_id + 2])
                next_id += 3
                t.append_block_ids(slot, ids, overwrite=False)
                for model, group_ids in zip(models, ids):
                    model.append_row(group_ids, slot)
        t.apply_staged_writes()
        batch = list(running)
        rng.shuffle(batch)
        idx = np.array(batch + [-1] * (len(batch) < 6), np.int32)
        padded = min(len(idx) + rng.randrange(2), 6)
        positions = np.array([running[s] for s in batch] + [0] * (len(batch) < 6), np.int64)
        qsl = np.arange(len(idx) + 1, dtype=np.int32)
        gathered = t.gather_block_tables(idx, padded)
        slots = t.compute_slot_mappings(idx, qsl, positions)
        for g, model in enumerate(models):
            expected = model.step(len(idx), qsl, positions, idx, padded, gather=True)
            assert slots[g].tolist() == expected[:len(positions)].tolist(), (SEED, step, g)
            assert gathered[g].tolist() == model.gathered[:padded].tolist(), (SEED, step, g)
            assert t.num_blocks.np[g].tolist() == model.lengths.tolist()
        for slot in running:
            running[slot] += 1
    t.close()


def test_host_step_matches_the_device_step(device):
    t = tables(device, kernel_block_sizes=[16, 16, 8])
    t.append_block_ids(0, ([3, 4], [5], [6]), overwrite=True)
    t.append_block_ids(3, ([7], [8, 9], [10]), overwrite=True)
    idx, qsl, positions = np.array([3, -1, 0], np.int32), np.array([0, 2, 3, 4], np.int32), \
        np.array([0, 40, 5, 17])
    host_slots, host_gathered = t.compute_step_host(idx, qsl, positions, 4)
    tables_out, slots = t.step(idx, qsl, positions, 4)
    for g in range(3):
        assert slots[g].tolist() == host_slots[g][:4].tolist()
        assert tables_out[g].tolist() == host_gathered[g][:4].tolist()
    # by hand, group 1 (block 32 over 16): slot 3's KV 8, 9 are kernel
    # blocks 16 17 18 19; position 40 -> kernel block 18, offset 8
    # and slot 0's KV 5 kernel blocks 10 11: position 17 -> 11 * 16 + 1
    assert host_slots[1][:4].tolist() == [16 * 16, 18 * 16 + 8, -1, 11 * 16 + 1]


def test_close_and_context_manager(device):
    with tables(device) as t:
        t.append_block_ids(0, ([1], [1], [1]), overwrite=True)
        view = t.slot_mappings[0]
    assert "max_num_reqs=4" in repr(t)
    with pytest.raises(clbt.Error, match="closed"):
        t.apply_staged_writes()
    with pytest.raises(clbt.Error, match="closed"):
        t.append_block_ids(0, ([1], [1], [1]), overwrite=True)
    assert view.tolist()[:2] == [-1, -1]  # the view keeps its buffer


def test_sizes_a_block_count_divides_by_are_refused_by_name(device):
    # A block of 0 tokens and cp_size 0 were a ZeroDivisionError
    # (max_model_len's cdiv(max_model_len, block_size x cp_size)).
    for make, words in (
            (lambda: vllm.BlockTables([16, 0], 4, 64, [8, 8], device), "block_sizes[1] is 0"),
            (lambda: vllm.BlockTables([0], 4, 64, None, device, max_model_len=100),
             "block_sizes[0] is 0"),
            (lambda: vllm.BlockTables([16], 4, 64, None, device, max_model_len=100, cp_size=0),
             "cp_size is 0"),
            (lambda: vllm.BlockTable(0, 4, 8, 64, False, device), "block_size is 0"),
            (lambda: vllm.MultiGroupBlockTable(4, 64, False, device, [16, 0], [16, 0], [8, 8]),
             "groups[1]: block_size is 0")):
        with pytest.raises(clbt.Error) as refused:
            make()
        assert refused.value.status == "CLBT_INVALID_CONFIG"
        assert words in refused.value.message and "must be >= 1" in refused.value.message
