"""Issue 19's bad input from Python: every array argument checked for type,
dimension, dtype, contiguity and length against the counts before C reads
it; a scalar where a sequence goes and a 2-D array where a 1-D one goes are
refused, never reinterpreted. Each refused call changes nothing."""
import numpy as np
import pytest

import clbt
from clbt import vllm

POISON = [-7] * 8


def small_table(device, **config):
    # 4 rows of 16 blocks of 16 tokens, 8 tokens a batch
    settings = dict(block_size=16, max_num_reqs=4, max_num_blocks_per_req=16,
                    max_num_batched_tokens=8)
    settings.update(config)
    return clbt.Table(device, **settings)


def refused(call, kind, words):
    with pytest.raises(kind) as raised:
        call()
    assert words in raised.value.message, raised.value.message
    return raised.value


def test_batch_updates_read_no_further_than_block_ids(device):
    # append_rows([1], [8], [5]) copied 7 heap words after the one id into
    # row 1; block_ids must hold sum(counts) ids.
    with small_table(device) as table, \
         clbt.MultiTable(device, groups=[clbt.Group(16, 16), clbt.Group(32, 8)], max_num_reqs=4,
                         max_num_batched_tokens=8) as multi:
        table.append_row(1, [2])
        for call in (table.append_rows, table.add_rows):
            refused(lambda: call([1], [8], [5]), clbt.InvalidArgumentError,
                    "block_ids holds 1 values; sum(counts) needs 8")
            refused(lambda: call([0, 1], np.array([1, 2], np.uint32), np.array([5, 6])),
                    ValueError, "block_ids holds 2 values; sum(counts) needs 3")
        for call in (multi.append_rows, multi.add_rows):
            refused(lambda: call([1], [[1], [3]], [[4], [5, 6]]), ValueError,
                    "block_ids[1] holds 2 values; sum(counts[1]) needs 3")
        facade = vllm.BlockTable(16, 4, 4, 8, False, device, 16, 1)
        refused(lambda: facade.append_rows([1], [8], [5]), ValueError, "sum(counts) needs 8")
        assert not facade.num_blocks_per_row.any()
        assert table.host_rows[1, :3].tolist() == [2, 0, 0]
        assert table.row_lengths.tolist() == [0, 1, 0, 0]
        assert [g.row_lengths.tolist() for g in multi] == [[0] * 4, [0] * 4]
        table.append_rows([1], [2], [5, 6, 7])  # more ids than counts use is fine
        assert table.host_rows[1, :4].tolist() == [2, 5, 6, 0]


def test_a_scalar_is_not_a_one_id_list(device):
    groups = [clbt.Group(16, 16), clbt.Group(32, 8)]
    with small_table(device) as table, \
         clbt.MultiTable(device, groups=groups, max_num_reqs=4, max_num_batched_tokens=8) as multi:
        refused(lambda: table.append_row(0, 5), TypeError,
                "block_ids is an int; a 1-D sequence of ints expected")
        refused(lambda: table.add_row(0, np.int32(5)), TypeError, "block_ids has shape ()")
        refused(lambda: table.append_row(0, "12"), TypeError, "block_ids is a str")
        refused(lambda: table.append_rows(1, [1], [5]), TypeError, "rows is an int")
        # two ids for two groups, as vLLM's MultiGroupBlockTable.append_row
        # would never take them: each group's ids must be a sequence
        refused(lambda: multi.append_row(0, [1, 2]), TypeError, "block_ids[0] is an int")
        refused(lambda: multi.add_row(0, 7), TypeError, "block_ids is an int; a sequence")
        refused(lambda: multi.truncate_row(0, 0), TypeError, "num_blocks is an int")
        refused(lambda: multi.append_rows([0], [1, 1], [[1], [2]]), TypeError,
                "counts[0] is an int")
        facade = vllm.MultiGroupBlockTable(4, 8, False, device, [16, 32], [16, 32], [16, 8])
        refused(lambda: facade.append_row([1, 2], 0), TypeError, "block_ids[0] is an int")
        assert facade[0].num_blocks_per_row.tolist() == [0] * 4
        facade.close()
        assert [g.row_lengths.tolist() for g in multi] == [[0] * 4, [0] * 4]
        assert table.row_lengths.tolist() == [0] * 4


def test_two_dimensional_arrays_are_not_flattened(device):
    with small_table(device) as table:
        table.append_row(0, [1, 2])
        table.commit(1)
        refused(lambda: table.append_row(0, np.array([[3, 4]])), TypeError,
                "block_ids has shape (1, 2); a 1-D array expected")
        refused(lambda: table.append_row(0, [[3, 4]]), TypeError, "block_ids:")
        refused(lambda: table.append_rows(np.array([[0]]), [1], [3]), TypeError,
                "rows has shape (1, 1)")
        refused(lambda: table.compute_slot_mapping(1, [0, 2], np.array([[0, 17]])), TypeError,
                "positions has shape (1, 2)")
        refused(lambda: table.step(1, np.array([[0, 2]], np.int32), [0, 17]), TypeError,
                "query_start_loc has shape (1, 2)")
        refused(lambda: table.compute_slot_mapping_host(1, [0, 2], [[0, 17]]), TypeError,
                "positions:")
        assert table.row_lengths.tolist() == [2, 0, 0, 0]


def test_dtypes_are_checked_and_values_never_wrapped(device):
    with small_table(device) as table:
        refused(lambda: table.append_row(0, np.array([1.0])), TypeError,
                "block_ids has dtype float64; integers expected")
        refused(lambda: table.append_row(0, np.array([True])), TypeError, "dtype bool")
        refused(lambda: table.append_row(0, [1.5]), TypeError, "block_ids:")
        refused(lambda: table.append_row(0, np.array([2**31], np.int64)), ValueError,
                "block_ids holds 2147483648; int32 takes [-2147483648, 2147483647]")
        refused(lambda: table.append_rows([0], np.array([-1]), [1]), ValueError,
                "counts holds -1; uint32 takes [0, 4294967295]")
        refused(lambda: table.step(1, [0, 1], np.array([0.5])), TypeError,
                "positions has dtype float64")
        # strided host arrays are copied, not misread: ids 1, 3 of [1, 2, 3]
        table.append_row(0, np.array([1, 2, 3], np.int32)[::2])
        assert table.host_rows[0, :3].tolist() == [1, 3, 0]
        # an empty array of any dtype holds nothing to misread
        table.append_row(0, np.array([]))
        assert table.row_lengths[0] == 2


def test_one_row_of_every_group_is_one_call_of_flat_ids(device, monkeypatch):
    # MultiTable.append_row and add_row (and the facade's row updates) hand
    # clbt_multi_table_update_row every group's ids end to end, with each
    # group's count: read back here from the addresses C receives.
    import ctypes
    from clbt._library import lib
    seen = []
    update = lib.clbt_multi_table_update_row

    def spy(table, row, counts, ids, how):
        sizes = list((ctypes.c_size_t * 3).from_address(counts))
        seen.append((row, sizes, list((ctypes.c_int32 * sum(sizes)).from_address(ids)), how))
        return update(table, row, counts, ids, how)
    monkeypatch.setattr(lib, "clbt_multi_table_update_row", spy)
    groups = [clbt.Group(16, 16), clbt.Group(32, 8, kernel_block_size=16), clbt.Group(16, 16)]
    with clbt.MultiTable(device, groups=groups, max_num_reqs=4, max_num_batched_tokens=8) as multi:
        multi.append_row(1, ([4, 2], np.array([1]), range(9, 10)))
        multi.add_row(1, ([5], [], [6, 6]))
        assert seen == [(1, [2, 1, 1], [4, 2, 1, 9], 0), (1, [1, 0, 2], [5, 6, 6], 1)]
        # group 1 took KV block 1 (kernel blocks 2 3), not the array's first id
        assert [g.host_rows[1, :2].tolist() for g in multi] == [[5, 2], [2, 3], [6, 6]]
        assert [g.row_lengths[1] for g in multi] == [1, 0, 2]
        # a refusal of any group changes no group
        refused(lambda: multi.append_row(1, ([1], [1], list(range(15)))), clbt.Error,
                "groups[2] (ids from block_ids[2]): n = 15 blocks")
        refused(lambda: multi.append_row(1, ([1], [2**40], [1])), ValueError,
                "block_ids[1] holds 1099511627776; int32 takes")
        assert [g.row_lengths[1] for g in multi] == [1, 0, 2]


def test_batch_inputs_are_checked_against_num_reqs_and_num_tokens(device):
    with small_table(device) as table:
        table.append_row(0, [1])
        cases = [
            (lambda: table.step(2, [0, 1], [0]), "query_start_loc holds 2 values; num_reqs 2 "
             "needs 3"),
            (lambda: table.step(2, [0, 1, 2], [0, 1], idx_mapping=[0]),
             "idx_mapping holds 1 values; num_reqs 2 needs 2"),
            (lambda: table.export(2, [0, 1, 2], [0, 1], seq_lens=[5]),
             "seq_lens holds 1 values; num_reqs 2 needs 2"),
            (lambda: table.step(1, [0, 1], [0], num_tokens=2), "num_tokens is 2; positions "
             "holds 1"),
            (lambda: table.step(1, [0, 1], None, num_tokens=1),
             "positions is NULL with num_tokens 1"),
        ]
        for call, words in cases:
            refused(call, clbt.InvalidArgumentError, words)
        assert table.read_device_rows(1).tolist() == [[0] * 16]  # no step ran


def test_device_arrays_are_checked_for_dtype_shape_and_contiguity(device):
    pyopencl = pytest.importorskip("pyopencl")
    import pyopencl.array  # noqa: F401
    queue = device.queue
    with small_table(device) as table:
        table.append_row(0, [1])
        qsl = pyopencl.array.to_device(queue, np.array([0, 1], np.int32))

        def on_device(values):
            return pyopencl.array.to_device(queue, np.asarray(values))

        cases = [
            (lambda: table.step(1, qsl, on_device(np.array([0], np.int32))), TypeError,
             "positions has dtype int32; int64 expected"),
            (lambda: table.step(1, on_device(np.array([[0, 1]], np.int32)),
                                on_device(np.array([0], np.int64))), TypeError,
             "query_start_loc has shape (1, 2); a 1-D array expected"),
            (lambda: table.step(1, qsl, on_device(np.arange(4, dtype=np.int64))[::2]),
             ValueError, "positions is not contiguous"),
            (lambda: table.step(1, qsl, on_device(np.arange(4, dtype=np.int64))[1:]),
             ValueError, "positions starts 8 bytes into its buffer"),
            (lambda: table.step(2, qsl, on_device(np.array([0, 0], np.int64))), ValueError,
             "query_start_loc holds 2 values; num_reqs 2 needs 3"),
            (lambda: table.step(1, qsl, qsl.base_data), ValueError,
             "num_tokens is needed with a positions buffer"),
            (lambda: table.step(1, qsl, qsl.base_data, num_tokens=2), ValueError,
             "positions holds 1 values; num_tokens 2 needs 2"),
        ]
        for call, kind, words in cases:
            error = refused(call, kind, words)
            assert isinstance(error, clbt.Error)
        assert table.read_device_rows(1).tolist() == [[0] * 16]
