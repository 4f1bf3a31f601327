"""The vLLM facade: driven through a serving loop's call sequence and
through random operations, and compared with the independent model of
model.py (never with clbt's own host reference)."""
import os
import random

import numpy as np
import pytest

import clbt
from clbt import vllm
from model import Refused, TableModel

try:
    import torch
except ImportError:  # the facade's arrays are numpy's then
    torch = None

SEED = int(os.environ.get("CLBT_TEST_SEED", random.randrange(1 << 30)))


def test_widths_and_attributes(device):
    # get_block_table_width: 10 blocks of 16 -> 16 (128 tokens = 8 blocks);
    # 5 of 32 over 16 -> 8 KV blocks -> 16; no alignment: 10
    assert vllm.get_block_table_width(10, 16) == 16
    assert vllm.get_block_table_width(5, 32, 16) == 16
    assert vllm.get_block_table_width(10, 16, token_alignment=None) == 10
    with pytest.raises(clbt.Error, match="token_alignment must be positive"):
        vllm.get_block_table_width(10, 16, token_alignment=0)
    with pytest.raises(clbt.Error, match="kernel_block_size 5 does not divide block_size 16"):
        vllm.get_block_table_width(10, 16, 5)
    table = vllm.BlockTable(32, 4, 3, 8, False, device, 16, 1)
    assert (table.block_size, table.kv_cache_block_size, table.blocks_per_kv_block) == (16, 32, 2)
    assert table.use_hybrid_blocks and table.max_num_blocks_per_req == 6
    assert table.max_num_reqs == 4 and table.max_num_batched_tokens == 8
    table.append_row([1, 2], 3)
    assert table.num_blocks_per_row.tolist() == [0, 0, 0, 4]
    assert table.get_numpy_array()[3].tolist() == [2, 3, 4, 5, 0, 0]
    assert table.block_table.np[3, 0] == 2
    with pytest.raises(ValueError):
        table.get_numpy_array()[0, 0] = 1  # read-only: rows change through the operations
    assert vllm.BlockTable.map_to_kernel_blocks(np.array([0, 1, 2]), 2,
                                                np.arange(2).reshape(1, -1)).tolist() == \
        [0, 1, 2, 3, 4, 5]
    assert vllm.PAD_SLOT_ID == -1
    with pytest.raises(clbt.Error, match="max_num_blocks length \\(1\\) must match"):
        vllm.MultiGroupBlockTable(4, 8, False, device, [16, 32], [16, 32], [4])
    table.close()


def test_device_tensor_views(device):
    table = vllm.BlockTable(16, 4, 4, 8, False, device, 16, 1)
    table.append_row([5, 6], 0)
    table.commit_block_table(1)
    tensor = table.get_device_tensor(1)
    assert isinstance(tensor, clbt.DeviceArray) and tensor.shape == (1, 4)
    assert tensor.tolist() == [[5, 6, 0, 0]]  # the read commits what is owed
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 17]))
    assert table.slot_mapping.np[:3].tolist() == [80, 97, -1]
    assert table.slot_mapping.gpu[:3].tolist() == [80, 97, -1]
    table.close()


def hand_table(device, **keywords):
    """vLLM's test shape: 8 rows of 32 blocks, 2048 tokens."""
    settings = dict(block_size=16, max_num_reqs=8, max_num_blocks_per_req=32,
                    max_num_batched_tokens=2048, pin_memory=False, device=device,
                    kernel_block_size=16, cp_kv_cache_interleave_size=1)
    settings.update(keywords)
    return vllm.BlockTable(**settings)


def run_batch(table, rows, positions):
    """add_row for each request's KV blocks, commit, map; returns the whole
    slot mapping read through .gpu.cpu(), as vLLM's tests read it."""
    for row, ids in enumerate(rows):
        table.add_row(ids, row)
    table.commit_block_table(len(rows))
    qsl = np.cumsum([0] + [len(p) for p in positions]).astype(np.int32)
    flat = np.array([p for ps in positions for p in ps], np.int64)
    if torch is None:
        table.compute_slot_mapping(len(rows), qsl, flat)
        return table.slot_mapping.gpu.cpu()  # numpy without torch
    table.compute_slot_mapping(len(rows), torch.from_numpy(qsl), torch.from_numpy(flat))
    out = table.slot_mapping.gpu.cpu()
    assert isinstance(out, torch.Tensor) and out.dtype == torch.int64
    return out.numpy()


def test_slots_by_hand_with_the_pad_tail(device):
    # block 16, blocks 5 6 7: positions 0 15 16 47 -> 80 95 96 127; a second
    # request's row [7, 4]: position 20 -> 4 * 16 + 4 = 68.
    out = run_batch(hand_table(device), [[5, 6, 7], [7, 4]], [[0, 15, 16, 47], [20]])
    assert out[:5].tolist() == [80, 95, 96, 127, 68]
    assert (out[5:] == -1).all() and out.size == 2048


def test_dcp_layout_set_after_construction_takes_effect(device):
    # vLLM's model runner (and its tests) set dcp_world_size and dcp_rank on
    # the table after making it. Rank 1 of 2, block 16: a virtual block of
    # 32 tokens, rank 1 owns the odd offsets; blocks [5, 6]: positions 1 3 5
    # -> 80 81 82, position 33 -> 96; the even ones are other ranks'.
    table = hand_table(device)
    table.dcp_world_size = 2
    table.dcp_rank = 1
    assert (table.dcp_world_size, table.dcp_rank) == (2, 1)
    out = run_batch(table, [[5, 6]], [[0, 1, 2, 3, 4, 5, 32, 33]])
    assert out[:8].tolist() == [-1, 80, -1, 81, -1, 82, -1, 96]
    # With rows in it the layout can no longer change: refused, with the
    # table as it was.
    table.dcp_rank = 0
    with pytest.raises(clbt.Error, match="can change only while every row is empty"):
        table.append_row([9], 1)
    assert (table.dcp_world_size, table.dcp_rank) == (2, 1)
    assert table.num_blocks_per_row[:2].tolist() == [2, 0]


@pytest.mark.parametrize("world, interleave", [(2, 1), (4, 1), (2, 4), (4, 4)])
def test_every_token_has_exactly_one_rank(device, world, interleave):
    owners = np.zeros(96, np.int64)
    for rank in range(world):
        table = hand_table(device, cp_kv_cache_interleave_size=interleave)
        table.dcp_world_size, table.dcp_rank = world, rank
        model = TableModel(16, 8, 32, 2048, cp_world_size=world, cp_rank=rank,
                           interleave=interleave)
        model.add_row([1, 2, 3], 0)
        model.commit(1)
        out = run_batch(table, [[1, 2, 3]], [list(range(96))])
        expected = model.slot_mapping(1, np.array([0, 96]), np.arange(96))
        assert out.tolist() == expected.tolist()
        owners += out[:96] != -1
        table.close()
    assert owners.tolist() == [1] * 96


def test_layout_and_sizes_fixed_at_creation_refuse_assignment(device):
    table = hand_table(device, block_size=32)
    for name in ("block_size", "kv_cache_block_size", "blocks_per_kv_block",
                 "max_num_blocks_per_req", "max_num_reqs", "max_num_batched_tokens",
                 "use_hybrid_blocks"):
        before = getattr(table, name)
        with pytest.raises(AttributeError, match="fixed when the table is made"):
            setattr(table, name, 8)
        assert getattr(table, name) == before
    # pcp is vLLM's too, and its kernel reads it no more than clbt does
    table.pcp_world_size = 2
    assert table.pcp_world_size == 2


@pytest.mark.parametrize("kv, kernel", [(32, 16), (64, 16)])
def test_hybrid_blocks_map_kernel_blocks(device, kv, kernel):
    table = hand_table(device, block_size=kv, kernel_block_size=kernel)
    k = kv // kernel
    assert table.use_hybrid_blocks and table.blocks_per_kv_block == k
    assert table.block_size == kernel and table.kv_cache_block_size == kv
    assert table._kernel_block_arange.tolist() == [list(range(k))]
    model = TableModel(kv, 8, table.max_num_blocks_per_req, 2048, kernel_block_size=kernel)
    model.add_row([5, 9, 2], 0)
    model.commit(1)
    out = run_batch(table, [[5, 9, 2]], [list(range(3 * kv))])
    assert out.tolist() == model.slot_mapping(1, np.array([0, 3 * kv]),
                                              np.arange(3 * kv)).tolist()
    # KV blocks [5, 9] of 32 over kernel blocks of 16 are kernel blocks
    # 10 11 18 19: positions 0 15 16 31 32 47 48 -> 160 175 176 191 288 303 304
    if kv == 32:
        table.clear()
        out = run_batch(table, [[5, 9]], [[0, 15, 16, 31, 32, 47, 48]])
        assert out[:7].tolist() == [160, 175, 176, 191, 288, 303, 304]
        assert table.get_numpy_array()[0, :4].tolist() == [10, 11, 18, 19]
    assert table._kernel_block_arange is not None
    assert hand_table(device)._kernel_block_arange is None


def test_slot_mapping_none_mode_leaves_the_buffer_alone(device):
    table = hand_table(device, slot_mapping_mode=vllm.SlotMappingMode.NONE)
    table.slot_mapping.gpu.fill_(-12345)
    out = run_batch(table, [[5, 6]], [[0, 1, 2]])
    assert (out == -12345).all()


def test_tail_of_padding_past_a_1024_tile(device):
    table = hand_table(device, max_num_batched_tokens=2100, max_num_blocks_per_req=65)
    out = run_batch(table, [list(range(1, 66))], [list(range(1030))])
    assert out[1023:1030].tolist() == list(range(1039, 1046))  # block b is slots 16b..
    assert out[:16].tolist() == list(range(16, 32)) and (out[1030:] == -1).all()


def test_move_row_clears_the_vacated_row(device):
    table = vllm.BlockTable(block_size=16, max_num_reqs=4, max_num_blocks_per_req=8,
                            max_num_batched_tokens=64, pin_memory=False, device=device,
                            cp_kv_cache_interleave_size=1)  # kernel_block_size: block_size
    table.add_row([7, 8, 9], row_idx=0)
    table.add_row([4, 5], row_idx=1)
    table.move_row(1, 0)
    assert table.block_table.np[0, :3].tolist() == [4, 5, 9]  # past the length: kept
    assert table.num_blocks_per_row[:2].tolist() == [2, 0]
    assert not table.block_table.np[1].any()
    assert table.num_blocks_per_row.dtype == np.int32  # vLLM's dtype


def test_widths_as_vllm_computes_them(device):
    # 1875 blocks of 64 align to 1876 (128 tokens = 2 blocks); 235 blocks of
    # 256 over kernel blocks of 64: 235 (256 is already a multiple of 128) x 4
    assert vllm.get_block_table_width(1875, 64, 64) == 1876
    assert vllm.get_block_table_width(235, 256, 64) == 940
    one = vllm.MultiGroupBlockTable(2, 8, False, device, [64], [64], [1875])
    rows = one[0].get_device_tensor(2)
    assert rows.shape == (2, 1876) and rows.stride() == (1876, 1)
    assert not np.asarray(rows.cpu()).any()  # zero rows, read as vLLM's tensors are
    two = vllm.MultiGroupBlockTable(1, 1, False, device, [256], [64], [235])
    assert two[0].get_device_tensor(1).shape[1] == 940 == two[0].max_num_blocks_per_req


def widths(table):
    """Each group's row width in kernel blocks, as the device rows have it."""
    return [group.get_device_tensor(1).shape[1] for group in table.block_tables]


def test_the_seeds_constructor_positionally_and_by_keyword(device):
    # get_block_table_width: 13 blocks of 16 -> 16 (128 tokens = 8 blocks);
    # 5 of 48 -> 8 (128 / gcd(128, 48) = 8 blocks)
    arguments = (4, 64, False, device, [16, 48], [16, 48], [13, 5])
    names = ("max_num_reqs", "max_num_batched_tokens", "pin_memory", "device", "block_sizes",
             "kernel_block_sizes", "max_num_blocks")
    for table, interleave in (
            (vllm.MultiGroupBlockTable(*arguments), 1),
            (vllm.MultiGroupBlockTable(**dict(zip(names, arguments))), 1),
            (vllm.MultiGroupBlockTable(*arguments[:4], block_sizes=[16, 48],
                                       kernel_block_sizes=[16, 48], max_num_blocks=[13, 5],
                                       cp_kv_cache_interleave_size=2), 2)):
        assert widths(table) == [16, 8] == [t.max_num_blocks_per_req for t in table]
        assert table[0].max_num_reqs == 4 and table[0].max_num_batched_tokens == 64
        assert table[1].cp_kv_cache_interleave_size == interleave
        table.close()


def test_vllm_01edfd0s_max_model_len_constructor(device):
    # vLLM at 01edfd0: MultiGroupBlockTable(max_num_reqs, max_model_len,
    # max_num_batched_tokens, pin_memory, device, block_sizes,
    # kernel_block_sizes, max_num_blocks=None, cp_kv_cache_interleave_size=1).
    # Blocks cdiv(200, block_size x dcp_world_size), then a multiple of
    # 128 // block_size when block_size <= 128, times the kernel blocks per
    # block: 16 -> 13 -> 16; 32 over 16 -> 7 -> 8 -> 16 kernel blocks;
    # 48 -> 5 -> 6 (128 // 48 = 2; the seed's rule would give 8);
    # 256 -> 1, not aligned.
    arguments = (4, 200, 64, False, device, [16, 32, 48, 256], [16, 16, 48, 256])
    names = ("max_num_reqs", "max_model_len", "max_num_batched_tokens", "pin_memory", "device",
             "block_sizes", "kernel_block_sizes")
    for table in (vllm.MultiGroupBlockTable(*arguments),
                  vllm.MultiGroupBlockTable(**dict(zip(names, arguments))),
                  vllm.MultiGroupBlockTable(*arguments[:5], block_sizes=arguments[5],
                                            kernel_block_sizes=arguments[6])):
        assert widths(table) == [16, 16, 6, 1]
        assert [t.max_num_blocks_per_req for t in table] == [16, 16, 6, 1]
        table.close()
    # max_num_blocks given: 5 blocks of 16 -> 8, whatever max_model_len;
    # the interleave next to it, positionally and by keyword
    for table in (vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16], [5], 4),
                  vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16],
                                            max_num_blocks=[5], cp_kv_cache_interleave_size=4)):
        assert widths(table) == [8] and table[0].cp_kv_cache_interleave_size == 4
        table.close()
    # each DCP rank keeps a share: cdiv(200, 16 x 2) = 7 -> 8
    with vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16],
                                   dcp_world_size=2) as table:
        assert widths(table) == [8] and table.dcp_world_size == 2
    # the rows work as any: KV block 3 of 16 tokens, 5 of 32 over 16
    # (kernel blocks 10, 11): positions 0 and 15 at 48, 63 and 160, 175
    with vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16, 32], [16, 16]) as table:
        table.add_row(([3], [5]), 0)
        table.commit_block_table(1)
        table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 15]))
        assert table[0].slot_mapping.gpu[:3].tolist() == [48, 63, -1]
        assert table[1].slot_mapping.gpu[:3].tolist() == [160, 175, -1]


def test_vllm_a4cd9d0s_max_model_len_constructor(device):
    # vLLM at a4cd9d0: the same, with num_speculative_tokens=0 where 01edfd0
    # has max_num_blocks: max(cdiv(max_model_len, block_size x
    # dcp_world_size), 1 + num_speculative_tokens) blocks, not aligned.
    # 200 tokens: 16 -> 13; 32 over 16 -> 7 -> 14 kernel blocks.
    for table in (vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16, 32], [16, 16], 0),
                  vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16, 32], [16, 16],
                                            num_speculative_tokens=0)):
        assert widths(table) == [13, 14]
        table.close()
    # 16 tokens with 3 speculative: max(1, 4) = 4; interleave positionally
    names = ("max_num_reqs", "max_model_len", "max_num_batched_tokens", "pin_memory", "device",
             "block_sizes", "kernel_block_sizes", "num_speculative_tokens",
             "cp_kv_cache_interleave_size")
    arguments = (4, 16, 64, False, device, [16], [16], 3, 2)
    for table in (vllm.MultiGroupBlockTable(*arguments),
                  vllm.MultiGroupBlockTable(**dict(zip(names, arguments)))):
        assert widths(table) == [4] and table[0].cp_kv_cache_interleave_size == 2
        table.close()


def test_a_constructor_call_of_neither_form_is_refused_by_name(device):
    with pytest.raises(clbt.TypeMismatchError, match="takes vLLM's arguments, .* or "
                       "\\(max_num_reqs, max_model_len, .*missing a required argument"):
        vllm.MultiGroupBlockTable(4, 64)
    with pytest.raises(TypeError, match="max_num_blocks is .*; a list of one entry per group"):
        vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16], 2,
                                  num_speculative_tokens=1)
    with pytest.raises(clbt.TypeMismatchError, match="max_num_blocks .* or "
                       "num_speculative_tokens .*, not both"):
        vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16], [5],
                                  num_speculative_tokens=1)
    with pytest.raises(clbt.Error, match="block_sizes\\[1\\] is 0; it must be >= 1") as error:
        vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16, 0], [16, 16])
    assert error.value.status == "CLBT_INVALID_CONFIG"
    with pytest.raises(clbt.Error, match="dcp_world_size is 0; it must be >= 1"):
        vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16], [16], dcp_world_size=0)
    with pytest.raises(clbt.Error, match="max_num_blocks length \\(1\\) must match"):
        vllm.MultiGroupBlockTable(4, 200, 64, False, device, [16, 32], [16, 16], [5])


def test_vllms_block_table_constructor_positionally_and_by_keyword(device):
    # BlockTable(block_size, max_num_reqs, max_num_blocks_per_req,
    # max_num_batched_tokens, pin_memory, device, kernel_block_size,
    # cp_kv_cache_interleave_size), as vLLM 01edfd0 and a4cd9d0 (and the
    # seed) have it: 3 blocks of 32 over 16 -> 6 kernel blocks, unaligned
    arguments = (32, 4, 3, 8, False, device, 16, 2)
    names = ("block_size", "max_num_reqs", "max_num_blocks_per_req", "max_num_batched_tokens",
             "pin_memory", "device", "kernel_block_size", "cp_kv_cache_interleave_size")
    for table in (vllm.BlockTable(*arguments), vllm.BlockTable(**dict(zip(names, arguments)))):
        assert table.max_num_blocks_per_req == 6 == table.get_device_tensor(1).shape[1]
        assert (table.block_size, table.cp_kv_cache_interleave_size) == (16, 2)
        table.close()


def test_public_names_are_vllms_and_clbts_documented_ones():
    # vLLM's names (its block tables, reshape_and_cache_flash,
    # unified_attention and KVQuantMode) and clbt's documented
    # RowCapacityError; not the modules and helpers it runs on
    documented = {"BlockTable", "BlockTables", "KVQuantMode", "MultiGroupBlockTable",
                  "PAD_SLOT_ID", "RowCapacityError", "SlotMappingMode",
                  "get_block_table_width", "reshape_and_cache_flash", "unified_attention"}
    assert set(vllm.__all__) == documented
    assert {name for name in dir(vllm) if not name.startswith("_")} == documented
    names = {}
    exec("from clbt.vllm import *", names)
    assert set(names) - {"__builtins__"} == documented


def test_device_rows_written_through_the_view(device):
    # vLLM's code writes device tables with copy_ (the DSA indexer's test
    # does); the write goes through clbt's queue and reads back.
    table = vllm.MultiGroupBlockTable(2, 8, False, device, [64], [64], [4])
    rows = table[0].get_device_tensor(2)
    rows.copy_(np.arange(2 * rows.shape[1], dtype=np.int32).reshape(2, -1))
    assert rows[1, :3].tolist() == [rows.shape[1], rows.shape[1] + 1, rows.shape[1] + 2]


def test_updates_are_checked_when_given(device):
    # Each row update is a C call, which checks every group before it
    # changes any: a bad one raises at once and changes nothing.
    table = vllm.MultiGroupBlockTable(4, 8, False, device, [16, 32], [16, 16], [8, 4])
    table.append_row(([1], [2]), 0)
    with pytest.raises(TypeError, match="block_ids\\[0\\] is an int; a 1-D sequence"):
        table.append_row([1, 2], 1)  # two ids, not one list per group
    with pytest.raises(ValueError, match="block_ids has 1 entries; the table has 2 groups"):
        table.append_row([[1]], 1)
    with pytest.raises(TypeError, match="block_ids\\[0\\] is an int"):
        table.append_row((3, [4]), 1)
    with pytest.raises(TypeError, match="float. object cannot be interpreted as an integer"):
        table.append_row(([1.5], [4]), 1)
    with pytest.raises(TypeError, match="has shape \\(2, 2\\)"):
        table.append_row((np.ones((2, 2), np.int32), [4]), 1)
    with pytest.raises(clbt.Error, match="row 9 is out of range: max_num_reqs is 4") as refused:
        table.append_row(([1], [2]), 9)
    assert refused.value.status == "CLBT_ROW_OUT_OF_RANGE"
    with pytest.raises(clbt.Error, match="block_ids\\[0\\] = -1 is outside") as refused:
        table.add_row(([-1], [2]), 1)
    assert refused.value.status == "CLBT_INVALID_BLOCK_ID"
    with pytest.raises(clbt.Error, match=r"groups\[1\] .*: n = 8 blocks of 2 kernel blocks "
                       "would overflow row 0: it holds 2 of width 8") as refused:
        table.append_row(([1], list(range(8))), 0)  # group 1: (1 + 8 blocks) x 2 > 8
    assert refused.value.status == "CLBT_ROW_OVERFLOW"
    table.append_row(([3], [4, 5]), 0)
    assert table[0].num_blocks_per_row[0] == 2 and table[1].num_blocks_per_row[0] == 6
    assert table[1].block_table.np[0, :6].tolist() == [4, 5, 8, 9, 10, 11]
    assert not table[0].num_blocks_per_row[1:].any()


def test_one_step_per_commit_and_slot_mapping(device, monkeypatch):
    # Each row update is one C call for every group; commit_block_table
    # owes the commit; compute_slot_mapping runs it with every group's slot
    # mapping as one clbt step.
    calls = []
    for name in ("clbt_multi_table_enqueue_step", "clbt_multi_table_enqueue_commit",
                 "clbt_multi_table_enqueue_slot_mapping", "clbt_multi_table_append_rows",
                 "clbt_multi_table_add_rows", "clbt_multi_table_update_row"):
        function = getattr(clbt._library.lib, name)
        monkeypatch.setattr(clbt._library.lib, name,
                            lambda *args, _f=function, _n=name: calls.append(_n) or _f(*args))
    table = vllm.MultiGroupBlockTable(4, 8, False, device, [16, 32], [16, 16], [8, 4])
    for row in range(3):
        table.add_row(([row + 1], [row + 4]), row)
    table.append_row(([7], [8]), 0)
    table.commit_block_table(3)
    table.compute_slot_mapping(3, np.array([0, 1, 2, 3], np.int32), np.array([16, 0, 0]))
    assert calls == ["clbt_multi_table_update_row"] * 4 + ["clbt_multi_table_enqueue_step"]
    assert table[0].slot_mapping.gpu[:3].tolist() == [7 * 16, 2 * 16, 3 * 16]
    assert table[1].slot_mapping.gpu[:3].tolist() == [9 * 16, 10 * 16, 12 * 16]


class Scheduler:
    """A serving loop's bookkeeping, as vLLM's scheduler and input batch
    keep it: requests with their blocks per group, admitted, prefilled in
    chunks, decoded a token a step, finished, and the batch condensed by
    moving the last row into a finished one's place."""

    def __init__(self, rng, block_sizes, max_reqs, max_tokens, max_len):
        self.rng, self.block_sizes = rng, block_sizes
        self.max_reqs, self.max_tokens, self.max_len = max_reqs, max_tokens, max_len
        self.free = [list(range(1, 4000)) for _ in block_sizes]
        self.running = []  # row r: dict(total, done, blocks per group)

    def blocks_needed(self, request, tokens):
        return [-(-tokens // size) - len(blocks)
                for size, blocks in zip(self.block_sizes, request["blocks"])]

    def step(self, table, models):
        """One step through the facade; returns (num_reqs, qsl, positions)."""
        # finish: vLLM frees the row and condenses, moving the last row in
        for row in reversed(range(len(self.running))):
            if self.running[row]["done"] == self.running[row]["total"]:
                for free, blocks in zip(self.free, self.running[row]["blocks"]):
                    free.extend(blocks)
                last = len(self.running) - 1
                for target in [table] + models:
                    target.clear_row(row)  # remove_request
                    if row != last:
                        target.move_row(last, row)  # condense
                self.running[row] = self.running[last]
                self.running.pop()
        # reorder: decodes before prefills, by swaps
        if len(self.running) >= 2 and self.rng.random() < 0.3:
            a, b = self.rng.sample(range(len(self.running)), 2)
            for target in [table] + models:
                target.swap_row(a, b)
            self.running[a], self.running[b] = self.running[b], self.running[a]
        # admit
        while len(self.running) < self.max_reqs and self.rng.random() < 0.5:
            self.running.append(dict(total=self.rng.randrange(1, self.max_len), done=0,
                                     blocks=[[] for _ in self.block_sizes], new=True))
        budget, qsl, positions = self.max_tokens, [0], []
        for row, request in enumerate(self.running):
            tokens = min(request["total"] - request["done"], max(budget, 0),
                         self.rng.randrange(1, 40))
            new = [[free.pop(self.rng.randrange(len(free))) for _ in range(count)]
                   for free, count in zip(self.free, self.blocks_needed(request, request["done"] + tokens))]
            for blocks, ids in zip(request["blocks"], new):
                blocks.extend(ids)
            if request.pop("new", False):
                table.add_row(tuple(new), row)
                for model, ids in zip(models, new):
                    model.add_row(ids, row)
            elif any(new):
                table.append_row(tuple(new), row)
                for model, ids in zip(models, new):
                    model.append_row(ids, row)
            positions.extend(range(request["done"], request["done"] + tokens))
            request["done"] += tokens
            budget -= tokens
            qsl.append(len(positions))
        return len(self.running), np.array(qsl, np.int32), np.array(positions, np.int64)


def test_serving_loop_matches_the_model(device):
    print("seed", SEED)
    rng = random.Random(SEED)
    block_sizes, kernel_sizes, max_blocks = [16, 32], [16, 16], [16, 8]
    table = vllm.MultiGroupBlockTable(8, 64, False, device, block_sizes, kernel_sizes,
                                      max_blocks)
    models = [TableModel(b, 8, table[g].max_num_blocks_per_req, 64, kernel_block_size=k)
              for g, (b, k) in enumerate(zip(block_sizes, kernel_sizes))]
    scheduler = Scheduler(rng, block_sizes, 8, 64, 250)
    checked = 0
    for step in range(60):
        num_reqs, qsl, positions = scheduler.step(table, models)
        table.commit_block_table(num_reqs)
        table.compute_slot_mapping(num_reqs, qsl, positions)
        for g, model in enumerate(models):
            model.commit(num_reqs)
            expected = model.slot_mapping(num_reqs, qsl, positions)
            got = table[g].slot_mapping.np
            assert got.tolist() == expected.tolist(), "seed %d step %d group %d" % (SEED, step, g)
            assert table[g].num_blocks_per_row.tolist() == model.lengths.tolist()
            checked += len(positions)
    assert checked > 0


OPERATIONS = ("append_row", "add_row", "clear_row", "move_row", "swap_row", "commit",
              "append_rows", "clear")


def random_ids(rng, count):
    # mostly valid ids; now and then a negative one, which must be refused
    return [rng.randrange(-1 if rng.random() < 0.05 else 0, 1 << 20) for _ in range(count)]


@pytest.mark.parametrize("kernel_block_size", [16, 8])
def test_random_operations_match_the_model(device, kernel_block_size):
    seed = SEED + kernel_block_size
    print("seed", seed)
    rng = random.Random(seed)
    rows, blocks, tokens = 6, 5, 32
    table = vllm.BlockTable(16, rows, blocks, tokens, False, device, kernel_block_size, 1)
    model = TableModel(16, rows, table.max_num_blocks_per_req, tokens,
                       kernel_block_size=kernel_block_size)
    for step in range(400):
        operation = rng.choice(OPERATIONS)
        row, other = rng.randrange(rows + 1), rng.randrange(rows)  # row may be out of range
        if operation in ("append_row", "add_row"):
            ids = random_ids(rng, rng.randrange(4))
            args = (ids, row)
        elif operation == "append_rows":
            entries = [rng.randrange(rows + (rng.random() < 0.05)) for _ in range(rng.randrange(4))]
            counts = [rng.randrange(3) for _ in entries]
            args = (entries, counts, random_ids(rng, sum(counts)))
        elif operation in ("move_row", "swap_row"):
            args = (row, other)
        elif operation == "commit":
            args = (rng.randrange(rows + 1),)
        else:
            args = (row,) if operation == "clear_row" else ()
        expect = apply_to_model(model, operation, args)
        call = getattr(table, "commit_block_table" if operation == "commit" else operation)
        if expect is None:
            call(*args)
        else:
            with pytest.raises(clbt.Error) as raised:
                call(*args)
            assert raised.value.status == expect, (seed, step, operation, args)
        context = (seed, step, operation, args)
        assert table.get_numpy_array().tolist() == model.rows.tolist(), context
        assert table.num_blocks_per_row.tolist() == model.lengths.tolist(), context
        if operation == "commit" or step % 50 == 0:
            num_reqs = rng.randrange(1, rows + 1)
            table.commit_block_table(num_reqs)
            model.commit(num_reqs)
            lengths = [rng.randrange(4) for _ in range(num_reqs)]
            qsl = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            positions = np.array([rng.randrange(-2, blocks * 16 + 8) for _ in range(qsl[-1])],
                                 np.int64)
            table.compute_slot_mapping(num_reqs, qsl, positions)
            assert table.slot_mapping.np.tolist() == \
                model.slot_mapping(num_reqs, qsl, positions).tolist(), context


def apply_to_model(model, operation, args):
    """Applies an operation to the model; returns the status clbt must
    refuse it with, or None. A refused batch leaves the model unchanged."""
    try:
        if operation == "append_rows":
            entries, counts, ids = args
            trial = TableModel.__new__(TableModel)
            trial.__dict__.update({k: v.copy() if isinstance(v, np.ndarray) else v
                                   for k, v in model.__dict__.items()})
            start = 0
            for row, count in zip(entries, counts):
                trial.append_row(ids[start:start + count], row)
                start += count
            model.__dict__.update(trial.__dict__)
        elif operation in ("append_row", "add_row"):
            getattr(model, operation)(*args)
        elif operation == "commit":
            model.commit(*args)
        else:
            getattr(model, operation)(*args)
    except Refused as refusal:
        return refusal.args[0]
    return None


def test_batch_updates_cannot_read_past_their_arrays(device):
    # Issue 19: append_rows([1], [8], [5]) copied 7 words from past the
    # one id into the row. Every length is checked before C reads.
    table = vllm.BlockTable(16, 4, 8, 8, False, device, 16, 1)
    with pytest.raises(clbt.Error, match=r"block_ids holds 1 values; sum\(counts\) needs 8"):
        table.append_rows([1], [8], [5])
    with pytest.raises(clbt.Error, match=r"counts holds 2 entries; rows 1"):
        table.append_rows([1], [1, 1], [5, 6])
    with pytest.raises(TypeError, match="rows is an int; a 1-D sequence of ints expected"):
        table.append_rows(1, [1], [5])
    with pytest.raises(TypeError, match="rows: .*; a flat sequence of ints expected"):
        table.add_rows([[1]], [[1]], [[5]])
    with pytest.raises(clbt.Error, match="rows holds -1") as refused:
        table.append_rows([-1], [1], [5])
    assert refused.value.status == "CLBT_ROW_OUT_OF_RANGE"
    assert not table.num_blocks_per_row.any() and not table.get_numpy_array().any()
    multi = vllm.MultiGroupBlockTable(4, 8, False, device, [16, 32], [16, 16], [8, 4])
    with pytest.raises(clbt.Error, match=r"block_ids\[1\] holds 0 values; sum\(counts\[1\]\) needs 2"):
        multi.append_rows([0, 1], [[1, 0], [1, 1]], [[5], []])
    with pytest.raises(ValueError, match="counts has 1 entries; the table has 2 groups"):
        multi.append_rows([0], [[1]], [[5]])
    multi.append_rows(np.array([0, 1], np.uint32), [[1, 0], [1, 1]], [[5], [6, 7]])
    assert multi[1].get_numpy_array()[:2, :2].tolist() == [[12, 13], [14, 15]]
    with pytest.raises(TypeError, match="positions has shape"):
        multi.compute_slot_mapping(1, np.array([0, 1], np.int32), np.zeros((1, 1), np.int64))


@pytest.mark.parametrize("how", ["add_row", "add_rows"])
def test_a_group_replace_changes_that_group_alone(device, how):
    # m[1].add_row([9], 0) replaces group 1's row 0 and nothing else: group
    # 0 keeps [1, 2]; group 1 is [9] (column 1 keeps its old 4, past the
    # length). Block 16: group 0's positions 0 17 -> 16, 2 * 16 + 1 = 33;
    # group 1's -> 9 * 16 = 144, and -1 past its one block.
    table = vllm.MultiGroupBlockTable(4, 64, False, device, [16, 16], [16, 16], [8, 8])
    table.append_row([[1, 2], [3, 4]], 0)
    if how == "add_row":
        table[1].add_row([9], 0)
    else:
        table[1].add_rows([0], [1], [9])
    # the lengths an update is checked against: group 0 holds 2 of its 8
    with pytest.raises(clbt.Error, match=r"groups\[0\] .*: n = 7 blocks of 1 kernel blocks "
                       "would overflow row 0: it holds 2 of width 8") as refused:
        table.append_row([list(range(7)), []], 0)
    assert refused.value.status == "CLBT_ROW_OVERFLOW"
    assert table[0].num_blocks_per_row[:2].tolist() == [2, 0]
    assert table[0].get_numpy_array()[0, :3].tolist() == [1, 2, 0]
    assert table[1].num_blocks_per_row[:2].tolist() == [1, 0]
    assert table[1].get_numpy_array()[0, :3].tolist() == [9, 4, 0]
    table.commit_block_table(1)
    for g in range(2):
        table[g].slot_mapping.gpu.fill_(-7)  # poison: unwritten slots show
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 17], np.int64))
    assert table[0].slot_mapping.gpu[:3].tolist() == [16, 33, -1]
    assert table[1].slot_mapping.gpu[:3].tolist() == [144, -1, -1]
    # a group's replace recorded between every-group appends keeps the order
    table[0].add_row([5], 1)
    table.append_row([[6], [7]], 1)
    table[1].add_row([8], 1)
    assert table[0].get_numpy_array()[1, :3].tolist() == [5, 6, 0]
    assert table[1].get_numpy_array()[1, :3].tolist() == [8, 0, 0]
    assert table[0].num_blocks_per_row[:2].tolist() == [2, 2]
    assert table[1].num_blocks_per_row[:2].tolist() == [1, 1]
    table.close()


def test_updates_record_the_ids_as_they_were_at_the_call(device):
    # Row updates reach C later; what the caller does with its lists after
    # the call changes nothing. Block 16, row [5, 6]: positions 0 16 32 ->
    # 80 96, and -1 past the row's two blocks.
    table = vllm.BlockTable(16, 4, 8, 64, False, device)
    ids = [5, 6]
    table.append_row(ids, 0)
    ids.append(7)
    ids[0] = 99
    table.commit_block_table(1)
    table.slot_mapping.gpu.fill_(-7)  # poison
    table.compute_slot_mapping(1, np.array([0, 3], np.int32), np.array([0, 16, 32], np.int64))
    assert table.get_numpy_array()[0, :3].tolist() == [5, 6, 0]
    assert table.num_blocks_per_row[:1].tolist() == [2]
    assert table.slot_mapping.gpu[:4].tolist() == [80, 96, -1, -1]
    table.close()
    multi = vllm.MultiGroupBlockTable(4, 64, False, device, [16, 16], [16, 16], [8, 8])
    groups = [[1], [2]]
    multi.add_row(groups, 0)
    groups[0] = [50]
    groups[1].append(3)
    assert [multi[g].get_numpy_array()[0, :2].tolist() for g in range(2)] == [[1, 0], [2, 0]]
    multi.close()


def test_staged_ids_extended_after_the_call_change_nothing(device):
    # Slot 1's list grows past the row width (8) after it was staged: the
    # staged write is the one id it held, and slot 0's write applies too.
    tables = vllm.BlockTables([16], 4, 64, [8], device)
    inner = [3]
    tables.append_block_ids(1, (inner,), False)
    tables.append_block_ids(0, ([1, 2],), False)
    inner.extend(range(4, 12))
    assert tables.block_tables[0]._staged_write_contents == [3, 1, 2]
    tables.apply_staged_writes()
    assert tables.num_blocks.np.tolist() == [[2, 1, 0, 0]]
    assert tables.block_tables[0].gpu[:2, :3].tolist() == [[1, 2, 0], [3, 0, 0]]
    tables.close()


def device_inputs(device):
    """An int32 and an int64 DeviceArray of a table's own buffers (its
    committed rows and its slot mapping) to hold batch inputs, filled with
    -3 so that a read past what a test writes shows."""
    source = vllm.BlockTable(16, 4, 8, 64, False, device)
    int32, int64 = source.block_table.gpu[0], source.slot_mapping.gpu
    int32.fill_(-3)
    int64.fill_(-3)
    return source, int32, int64


def poisoned_table(device):
    """Row 0 is [5, 6] (block 16): positions 0 16 17 map to 80 96 97."""
    table = vllm.BlockTable(16, 4, 8, 64, False, device)
    table.append_row([5, 6], 0)
    table.commit_block_table(1)
    table.slot_mapping.gpu.fill_(-7)
    return table


def test_device_batch_inputs_are_refused_unless_c_can_read_them(device):
    source, int32, int64 = device_inputs(device)
    int32[:2].copy_([0, 3])
    int64[:3].copy_([0, 16, 17])
    positions32 = vllm.BlockTable(16, 4, 8, 64, False, device).block_table.gpu[0, :3]
    positions32.copy_([0, 16, 17])
    table = poisoned_table(device)
    for qsl, positions, error, message in (
            (int32[:2], positions32, TypeError, "positions has dtype int32; int64 expected"),
            (int64[:2], int64[:3], TypeError, "query_start_loc has dtype int64; int32 expected"),
            (int32[:2], int64.view(8, 8), TypeError, r"positions has shape \(8, 8\); a 1-D"),
            (int32[:2], int64[:1], "CLBT_BUFFER_TOO_SMALL",
             "positions holds 1 values; num_tokens 3 needs 3"),
            (int32[:1], int64[:3], "CLBT_BUFFER_TOO_SMALL",
             "query_start_loc holds 1 values; num_reqs 1 needs 2")):
        with pytest.raises(clbt.Error, match=message) as refused:
            table.compute_slot_mapping(1, qsl, positions, num_tokens=3)
        if error is TypeError:
            assert isinstance(refused.value, TypeError)
        else:
            assert refused.value.status == error
        # nothing ran: the poison stays, the row is as it was
        assert table.slot_mapping.gpu[:4].tolist() == [-7] * 4
        assert table.get_numpy_array()[0, :3].tolist() == [5, 6, 0]
        assert table.num_blocks_per_row[:1].tolist() == [2]
    table.close()
    source.close()


@pytest.mark.parametrize("kind", ["BlockTable", "MultiGroupBlockTable"])
def test_device_batch_inputs_are_read_from_where_the_view_starts(device, kind):
    # Views that start inside their buffer are read from their own first
    # element, and only as far as the batch needs: [-3, -3, 0, 3] and
    # [-3, -3, 0, 16, 17, -3, ...], from their third elements.
    source, int32, int64 = device_inputs(device)
    int32[2:4].copy_([0, 3])
    int64[2:5].copy_([0, 16, 17])
    for qsl, positions in ((int32[2:4], int64[2:5]), (int32[2:], int64[2:])):
        if kind == "BlockTable":
            table, slots = poisoned_table(device), None
        else:
            table = vllm.MultiGroupBlockTable(4, 64, False, device, [16], [16], [8])
            table.append_row([[5, 6]], 0)
            table.commit_block_table(1)
            table[0].slot_mapping.gpu.fill_(-7)
        slots = table.slot_mapping if kind == "BlockTable" else table[0].slot_mapping
        table.compute_slot_mapping(1, qsl, positions, num_tokens=3)
        assert slots.gpu[:4].tolist() == [80, 96, 97, -1]
        # again with no commit owed (the slot mapping alone)
        slots.gpu.fill_(-7)
        table.compute_slot_mapping(1, qsl, positions, num_tokens=3)
        assert slots.gpu[:4].tolist() == [80, 96, 97, -1]
        table.close()
    source.close()


def test_device_and_host_batch_inputs_mix(device):
    # One input a DeviceArray at its buffer's start, the other host values
    # or a view further in: row [5, 6], positions 0 16 17 -> 80 96 97.
    source, int32, int64 = device_inputs(device)
    int32[:4].copy_([0, 3, 0, 3])
    int64[:3].copy_([0, 16, 17])
    table = poisoned_table(device)
    host_qsl, host_positions = np.array([0, 3], np.int32), np.array([0, 16, 17], np.int64)
    for qsl, positions in ((host_qsl, int64), (int32[2:4], int64), (int32, host_positions),
                           (int32[:2], int64[:3])):
        for owed in (True, False):  # the step with the commit, the slot mapping alone
            if owed:
                table.commit_block_table(1)
            table.slot_mapping.gpu.fill_(-7)
            table.compute_slot_mapping(1, qsl, positions, num_tokens=3)
            assert table.slot_mapping.gpu[:4].tolist() == [80, 96, 97, -1]
    table.close()
    source.close()


@pytest.mark.parametrize("call", ["compute_slot_mappings", "step"])
def test_block_tables_take_device_batch_inputs(device, call):
    # Slot 2 holds [5, 6]; batch request 0 reads it (idx_mapping [2]):
    # positions 0 16 17 -> 80 96 97, and its gathered row is [5, 6, 0, ...].
    source, int32, int64 = device_inputs(device)
    int32[:4].copy_([0, 3, 0, 3])
    int64[:3].copy_([0, 16, 17])
    tables = vllm.BlockTables([16], 4, 64, [8], device)
    tables.append_block_ids(2, ([5, 6],), False)
    tables.apply_staged_writes()
    tables.slot_mappings.fill_(-7)
    idx = np.array([2], np.int32)
    for qsl, positions in ((int32, int64), (np.array([0, 3], np.int32), int64[:3]),
                           (int32[2:4], int64)):
        if call == "step":
            gathered, slots = tables.step(idx, qsl, positions, num_tokens=3)
            assert gathered[0].tolist() == [[5, 6, 0, 0, 0, 0, 0, 0]]
        else:
            slots = tables.compute_slot_mappings(idx, qsl, positions, num_tokens=3)
        assert slots.tolist() == [[80, 96, 97]]
        assert tables.slot_mappings[0, :4].tolist() == [80, 96, 97, -1]
    tables.close()
    source.close()


def test_device_arrays_taken_before_a_new_layout_refuse_every_use(device):
    # A CP layout set after construction makes a new table (at the next
    # call); a DeviceArray of the table before it would show that table's
    # buffers (zeros, -1), so every use of one raises, naming the cause.
    table = vllm.BlockTable(16, 4, 8, 64, False, device)
    rows, slots = table.block_table.gpu, table.slot_mapping.gpu
    row = table.get_device_tensor(1)[0, :2]
    table.dcp_world_size = 2
    table.dcp_rank = 0
    with pytest.raises(clbt.Error, match="taken before the table's CP layout changed") as stale:
        rows.tolist()  # the read itself makes the new table
    assert stale.value.status == "CLBT_INVALID_CONFIG"
    table.append_row([5, 6], 0)
    table.commit_block_table(1)
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 2], np.int64))
    # rank 0 of 2 holds the even positions of a 32-token virtual block:
    # positions 0 2 -> slots 80 81 of block 5
    assert table.block_table.gpu[0, :2].tolist() == [5, 6]
    assert table.slot_mapping.gpu[:3].tolist() == [80, 81, -1]
    for use in (lambda: slots[:2].tolist(), lambda: row.numpy(), lambda: rows.fill_(0),
                lambda: slots.copy_(np.zeros(64, np.int64)), lambda: rows[0].item(),
                lambda: table.compute_slot_mapping(1, np.array([0, 2], np.int32), slots[:2])):
        with pytest.raises(clbt.Error, match="taken before the table's CP layout changed"):
            use()
    # nothing the refused uses touched changed
    assert table.block_table.gpu[0, :3].tolist() == [5, 6, 0]
    assert table.slot_mapping.gpu[:3].tolist() == [80, 81, -1]
    table.close()
    multi = vllm.MultiGroupBlockTable(4, 64, False, device, [16, 16], [16, 16], [8, 8])
    early = multi[1].block_table.gpu
    multi.dcp_world_size = 2
    multi.append_row([[1], [2]], 0)
    multi.commit_block_table(1)
    with pytest.raises(clbt.Error, match="taken before the table's CP layout changed"):
        early.tolist()
    assert multi[1].block_table.gpu[0, :2].tolist() == [2, 0]
    # a layout change that is refused (rows hold blocks) keeps the arrays
    kept = multi[0].block_table.gpu
    multi.dcp_rank = 1
    with pytest.raises(clbt.Error, match="can change only while every row is empty"):
        multi.append_row([[3], [4]], 1)
    assert kept[0, :2].tolist() == [1, 0]
    multi.close()
