"""A serving loop that drives clbt from Python the way vLLM's model runner
drives its block tables: code written for vllm.v1.worker.block_table runs
here by importing clbt.vllm instead.

A simulated scheduler admits requests, schedules their prompts in chunks
and then a token a step, grows each request's blocks as its tokens arrive
(one batch update for the whole step), finishes requests and condenses the
batch by moving the last row into a finished one's. Every step it commits,
computes the slot mapping, and checks every slot against its own
bookkeeping of the blocks.

    /usr/bin/python3 examples/serving_loop.py [--steps N] [--seed N]

Runs on the device CLBT_DEVICE selects; exits 0 when every slot was right.
"""
import argparse
import random
import sys

import numpy as np

from clbt.vllm import MultiGroupBlockTable

BLOCK_SIZES = [16, 32]  # two KV-cache groups, as hybrid models have
MAX_REQS, MAX_TOKENS, MAX_LEN = 8, 64, 256


def whole_number(least):
    """An argparse type: a whole number of at least least."""
    def parse(text):
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError("%r is not a whole number >= %d" % (text, least))
        return int(text)
    return parse


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="CLBT_DEVICE selects the device.")
    parser.add_argument("--steps", type=whole_number(1), default=50,
                        help="how many steps to run (at least 1)")
    parser.add_argument("--seed", type=whole_number(0), default=1,
                        help="the seed of the example's random choices")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    table = MultiGroupBlockTable(
        max_num_reqs=MAX_REQS, max_num_batched_tokens=MAX_TOKENS, pin_memory=False,
        device=None, block_sizes=BLOCK_SIZES, kernel_block_sizes=BLOCK_SIZES,
        max_num_blocks=[MAX_LEN // size for size in BLOCK_SIZES])
    free = [list(range(MAX_LEN // size * MAX_REQS)) for size in BLOCK_SIZES]
    running = []  # row r: [total tokens, tokens done, blocks per group]
    finished = tokens = checked = wrong = 0
    for step in range(args.steps):
        # Finished requests give their blocks back; the last row moves in.
        for row in reversed(range(len(running))):
            if running[row][1] == running[row][0]:
                for pool, blocks in zip(free, running[row][2]):
                    pool.extend(blocks)
                table.clear_row(row)
                if row != len(running) - 1:
                    table.move_row(len(running) - 1, row)
                running[row] = running[-1]
                running.pop()
                finished += 1
        while len(running) < MAX_REQS and rng.random() < 0.4:
            running.append([rng.randrange(1, MAX_LEN // 2), 0, [[] for _ in BLOCK_SIZES]])
            table.add_row(tuple([] for _ in BLOCK_SIZES), len(running) - 1)
        # Schedule; the step's new blocks go to the table in one batch.
        qsl, positions, rows, counts, ids = [0], [], [], [[] for _ in BLOCK_SIZES], \
            [[] for _ in BLOCK_SIZES]
        for row, request in enumerate(running):
            total, done, blocks = request
            count = min(total - done, MAX_TOKENS - len(positions),
                        1 if done else rng.randrange(1, 48))
            rows.append(row)
            for g, size in enumerate(BLOCK_SIZES):
                new = [free[g].pop() for _ in range(-(-(done + count) // size) - len(blocks[g]))]
                blocks[g].extend(new)
                counts[g].append(len(new))
                ids[g].extend(new)
            positions.extend(range(done, done + count))
            request[1] += count
            qsl.append(len(positions))
        table.append_rows(rows, counts, ids)
        table.commit_block_table(len(running))
        table.compute_slot_mapping(len(running), np.array(qsl, np.int32),
                                   np.array(positions, np.int64))
        # Token t of request r at position p writes block p // size's slot.
        for g, size in enumerate(BLOCK_SIZES):
            slots = table[g].slot_mapping.np
            for row, request in enumerate(running):
                for t in range(qsl[row], qsl[row + 1]):
                    p = positions[t]
                    wrong += slots[t] != request[2][g][p // size] * size + p % size
            wrong += int(np.count_nonzero(slots[len(positions):] != -1))
            checked += MAX_TOKENS
        tokens += len(positions)
    table.close()
    print("serving_loop.py: %d steps, %d requests finished, %d tokens, %d slots checked, "
          "%d wrong" % (args.steps, finished, tokens, checked, wrong))
    return 0 if wrong == 0 and finished > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
