"""An independent model of one block table, written from the rules of
vLLM's block_table.py and the departures docs/semantics.md lists; the tests
compare clbt with it. It shares no code with clbt."""
import numpy as np

PAD = -1


class Refused(Exception):
    """The model's verdict that clbt must refuse an operation: args[0] is
    the status clbt must give."""


class TableModel:
    def __init__(self, block_size, max_num_reqs, width, max_num_batched_tokens,
                 kernel_block_size=None, cp_world_size=1, cp_rank=0, interleave=1,
                 maps_tokens=True):
        self.kv_block_size = block_size
        self.block_size = kernel_block_size or block_size
        self.split = block_size // self.block_size
        self.max_num_reqs, self.width = max_num_reqs, width
        self.max_tokens = max_num_batched_tokens
        self.world, self.rank, self.interleave = cp_world_size, cp_rank, interleave
        self.maps_tokens = maps_tokens
        self.rows = np.zeros((max_num_reqs, width), np.int64)
        self.lengths = np.zeros(max_num_reqs, np.int64)
        self.committed_rows = self.rows.copy()
        self.committed_lengths = self.lengths.copy()

    def _row(self, row):
        if not 0 <= row < self.max_num_reqs:
            raise Refused("CLBT_ROW_OUT_OF_RANGE")

    def check_append(self, row, ids, start):
        """Refuses what append_row (replace: add_row) would refuse; returns
        the kernel blocks the ids become."""
        self._row(row)
        kernel = [b * self.split + j for b in ids for j in range(self.split)]
        if start + len(kernel) > self.width:
            raise Refused("CLBT_ROW_OVERFLOW")
        if any(b < 0 or b * self.split + self.split - 1 > 2**31 - 1 for b in ids):
            raise Refused("CLBT_INVALID_BLOCK_ID")
        return kernel

    def append_row(self, ids, row):
        self._row(row)
        start = self.lengths[row]
        kernel = self.check_append(row, ids, start)
        self.rows[row, start:start + len(kernel)] = kernel
        self.lengths[row] += len(kernel)

    def add_row(self, ids, row):
        self.check_append(row, ids, 0)
        self.lengths[row] = 0
        self.append_row(ids, row)

    def clear_row(self, row):
        self._row(row)
        self.rows[row, :self.lengths[row]] = 0
        self.lengths[row] = 0

    def move_row(self, src, dst):
        self._row(src)
        self._row(dst)
        if src == dst:  # departure: vLLM would erase the row
            return
        n = self.lengths[src]
        self.rows[dst, :n] = self.rows[src, :n]
        self.lengths[dst] = n
        self.rows[src, :n] = 0
        self.lengths[src] = 0

    def swap_row(self, a, b):
        self._row(a)
        self._row(b)
        self.rows[[a, b]] = self.rows[[b, a]]
        self.lengths[[a, b]] = self.lengths[[b, a]]

    def commit(self, num_reqs):
        if num_reqs > self.max_num_reqs:
            raise Refused("CLBT_TOO_MANY_REQUESTS")
        self.committed_rows[:num_reqs] = self.rows[:num_reqs]
        self.committed_lengths[:num_reqs] = self.lengths[:num_reqs]

    def clear(self):  # departure: the lengths are reset too
        self.rows[:] = 0
        self.lengths[:] = 0
        self.committed_rows[:] = 0
        self.committed_lengths[:] = 0

    def slot_mapping(self, num_reqs, query_start_loc, positions):
        """The reference kernel's arithmetic on the committed rows, with
        clbt's padding: the whole output is written, and a token of a
        malformed batch, at a negative position, or past its row's
        committed blocks gets -1."""
        out = np.full(self.max_tokens, PAD, np.int64)
        qsl = [int(q) for q in query_start_loc[:num_reqs + 1]]
        num_tokens = len(positions)
        if qsl[0] < 0 or qsl[-1] > num_tokens or any(b < a for a, b in zip(qsl, qsl[1:])):
            return out
        virtual = self.kv_block_size * self.world
        for r in range(num_reqs):
            for t in range(qsl[r], qsl[r + 1]):
                position = int(positions[t])
                if position < 0:
                    continue
                vbi, vbo = divmod(position, virtual)
                if (vbo // self.interleave) % self.world != self.rank:
                    continue
                local = vbo // (self.world * self.interleave) * self.interleave \
                    + vbo % self.interleave
                index = vbi * self.split + local // self.block_size
                if index >= self.committed_lengths[r]:
                    continue
                out[t] = self.committed_rows[r, index] * self.block_size \
                    + local % self.block_size
        return out
