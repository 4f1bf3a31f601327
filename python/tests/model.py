"""An independent model of one block table, written from the rules of
vLLM's block_table.py and the departures docs/semantics.md lists, and of
its export from docs/semantics.md's Export rules (FlashInfer's, OpenVINO's
and FA3's documented layouts); the tests compare clbt with it. It shares no
code with clbt."""
import numpy as np

PAD = -1


class Refused(Exception):
    """The model's verdict that clbt must refuse an operation: args[0] is
    the status clbt must give."""


class TableModel:
    def __init__(self, block_size, max_num_reqs, width, max_num_batched_tokens,
                 kernel_block_size=None, cp_world_size=1, cp_rank=0, interleave=1,
                 maps_tokens=True, zero_gathered_tails=False):
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
        self.zero_gathered_tails = zero_gathered_tails
        self.gathered = np.zeros((max_num_reqs, width), np.int64)  # zero at creation
        self.rejected = 0  # the device's rejected-token counter

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

    def truncate_row(self, row, num_blocks):
        self._row(row)
        keep = min(num_blocks * self.split, self.lengths[row])
        self.rows[row, keep:] = 0
        self.lengths[row] = keep

    def clear(self):  # departure: the lengths are reset too
        self.rows[:] = 0
        self.lengths[:] = 0
        self.committed_rows[:] = 0
        self.committed_lengths[:] = 0

    def _row_of(self, r, idx_mapping):
        """The row request r reads: idx_mapping[r] (the persistent model),
        or r (v1)."""
        return r if idx_mapping is None else int(idx_mapping[r])

    def slot_mapping(self, num_reqs, query_start_loc, positions, idx_mapping=None):
        """The reference kernel's arithmetic on the committed rows, with
        clbt's padding: the whole output is written, and a token of a
        malformed batch, at a negative position, or past its row's
        committed blocks gets -1 and is counted. Request r reads row
        idx_mapping[r]: a negative one gives its tokens -1 uncounted, one
        not below max_num_reqs gives -1 counted."""
        out = np.full(self.max_tokens, PAD, np.int64)
        qsl = [int(q) for q in query_start_loc[:num_reqs + 1]]
        num_tokens = len(positions)
        if qsl[0] < 0 or qsl[-1] > num_tokens or any(b < a for a, b in zip(qsl, qsl[1:])):
            self.rejected += num_tokens
            return out
        virtual = self.kv_block_size * self.world
        for r in range(num_reqs):
            row = self._row_of(r, idx_mapping)
            if row < 0:
                continue
            for t in range(qsl[r], qsl[r + 1]):
                position = int(positions[t])
                if row >= self.max_num_reqs or position < 0:
                    self.rejected += 1
                    continue
                if not self.owns(position):
                    continue
                vbi, vbo = divmod(position, virtual)
                local = vbo // (self.world * self.interleave) * self.interleave \
                    + vbo % self.interleave
                index = vbi * self.split + local // self.block_size
                if index >= self.committed_lengths[row]:
                    self.rejected += 1
                    continue
                out[t] = self.committed_rows[row, index] * self.block_size \
                    + local % self.block_size
        return out

    def step(self, num_reqs, query_start_loc, positions, idx_mapping=None, num_reqs_padded=0,
             gather=False):
        """clbt's step: every row committed, the slot mapping through
        idx_mapping (None when the table maps no tokens), and with gather
        the gathered table updated."""
        self.commit(self.max_num_reqs)
        slots = None
        if self.maps_tokens:
            slots = self.slot_mapping(num_reqs, query_start_loc, positions, idx_mapping)
        if gather:
            self.gather(num_reqs, idx_mapping, num_reqs_padded or num_reqs)
        return slots

    def gather(self, num_reqs, idx_mapping, num_reqs_padded):
        """Gathered row b < num_reqs: its row's committed entries, and past
        them 0 with zero_gathered_tails, else what was there; a padding
        request's row and rows [num_reqs, num_reqs_padded) are 0, and so is
        the row of an index not below max_num_reqs, which is counted once."""
        for b in range(num_reqs_padded):
            row = self._row_of(b, idx_mapping) if b < num_reqs else -1
            if not 0 <= row < self.max_num_reqs:
                self.gathered[b] = 0
                self.rejected += row >= self.max_num_reqs
                continue
            length = self.committed_lengths[row]
            self.gathered[b, :length] = self.committed_rows[row, :length]
            if self.zero_gathered_tails:
                self.gathered[b, length:] = 0

    def owns(self, position):
        """Whether this CP rank holds a position's KV (the slot mapping's
        rule; every position without CP)."""
        return (position % (self.kv_block_size * self.world) // self.interleave) \
            % self.world == self.rank

    def local_count(self, length):
        """How many of positions [0, length) this rank holds."""
        return sum(1 for p in range(length) if self.owns(p))

    def export(self, num_reqs, query_start_loc, positions, idx_mapping=None,
               num_reqs_padded=0, seq_lens=None):
        """The CSR and OpenVINO's arrays of export_all, as lists: indptr,
        indices, last_page_len, past_lens, subsequence_begins."""
        parts = self.export_all(num_reqs, query_start_loc, positions, idx_mapping,
                                num_reqs_padded, seq_lens)
        return tuple(parts[name] for name in ("paged_kv_indptr", "paged_kv_indices",
                                              "paged_kv_last_page_len", "past_lens",
                                              "subsequence_begins"))

    def export_all(self, num_reqs, query_start_loc, positions, idx_mapping=None,
                   num_reqs_padded=0, seq_lens=None, dense_row_pitch=None):
        """Every export array for a batch, from the committed rows
        (docs/semantics.md, Export), as a dict of lists keyed as clbt.Export.
        Request r's length L is seq_lens[r], else its last position + 1 (0
        with no token); this rank holds n of positions [0, L) and c of
        [0, L - q), filling its kernel blocks densely, so its pages are its
        row's first ceil(n / K). A request whose row index is not below
        max_num_reqs, whose L is below its query, or whose pages outrun its
        committed row (or, with a dense table, the pitch P: 0 means the
        width) is rejected and counted; it and a padding request (negative
        index, or r >= num_reqs) get nothing: no pages, lengths 0, a zero
        dense row, no tokens in subsequence_begins. last_page_len is 0 for
        a request with no page (vLLM's FlashInfer backend)."""
        padded = num_reqs_padded or num_reqs
        pitch = None if dense_row_pitch is None else dense_row_pitch or self.width
        qsl = [int(q) for q in query_start_loc[:num_reqs + 1]]
        num_tokens, K = len(positions), self.block_size
        out = {name: [] for name in ("paged_kv_last_page_len", "past_lens", "seq_lens",
                                     "dcp_local_seq_lens", "context_kv_last_page_len")}
        out.update(paged_kv_indptr=[0], paged_kv_indices=[], context_kv_indptr=[0],
                   context_kv_indices=[], page_table=[],
                   subsequence_begins=[min(max(qsl[0], 0), num_tokens)])
        lengths = []
        for r in range(padded):
            row = self._row_of(r, idx_mapping) if r < num_reqs else -1
            length = local = context = query = pages = 0
            if row >= 0:
                query = qsl[r + 1] - qsl[r]
                length = int(seq_lens[r]) if seq_lens is not None else \
                    (int(positions[qsl[r + 1] - 1]) + 1 if query else 0)
                local = self.local_count(length)
                context = self.local_count(length - query)
                pages = -(-local // K)
                if row >= self.max_num_reqs or length < query or \
                        pages > self.committed_lengths[row] or \
                        (pitch is not None and pages > pitch):
                    self.rejected += 1
                    row = -1
            if row < 0:
                length = local = context = query = pages = 0
            else:
                lengths.append(length)
            ids = [int(i) for i in self.committed_rows[row, :pages]] if pages else []
            for prefix, count in (("paged_kv_", local), ("context_kv_", context)):
                n_pages = -(-count // K)
                out[prefix + "indices"] += ids[:n_pages]
                out[prefix + "indptr"].append(out[prefix + "indptr"][-1] + n_pages)
                out[prefix + "last_page_len"].append(count - (n_pages - 1) * K if n_pages else 0)
            out["past_lens"].append(context)
            out["seq_lens"].append(length)
            out["dcp_local_seq_lens"].append(local)
            out["subsequence_begins"].append(min(out["subsequence_begins"][-1] + query,
                                                 num_tokens))
            if pitch is not None:
                out["page_table"].append(ids + [0] * (pitch - pages))
        out["max_seq_len"] = [max(lengths, default=0)]
        if pitch is None:
            del out["page_table"]
        return out
