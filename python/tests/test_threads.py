"""Threads (docs/threading.md, docs/python.md "Threads"): issue 27's
findings 3 and 4. Threads with tables of their own on one Device, and
threads sharing one Table while others use their own, each in a fresh
interpreter (so that an abort fails the test instead of killing pytest),
run plainly and with faulthandler on (which prints every thread's stack
should one crash). Expected values are derived by hand in the comments."""
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
