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
    if clbt._opencl.pyopencl is None:
        assert isinstance(tensor, clbt.Buffer)
    else:
        assert tensor.shape == (1, 4) and tensor.get().tolist() == [[5, 6, 0, 0]]
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 17]))
    assert table.slot_mapping.np[:3].tolist() == [80, 97, -1]
    table.close()


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


def read_views(device, views, shapes, dtype):
    """Device views returned by BlockTables read back: PyOpenCL arrays
    directly, handles (whole buffers) through the package's read."""
    return [view.get() if hasattr(view, "get") else
            clbt._opencl.read(device.queue.int_ptr, view.int_ptr, np.empty(shape, dtype))
            for view, shape in zip(views, shapes)]


@pytest.mark.parametrize("zero_tails", [False, True])
def test_block_tables_persistent_loop_matches_the_model(device, zero_tails):
    # Model Runner V2's call sequence: arrivals take a free slot
    # (overwrite), running requests grow (append), finished ones free their
    # slot; each step gathers through idx_mapping (shuffled, padded, with a
    # padding entry) and maps the batch's tokens.
    rng = random.Random(SEED)
    print("CLBT_TEST_SEED=%d" % SEED)
    tables = vllm.BlockTables([16, 32], max_num_reqs=6, max_num_batched_tokens=24,
                              max_model_len=256, device=device, kernel_block_sizes=[16, 16],
                              zero_gathered_tails=zero_tails)
    groups = tables._table.groups
    models = [TableModel(b, 6, g.width, 24, kernel_block_size=16, zero_gathered_tails=zero_tails)
              for b, g in zip([16, 32], groups)]
    running, free, next_id = {}, list(range(6)), 1  # slot -> tokens so far
    for step in range(12):
        for slot in [s for s in running if rng.random() < 0.2]:
            del running[slot]
            free.append(slot)
        while free and rng.random() < 0.6:
            slot = free.pop(rng.randrange(len(free)))
            ids = ([next_id, next_id + 1], [next_id + 2])  # 32 tokens in each group
            next_id += 3
            tables.append_block_ids(slot, ids, overwrite=True)
            for model, group_ids in zip(models, ids):
                model.add_row(group_ids, slot)
            running[slot] = rng.randrange(1, 31)
        for slot in running:  # decode: one token, one new block when full
            if running[slot] % 32 == 0:
                ids = ([next_id, next_id + 1], [next_id + 2])
                next_id += 3
                tables.append_block_ids(slot, ids, overwrite=False)
                for model, group_ids in zip(models, ids):
                    model.append_row(group_ids, slot)
        tables.apply_staged_writes()
        batch = list(running)
        rng.shuffle(batch)
        idx = np.array(batch + [-1] * (len(batch) < 6), np.int32)
        padded = min(len(idx) + rng.randrange(2), 6)
        positions = np.array([running[s] for s in batch] + [0] * (len(batch) < 6), np.int64)
        qsl = np.arange(len(idx) + 1, dtype=np.int32)
        gathered = tables.gather_block_tables(idx, padded)
        for model in models:
            model.step(len(idx), qsl[:1].repeat(len(idx) + 1), [], idx, padded, gather=True)
        for got, model in zip(read_views(device, gathered, [(padded, g.width) for g in groups],
                                               np.int32), models):
            assert got.tolist() == model.gathered[:padded].tolist(), "step %d" % step
        slots = tables.compute_slot_mappings(idx, qsl, positions)
        for got, model in zip(read_views(device, slots, [len(positions)] * 2, np.int64), models):
            expected = model.step(len(idx), qsl, positions, idx)
            assert got.tolist() == expected[:len(positions)].tolist(), "step %d" % step
        for slot in running:
            running[slot] += 1
    tables.close()
