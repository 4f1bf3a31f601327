"""State slots (Table.step with STEP_STATE_SLOTS) and token slots
(Table.token_slots) through the bindings, on the hand-worked examples of
tests/calls/test_state_slots.c and tests/calls/test_token_slots.c, whose
values follow vLLM's rules (docs/semantics.md): the C suites hold the models."""
import ctypes
from ctypes import byref, c_int32

import numpy as np
import pytest

import clbt
from clbt import _library, _opencl

POISON = -7777
CL_MEM_READ_WRITE = 1


def device_array(device, values):
    """A read-write buffer holding int32 values (waits for the write)."""
    values = np.ascontiguousarray(values, np.int32)
    error = c_int32()
    handle = _opencl._cl.clCreateBuffer(device.context.int_ptr, CL_MEM_READ_WRITE,
                                        values.nbytes, None, byref(error))
    assert error.value == 0
    buffer = _opencl.Buffer(handle, retain=False)
    queue = device.queue.int_ptr
    _opencl.write(queue, buffer.int_ptr, values.ctypes.data, values.nbytes).wait()
    return buffer


def read(device, buffer, count):
    return _opencl.read(device.queue.int_ptr, buffer.int_ptr, np.empty(count, np.int32))


def test_the_request_mirror_has_the_c_layout():
    # clbt_token_slots_request: four uint32, then four cl_mem (config.c
    # checks it ends with its last field; bad input names its 48 bytes)
    request = _library.TokenSlotsRequest
    assert ctypes.sizeof(request) == 48
    assert [getattr(request, name).offset for name, _ in request._fields_] == [
        0, 4, 8, 12, 16, 24, 32, 40]
    assert request().struct_size == 48


def test_state_slots(device, no_pyopencl):
    # Rows {3, 8, 2} and {5} of 16-token states; two ids a request: request
    # 0 (length 20) reads columns 1, 2; request 1 (length 16) column 0, then
    # past its row (the null block, counted); request 2 is padding.
    with clbt.Table(device, block_size=16, max_num_reqs=4, max_num_blocks_per_req=3,
                    max_num_batched_tokens=4, slot_mode=clbt.SlotMode.NONE) as table:
        table.add_row(0, [3, 8, 2])
        table.add_row(1, [5])
        table.step(2, [0, 1, 2], [19, 15], num_reqs_padded=3,
                   flags=_library.STEP_STATE_SLOTS, num_state_slots=2)
        assert table.read_state_slots(3, 2).tolist() == [[8, 2], [5, 0], [0, 0]]
        assert table.rejected_tokens == 1
        table.step(1, [0, 1], [15], num_reqs_padded=2, flags=_library.STEP_STATE_SLOTS,
                   state_null_block=-1)
        assert table.read_state_slots(2).tolist() == [[3], [-1]]
        assert table.state_slots is not None
    with clbt.Table(device, block_size=16, max_num_reqs=1, max_num_blocks_per_req=1,
                    max_num_batched_tokens=1) as tokens:
        assert tokens.state_slots is None
        with pytest.raises(clbt.InvalidArgumentError):
            tokens.read_state_slots(1)


def test_token_slots(device, no_pyopencl):
    # Rows {7, 3} and {5} of 4-token blocks over kernel blocks of 2; rows 0,
    # 1 of the matrix are request 0's, row 2 request 1's, row 3 padding.
    with clbt.Table(device, block_size=4, kernel_block_size=2, max_num_reqs=2,
                    max_num_blocks_per_req=2, max_num_batched_tokens=4) as table:
        table.add_row(0, [7, 3])
        table.add_row(1, [5])
        table.commit(2)
        indices = device_array(device, [0, 5, -1, 7, 8, -2, 3, 4, 0, 1, 2, 3])
        slots = device_array(device, [POISON] * 16)
        table.token_slots(2, [0, 2, 3], indices, slots, num_rows=4, indices_per_row=3)
        assert read(device, slots, 16).tolist() == [
            28, 13, -1, 15, -1, -1, 23, -1, 20, -1, -1, -1] + [POISON] * 4
        assert table.rejected_tokens == 3
        with pytest.raises(clbt.TypeMismatchError):
            table.token_slots(2, [0, 2, 3], [0, 5, -1], slots, num_rows=1, indices_per_row=3)
        with pytest.raises(clbt.Error) as refused:
            table.token_slots(2, [0, 2, 3], indices, slots, num_rows=4, indices_per_row=5)
        assert "token_indices holds 48 bytes" in str(refused.value)


def test_token_slots_of_a_multi_group_table(device, no_pyopencl):
    # One section per token-mapping group, in group order; the NONE group
    # has none.
    groups = [clbt.Group(4, 2), clbt.Group(8, 2, slot_mode=clbt.SlotMode.NONE),
              clbt.Group(2, 4)]
    with clbt.MultiTable(device, groups=groups, max_num_reqs=1,
                         max_num_batched_tokens=2) as table:
        table.add_row(0, [[7, 3], [1], [4, 6]])
        table.commit(1)
        indices = device_array(device, [1, 6])
        slots = device_array(device, [POISON] * 5)
        table.token_slots(1, [0, 1], indices, slots, num_rows=1, indices_per_row=2)
        # group 0: 7*4+1, 3*4+2; group 2: 4*2+1, block 3 past its row {4, 6}
        assert read(device, slots, 5).tolist() == [29, 14, 9, -1, POISON]


def test_host_slot_mapping_of_a_none_table_is_none(device):
    # A NONE table maps no tokens: C checks the batch and leaves the output
    # untouched, so the host forms return None for its slot mapping (as
    # compute_step_host does) instead of an uninitialised array. A
    # token-mapping table beside it maps row {5, 6} of 16-token blocks:
    # positions 0, 1 go to slots 80, 81, the rest of its 4 tokens pad (-1).
    none = clbt.Table(device, block_size=16, max_num_reqs=2, max_num_blocks_per_req=2,
                      max_num_batched_tokens=4, slot_mode=clbt.SlotMode.NONE)
    tokens = clbt.Table(device, block_size=16, max_num_reqs=2, max_num_blocks_per_req=2,
                        max_num_batched_tokens=4)
    multi = clbt.MultiTable(device, groups=[clbt.Group(16, 2), clbt.Group(
        16, 2, slot_mode=clbt.SlotMode.NONE)], max_num_reqs=2, max_num_batched_tokens=4)
    with none, tokens, multi:
        none.add_row(0, [5, 6])
        tokens.add_row(0, [5, 6])
        multi.add_row(0, [[5, 6], [5, 6]])
        assert none.compute_slot_mapping_host(1, [0, 2], [0, 1]) is None
        assert none.compute_step_host(1, [0, 2], [0, 1])[0] is None
        assert multi[1].compute_slot_mapping_host(1, [0, 2], [0, 1]) is None
        assert multi[0].compute_slot_mapping_host(1, [0, 2], [0, 1]).tolist() == [
            80, 81, -1, -1]
        assert tokens.compute_slot_mapping_host(1, [0, 2], [0, 1]).tolist() == [
            80, 81, -1, -1]
        # The batch is still checked: 3 requests exceed max_num_reqs 2.
        with pytest.raises(clbt.InvalidArgumentError) as refused:
            none.compute_slot_mapping_host(3, [0, 1, 2, 2], [0, 1])
        assert refused.value.status == "CLBT_TOO_MANY_REQUESTS"


def test_token_slots_refuse_arrays_shorter_than_the_matrix(device):
    # Views of 2 entries at the start of 16-entry buffers: C sees only the
    # buffers, so their own lengths are checked here. Row {5, 6} of 16-token
    # blocks: token indices 0, 1 of request 0 are slots 80, 81.
    cl_array = pytest.importorskip("pyopencl.array")
    queue = device.queue
    with clbt.Table(device, block_size=16, max_num_reqs=2, max_num_blocks_per_req=2,
                    max_num_batched_tokens=4) as table, clbt.MultiTable(
            device, groups=[clbt.Group(16, 2), clbt.Group(16, 2, slot_mode=clbt.SlotMode.NONE),
                            clbt.Group(16, 2)], max_num_reqs=2,
            max_num_batched_tokens=4) as multi:
        table.add_row(0, [5, 6])
        table.commit(1)
        multi.add_row(0, [[5, 6], [1], [7]])
        multi.commit(1)
        slots_whole = cl_array.to_device(queue, np.full(16, POISON, np.int32))
        indices_whole = cl_array.to_device(queue, np.array([0, 1, 16, 17] + [0] * 12, np.int32))
        slots, indices = slots_whole[:2], indices_whole[:2]
        refusals = [
            (lambda: table.token_slots(1, [0, 1], indices, slots_whole, num_rows=1,
                                       indices_per_row=4),
             "token_indices holds 2 values; num_rows 1 x indices_per_row 4 needs 4"),
            (lambda: table.token_slots(1, [0, 1], indices_whole, slots, num_rows=1,
                                       indices_per_row=4),
             "token_slots holds 2 values; 1 section of num_rows 1 x indices_per_row 4 "
             "needs 4"),
            # two token-mapping groups: two sections of 2 entries
            (lambda: multi.token_slots(1, [0, 1], indices, slots, num_rows=1,
                                       indices_per_row=2),
             "token_slots holds 2 values; 2 sections of num_rows 1 x indices_per_row 2 "
             "needs 4"),
        ]
        for call, words in refusals:
            with pytest.raises(clbt.InvalidArgumentError) as refused:
                call()
            assert refused.value.status == "CLBT_BUFFER_TOO_SMALL"
            assert refused.value.message == words
            device.finish()
            assert slots_whole.get().tolist() == [POISON] * 16  # nothing written
        table.token_slots(1, [0, 1], indices, slots, num_rows=1, indices_per_row=2)
        device.finish()
        assert slots_whole.get().tolist() == [80, 81] + [POISON] * 14
