"""Issue 20's Python findings (4, 5, 6): no read past an array, no crash
on a closed object, a bare int or a wrapping integer, and a step that never
waits on the device, even behind a wait list that has not fired or that
failed. The cases that crashed or hung run in a fresh interpreter, so that
a regression fails its test instead of killing pytest. Expected slots are
derived by hand in the comments (slot = block * 16 + position % 16)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import clbt

# Run first in each child: the parent's choice of PyOpenCL, a table of 4
# rows of 4 blocks of 16 tokens (8 tokens a batch), and a gate: an event
# that holds back what waits for it until open_gate(status) (0: done,
# negative: failed).
PRELUDE = """
import ctypes, gc, os, sys
if os.environ.get("CLBT_TEST_WITHOUT_PYOPENCL"):
    sys.modules["pyopencl"] = None
import numpy as np
import clbt
from clbt import _opencl

device = clbt.Device()
def small_table(**config):
    settings = dict(block_size=16, max_num_reqs=4, max_num_blocks_per_req=4,
                    max_num_batched_tokens=8)
    settings.update(config)
    return clbt.Table(device, **settings)

def gate():
    # Made once the queue is idle: PoCL 3.1 races its worker thread, still
    # ending earlier commands, when it fails what waits for a failed gate,
    # and now and then aborts (tests/engine/test_staging.c, user_event).
    device.finish()
    if _opencl.pyopencl is not None:
        return _opencl.pyopencl.UserEvent(device.context)
    cl = _opencl._cl
    cl.clCreateUserEvent.restype = ctypes.c_void_p
    cl.clCreateUserEvent.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32))
    error = ctypes.c_int32()
    event = cl.clCreateUserEvent(device.context.int_ptr, ctypes.byref(error))
    assert not error.value
    return clbt.Event(event, retain=False)

def open_gate(event, status):
    if _opencl.pyopencl is not None:
        event.set_status(status)
        return
    _opencl._cl.clSetUserEventStatus.argtypes = (ctypes.c_void_p, ctypes.c_int32)
    assert not _opencl._cl.clSetUserEventStatus(event.int_ptr, status)
"""


def survives(body, timeout=120, flags=()):
    """Runs PRELUDE + body in a fresh interpreter (started with flags, such
    as ("-X", "faulthandler")); returns its output, and fails the test if
    it crashed, hung or exited with an error."""
    code = PRELUDE + textwrap.dedent(body)
    try:
        run = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                             timeout=timeout, env=dict(os.environ))
    except subprocess.TimeoutExpired as expired:
        pytest.fail("the child hung for %d s; it printed:\n%s" % (timeout, expired.stdout or ""))
    assert run.returncode == 0, "the child ended with status %d:\n%s%s" % (
        run.returncode, run.stdout, run.stderr[-3000:])
    return run.stdout


def test_slot_mapping_host_reads_no_further_than_query_start_loc():
    # Finding 4: num_reqs 4 reads query_start_loc[0..4]; a one-entry array
    # is refused before C reads past it, and so is a short idx_mapping.
    output = survives("""
        table = small_table()
        for call in (lambda: table.compute_slot_mapping_host(4, np.zeros(1, np.int32), [0]),
                     lambda: table.compute_step_host(2, [0, 1, 1], [0], idx_mapping=[0])):
            try:
                call()
            except clbt.Error as error:
                print(type(error).__name__, isinstance(error, ValueError), error.message)
    """)
    assert output.splitlines() == [
        "InvalidArgumentError True query_start_loc holds 1 values; num_reqs 4 needs 5",
        "InvalidArgumentError True idx_mapping holds 1 values; num_reqs 2 needs 2"]


def test_calls_after_the_device_and_the_table_closed_raise():
    # Finding 5: a step with host arrays on a closed table (its device
    # closed first) made the uploads on a freed device.
    output = survives("""
        table = small_table()
        table.append_row(0, [1])
        device.close()
        table.close()
        for call in (lambda: table.step(1, [0, 1], [0]),
                     lambda: table.compute_slot_mapping(1, [0, 1], [0]),
                     lambda: table.export(1, [0, 1], [0]),
                     lambda: table.host_rows, lambda: table.truncate_row(0, 0)):
            try:
                call()
            except clbt.InvalidArgumentError as error:
                print(error.status, error.message)
    """)
    assert output.splitlines() == ["CLBT_NULL_ARGUMENT the table is closed"] * 5


def test_host_views_keep_their_table_alive():
    # Finding 5: views read after their table is closed or deleted. Rows of
    # 4096 blocks (1 MiB of rows: memory the allocator hands back to the
    # system once freed). Row 0 holds blocks 3, 4; each view must still
    # read that after close(), del and a collection.
    output = survives("""
        from clbt import vllm
        table = small_table(max_num_blocks_per_req=4096)
        table.append_row(0, [3, 4])
        rows, lengths = table.host_rows, table.row_lengths
        facade = vllm.BlockTable(16, 4, 4096, 8, False, device, 16, 1)
        facade.append_row([5], 1)
        facade_rows = facade.get_numpy_array()
        multi = clbt.MultiTable(device, groups=[clbt.Group(16, 4096), clbt.Group(32, 2048)],
                                max_num_reqs=4, max_num_batched_tokens=8)
        multi.append_row(2, ([6], [7, 8]))
        group_rows = multi[1].host_rows
        table.close(); facade.close(); multi.close()
        try:
            table.host_rows
        except clbt.Error as error:
            print("closed:", error.message)
        del table, facade, multi
        gc.collect()
        churn = [np.ones(1 << 18) for _ in range(64)]  # reuse what was freed
        print(rows[0, :3].tolist(), lengths.tolist(), facade_rows[1, :2].tolist(),
              group_rows[2, :3].tolist(), rows.flags.writeable)
    """)
    assert output.splitlines() == ["closed: the table is closed",
                                   "[3, 4, 0] [2, 0, 0, 0] [5, 0] [7, 8, 0] False"]


def test_an_int_is_refused_where_an_opencl_object_goes():
    # Finding 5: idx_mapping=3 was a SIGSEGV. Each bare int is a
    # TypeMismatchError naming its argument, and nothing runs.
    output = survives("""
        table = small_table()
        table.append_row(0, [2])
        calls = {
            "idx_mapping": lambda: table.step(1, [0, 1], [0], idx_mapping=3),
            "query_start_loc": lambda: table.step(1, 3, [0]),
            "positions": lambda: table.compute_slot_mapping(1, [0, 1], 3, num_tokens=1),
            "seq_lens": lambda: table.export(1, [0, 1], [0], seq_lens=3),
            "wait_for[0]": lambda: table.step(1, [0, 1], [0], wait_for=[3]),
            "queue": lambda: clbt.Device(queue=3),
            "event": lambda: clbt.release_event(3),
        }
        for name, call in calls.items():
            try:
                call()
            except TypeError as error:
                assert isinstance(error, clbt.TypeMismatchError)
                print(name, error.message.startswith(name) or "clbt.Event" in error.message)
        # never committed, and nothing uploaded
        print(table.read_device_rows(1).tolist(), table._uploads)
    """)
    assert output.splitlines() == [
        "idx_mapping True", "query_start_loc True", "positions True", "seq_lens True",
        "wait_for[0] True", "queue True", "event True", "[[0, 0, 0, 0]] None"]


def test_a_raw_handle_passes_once_wrapped(device):
    with clbt.Table(device, block_size=16, max_num_reqs=4, max_num_blocks_per_req=4,
                    max_num_batched_tokens=8) as table:
        table.append_row(1, [6])
        table.commit(2)
        context = device.context.int_ptr
        qsl = clbt._opencl.create_buffer(context, 8)
        positions = clbt._opencl.create_buffer(context, 8)
        idx = clbt._opencl.create_buffer(context, 4)
        for buffer, values in ((qsl, np.array([0, 1], np.int32)),
                               (positions, np.array([5], np.int64)),
                               (idx, np.array([1], np.int32))):
            clbt._opencl.write(device.queue.int_ptr, buffer.int_ptr, values.ctypes.data,
                               values.nbytes).wait()
        with clbt.Buffer.from_int_ptr(idx.int_ptr) as wrapped:
            table.step(1, qsl, positions, num_tokens=1, idx_mapping=wrapped)
            # request 0 reads row 1 (block 6): 6*16 + 5
            assert table.read_slot_mapping(1).tolist() == [101]
        with pytest.raises(clbt.TypeMismatchError, match="is not a cl_mem buffer"):
            clbt.Buffer.from_int_ptr(device.queue.int_ptr)  # a live object of another kind
        with pytest.raises(clbt.TypeMismatchError, match="a nonzero int"):
            clbt.Buffer.from_int_ptr(0)
        for buffer in (qsl, positions, idx):
            buffer.close()


def test_integers_past_their_c_type_are_refused(device):
    # Finding 5: truncate_row(r, 2**64 + 1) wrapped to 1 and dropped 3 of
    # the row's 4 blocks. Every integer is checked against its C type.
    with clbt.Table(device, block_size=16, max_num_reqs=4, max_num_blocks_per_req=4,
                    max_num_batched_tokens=8) as table, \
         clbt.MultiTable(device, groups=[clbt.Group(16, 4)], max_num_reqs=4,
                         max_num_batched_tokens=8) as multi:
        table.append_row(0, [1, 2, 3, 4])
        multi.append_row(0, ([1, 2, 3, 4],))
        cases = [
            (lambda: table.truncate_row(0, 2**64 + 1), clbt.InvalidArgumentError,
             "num_blocks 18446744073709551617 is outside [0, 18446744073709551615]"),
            (lambda: table.truncate_row(0, -1), clbt.InvalidArgumentError, "num_blocks -1"),
            (lambda: multi.truncate_row(0, [2**64 + 1]), clbt.InvalidArgumentError,
             "num_blocks[0] 18446744073709551617 is outside"),
            (lambda: table.truncate_row(2**32, 1), clbt.OutOfRangeError, "row 4294967296"),
            (lambda: table.step(1, [0, 1], [0], num_reqs_padded=2**32 + 1),
             clbt.InvalidArgumentError, "num_reqs_padded 4294967297 is outside"),
            (lambda: table.step(1, [0, 1], [0], flags=2**32 + 1), clbt.InvalidArgumentError,
             "flags 4294967297"),
            (lambda: table.read_slot_mapping(2**32 + 1), clbt.InvalidArgumentError,
             "num_tokens 4294967297"),
            (lambda: table.read_slot_mapping(9), clbt.InvalidArgumentError,
             "num_tokens 9 exceeds 8"),
            (lambda: setattr(table, "commit_mode", 2**32 + 1), clbt.InvalidArgumentError,
             "mode 4294967297"),
            (lambda: table.truncate_row(0, 1.0), clbt.TypeMismatchError,
             "num_blocks is a float; an int expected"),
            (lambda: clbt.Table(device, block_size=2**32 + 16, max_num_reqs=4,
                                max_num_blocks_per_req=4, max_num_batched_tokens=8),
             clbt.InvalidArgumentError, "block_size 4294967312 is outside [0, 4294967295]"),
            (lambda: clbt.MultiTable(device, groups=[clbt.Group(16, 2**32 + 4)], max_num_reqs=4,
                                     max_num_batched_tokens=8),
             clbt.InvalidArgumentError, "groups[0]: max_num_blocks 4294967300 is outside"),
        ]
        for call, kind, words in cases:
            with pytest.raises(kind) as raised:
                call()
            assert words in raised.value.message, raised.value.message
        assert table.row_lengths[0] == 4 and multi[0].row_lengths[0] == 4


def test_steps_behind_a_closed_gate_never_wait():
    # Finding 6: with two upload buffers, the fourth step behind a gate
    # waited for ever on an upload queued behind the gate. Each step in
    # flight keeps an upload slot of its own. Row 0: blocks 3, 4; row 1
    # gains block 5 + i at step i (only 4 fit); the last step maps row 1's
    # position 16 * 3 + 2 = 50 -> block 8: 130.
    output = survives("""
        table = small_table()
        table.append_row(0, [3, 4])
        closed = gate()
        table.step(1, [0, 2], [0, 17], wait_for=[closed])
        for i in range(8):
            if i < 4:
                table.append_row(1, [5 + i])
            table.step(2, np.array([0, 1, 2], np.int32), np.array([1, 16 * min(i, 3) + 2]))
        in_flight, free = table._uploads.slots
        print("in flight, free:", in_flight in (8, 9), free)
        open_gate(closed, 0)
        device.finish()
        table.step(2, [0, 1, 2], [17, 50])
        print(table.read_slot_mapping(2).tolist(), table._uploads.slots)
    """, timeout=60)
    # behind the gate: the 8 later steps' slots (and the gated step's own,
    # queued ahead of its gate, until it is seen to end); after it: two
    # slots kept, one of them in flight
    assert output.splitlines() == ["in flight, free: True 0", "[65, 130] (1, 1)"]


def test_a_failed_gate_neither_aborts_nor_leaves_the_device_stale():
    # Finding 6 (and 1 from Python): the uploads carried no event, so a
    # failed wait list aborted the interpreter inside PoCL. The step behind
    # the gate fails; the next one commits what never arrived. Row 0:
    # blocks 3, 4 (committed behind the gate); row 1: block 9 added after.
    output = survives("""
        table = small_table()
        table.append_row(0, [3, 4])
        failing = gate()
        table.step(1, [0, 2], [0, 17], wait_for=[failing])
        table.append_row(1, [9])
        table.step(2, [0, 1, 2], [1, 2])
        open_gate(failing, -1)
        device.finish()
        table.step(2, [0, 1, 2], [17, 15])
        print(table.read_slot_mapping(2).tolist(), table.read_device_rows(2).tolist())
    """, timeout=60)
    assert output.splitlines() == ["[65, 159] [[3, 4, 0, 0], [9, 0, 0, 0]]"]


def test_a_step_polls_one_event_however_many_are_in_flight():
    # Finding 6: reaping polls the oldest upload only (the queue is in
    # order): one poll a step while 64 wait behind a gate (a gated commit,
    # so that every upload is behind it), none for the first, which finds
    # none in flight, and each slot polled once more when it has ended.
    output = survives("""
        polls = [0]
        ended = _opencl.ended
        def counted(event):
            polls[0] += 1
            return ended(event)
        _opencl.ended = counted
        table = small_table()
        table.append_row(0, [1])
        closed = gate()
        table.commit(1, wait_for=[closed])
        per_step = []
        for _ in range(64):
            before = polls[0]
            table.step(1, [0, 1], [0])
            per_step.append(polls[0] - before)
        open_gate(closed, 0)
        device.finish()
        before = polls[0]
        table.step(1, [0, 1], [0])
        print(per_step[0], set(per_step[1:]), polls[0] - before)
    """, timeout=60)
    # 64 slots in flight, all ended: 64 polls, then none is left to poll
    assert output.splitlines() == ["0 {1} 64"]


def test_a_table_closes_after_its_upload_events_were_finalised():
    # At interpreter exit the collector finalises a garbage cycle's objects
    # in any order, so an upload's event could be released before the
    # table whose close waits for it: close raised "the Event is released"
    # from __del__. Here the events are released first by hand, behind a
    # gate, and close must still wait for the queue and release the table.
    # Row 0: block 3; position 2 -> slot 3 * 16 + 2 = 50.
    output = survives("""
        table = small_table()
        table.append_row(0, [3])
        closed = gate()
        table.step(1, [0, 1], [2], wait_for=[closed])
        in_flight = list(table._uploads._in_flight)
        for slot in in_flight:
            slot.event.close()
        open_gate(closed, 0)
        print(len(in_flight))
        table.close()
        print(table.closed)
    """, timeout=60)
    assert output.splitlines() == ["1", "True"]
