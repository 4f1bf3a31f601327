"""Threads (docs/threading.md, docs/python.md "Threads"): issue 27's
findings 3 and 4. Threads with tables of their own on one Device, and
threads sharing one Table while others use their own, each in a fresh
interpreter (so that an abort fails the test instead of killing pytest),
run plainly and with faulthandler on (which prints every thread's stack
should one crash). Expected values are derived by hand in the comments."""
import textwrap

import pytest

from test_reliability import survives

FLAGS = {"plain": (), "faulthandler": ("-X", "faulthandler")}
ROUNDS = 3000


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_threads_with_their_own_block_tables_on_one_device(flags):
    # Finding 3: four vllm.BlockTables on one Device, each thread filling
    # row t of its own table's .gpu with 1000 t + i and reading it back
    # 3,000 times: every read is that value in each of the row's 4 entries
    # (4 blocks of 16 tokens, kernel blocks of 16: width 4).
    output = survives("""
        import threading
        from clbt import vllm
        ROUNDS = %d
        tables = [vllm.BlockTable(16, 4, 4, 8, False, device, 16, 1) for _ in range(4)]
        wrong = []
        def work(t):
            row = tables[t].block_table.gpu[t]
            for i in range(ROUNDS):
                row.fill_(1000 * t + i)
                got = row.tolist()
                if got != [1000 * t + i] * 4:
                    wrong.append((t, i, got))
                    return
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print("wrong", wrong[:1])
        for t, table in enumerate(tables):
            print(t, table.block_table.gpu[t].tolist())
    """ % ROUNDS, timeout=300, flags=flags)
    assert output.splitlines() == ["wrong []"] + [
        "%d %s" % (t, [1000 * t + ROUNDS - 1] * 4) for t in range(4)]


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_threads_sharing_one_table_while_others_use_their_own(flags):
    # Finding 4: three threads step one Table with host arrays while two
    # step tables of their own, 3,000 steps each. Every table holds row 0 =
    # blocks b+1..b+4 and row 1 = b+11..b+14 (b = 100 x its number; the
    # shared table's is 9). The batch: request 0 at positions 0, 17, 33,
    # request 1 at 5 and 63; 16 tokens a block, so the slots are
    # (b+1) 16, (b+2) 16 + 1, (b+3) 16 + 1, (b+11) 16 + 5, (b+14) 16 + 15,
    # then pads (-1) up to max_num_batched_tokens 8. The own tables are
    # checked after every step, the shared one at the end.
    output = survives("""
        import threading
        ROUNDS = %d
        def expected(b):
            return [(b + 1) * 16, (b + 2) * 16 + 1, (b + 3) * 16 + 1, (b + 11) * 16 + 5,
                    (b + 14) * 16 + 15, -1, -1, -1]
        def filled(number):
            table = small_table()
            b = 100 * number
            table.add_row(0, [b + 1, b + 2, b + 3, b + 4])
            table.add_row(1, [b + 11, b + 12, b + 13, b + 14])
            return table
        shared, own = filled(9), [filled(0), filled(1)]
        query_start_loc, positions = [0, 3, 5], [0, 17, 33, 5, 63]
        wrong = []
        def step_shared():
            for i in range(ROUNDS):
                shared.step(2, query_start_loc, positions)
        def step_own(n):
            for i in range(ROUNDS):
                own[n].step(2, query_start_loc, positions)
                got = own[n].read_slot_mapping().tolist()
                if got != expected(100 * n):
                    wrong.append((n, i, got))
                    return
        threads = [threading.Thread(target=step_shared) for _ in range(3)] + [
            threading.Thread(target=step_own, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print("wrong", wrong[:1])
        print("shared", shared.read_slot_mapping().tolist() == expected(900))
    """ % ROUNDS, timeout=300, flags=flags)
    assert output.splitlines() == ["wrong []", "shared True"]


# A KV cache in a child: float32, K and V in one buffer [blocks, 2, 1, 1,
# 4] (block_size 1, one head of 4), every element -7.0 to start, and
# buffers from the package's own calls (with or without PyOpenCL).
KV_PRELUDE = """
import threading
from ctypes import byref, c_int32
def buffer_of(values):
    values = np.ascontiguousarray(values)
    error = c_int32()
    handle = _opencl._cl.clCreateBuffer(device.context.int_ptr, 0x21, values.nbytes,
                                        values.ctypes.data, byref(error))  # RW | COPY_HOST_PTR
    assert error.value == 0
    return _opencl.Buffer(handle, retain=False)
def kv_cache(num_blocks):
    storage = buffer_of(np.full(num_blocks * 2 * 4, -7.0, np.float32))
    return storage, clbt.KVCache(device, storage, num_kv_heads=1, head_size=4, block_size=1,
                                 num_blocks=num_blocks, cache_dtype="float32")
"""


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_threads_sharing_one_kv_cache(flags):
    # Two threads write through one KVCache, 3,000 one-token writes each:
    # thread t writes K = t + 1 and V = -(t + 1) (4 elements each) to slot
    # 3000 t + i at its i-th write, so at the end blocks [3000 t, 3000 t +
    # 3000) hold exactly that, and nothing raised. Before the lock: SIGSEGV,
    # heap corruption or CL_INVALID_KERNEL_ARGS (clSetKernelArg on the
    # cache's one kernel from two threads at once).
    output = survives(KV_PRELUDE + textwrap.dedent("""
        N = %d
        storage, cache = kv_cache(2 * N)
        errors = []
        def work(t):
            key = buffer_of(np.full(4, t + 1.0, np.float32))
            value = buffer_of(np.full(4, -(t + 1.0), np.float32))
            slots = buffer_of(np.arange(t * N, (t + 1) * N, dtype=np.int64))
            for i in range(N):
                try:
                    cache.write(key, value, slots, 1, slot_mapping_offset=i)
                except clbt.Error as error:
                    errors.append(str(error))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        got = _opencl.read(device.queue.int_ptr, storage.int_ptr,
                           np.empty((2 * N, 2, 4), np.float32))
        expected = np.empty((2 * N, 2, 4), np.float32)
        expected[:N, 0], expected[:N, 1] = 1.0, -1.0
        expected[N:, 0], expected[N:, 1] = 2.0, -2.0
        print("errors", errors[:1])
        print("written", np.array_equal(got, expected), cache.rejected_tokens)
    """) % ROUNDS, timeout=300, flags=flags)
    assert output.splitlines() == ["errors []", "written True 0"]


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_threads_sharing_one_layout_in_reshape_and_cache_flash(flags):
    # The same as above through clbt.vllm.reshape_and_cache_flash, which
    # shares one cache per layout between threads, with four threads: a
    # cache of 12,000 blocks of one slot ([blocks, 2, 1, 1, 4], K and V as
    # kv[:, 0] and kv[:, 1]), thread t writing K = t + 1, V = -(t + 1) to
    # slots 3000 t + i. Before the cache's lock was taken there: heap
    # corruption, CL_INVALID_KERNEL_ARGS or a wrong block.
    output = survives(KV_PRELUDE + textwrap.dedent("""
        from clbt import vllm
        from clbt._device_array import DeviceArray, Memory
        N, T = %d, 4
        def array(buffer, nbytes, shape, dtype, strides=None, offset=0):
            memory = Memory(buffer.int_ptr, device.queue.int_ptr, nbytes)
            return DeviceArray(memory, shape, dtype, strides, offset)
        storage = buffer_of(np.full(T * N * 2 * 4, -7.0, np.float32))
        kv = (T * N, 1, 1, 4)
        key_cache = array(storage, T * N * 32, kv, np.float32, (32, 16, 16, 4), 0)
        value_cache = array(storage, T * N * 32, kv, np.float32, (32, 16, 16, 4), 16)
        errors = []
        def work(t):
            key = array(buffer_of(np.full(4, t + 1.0, np.float32)), 16, (1, 1, 4), np.float32)
            value = array(buffer_of(np.full(4, -(t + 1.0), np.float32)), 16, (1, 1, 4),
                          np.float32)
            slots = buffer_of(np.arange(t * N, (t + 1) * N, dtype=np.int64))
            for i in range(N):
                slot = array(slots, N * 8, (1,), np.int64, None, 8 * i)
                try:
                    vllm.reshape_and_cache_flash(key, value, key_cache, value_cache, slot,
                                                 "auto", 1.0, 1.0, device=device)
                except clbt.Error as error:
                    errors.append(str(error))
        threads = [threading.Thread(target=work, args=(t,)) for t in range(T)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        got = _opencl.read(device.queue.int_ptr, storage.int_ptr,
                           np.empty((T, N, 2, 4), np.float32))
        expected = np.empty((T, N, 2, 4), np.float32)
        for t in range(T):
            expected[t, :, 0], expected[t, :, 1] = t + 1.0, -(t + 1.0)
        print("errors", errors[:1])
        print("written", np.array_equal(got, expected))
    """) % ROUNDS, timeout=300, flags=flags)
    assert output.splitlines() == ["errors []", "written True"]


# In a child: a thread calls call(opened) until it raises clbt.Error while
# this one closes opened, once the thread's first call has returned; the
# error's (status, message).
CLOSING_PRELUDE = """
import threading, time
def closing_while_calling(opened, call):
    ends = []
    started = threading.Event()
    def work():
        while True:
            try:
                call(opened)
            except clbt.Error as error:
                ends.append((error.status, error.message))
                return
            started.set()
    thread = threading.Thread(target=work)
    thread.start()
    started.wait()
    time.sleep(0.001)
    opened.close()
    thread.join()
    return ends
"""


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_closing_a_kv_cache_while_another_thread_writes(flags):
    # 50 rounds: a thread writes slot 0 of a fresh cache again and again
    # while the main thread closes the cache. close() waits for the write in
    # flight; every later write raises CLBT_NULL_ARGUMENT ("the KV cache is
    # closed"), which ends the thread: one such error a round, no crash
    # (before: the C cache freed under a write in flight).
    output = survives(KV_PRELUDE + CLOSING_PRELUDE + textwrap.dedent("""
        key = buffer_of(np.ones(4, np.float32))
        slots = buffer_of(np.zeros(1, np.int64))
        ends = []
        for _ in range(50):
            storage, cache = kv_cache(1)
            ends += closing_while_calling(cache, lambda c: c.write(key, key, slots, 1))
        print(len(ends), sorted(set(ends)))
    """), timeout=300, flags=flags)
    assert output.splitlines() == [
        "50 [('CLBT_NULL_ARGUMENT', 'the KV cache is closed')]"]


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
def test_closing_a_device_while_another_thread_calls_it(flags):
    # 20 rounds of each call: a thread calls a fresh Device (or makes a
    # table on it) again and again while the main thread closes the device.
    # A call in flight keeps the C device until it returns; every later
    # call raises CLBT_NULL_ARGUMENT ("the device is closed"), which ends
    # the thread: 20 such errors a call, no crash (before: finish and queue
    # were a SIGSEGV every run, the C device freed under them).
    output = survives(CLOSING_PRELUDE + textwrap.dedent("""
        calls = {
            "finish": lambda d: d.finish(),
            "queue": lambda d: d.queue,
            "context": lambda d: d.context,
            "selector": lambda d: d.selector,
            "table": lambda d: clbt.Table(d, block_size=16, max_num_reqs=1,
                                          max_num_blocks_per_req=1,
                                          max_num_batched_tokens=1).close(),
        }
        for name, call in calls.items():
            ends = []
            for _ in range(20):
                ends += closing_while_calling(clbt.Device(), call)
            print(name, len(ends), sorted(set(ends)))
    """), timeout=300, flags=flags)
    assert output.splitlines() == [
        "%s 20 [('CLBT_NULL_ARGUMENT', 'the device is closed')]" % name
        for name in ("finish", "queue", "context", "selector", "table")]
