"""Device copies of the host arrays a table's batch calls take.

A non-blocking write reads its host memory at some later time, so each
batch gets an upload slot of its own: host staging the write reads, and a
device buffer the batch's C call reads through one sub-buffer per input.
A slot is reused once its write has ended, and never waited for: a call
takes a free slot, or makes one, whatever the device is doing, so a
caller may keep any number of batches in flight (behind a wait list that
has not fired, say) and change its arrays as soon as a call returns.
This is what C's staging does for commits (src/engine/staging.c).

Each slot's inputs lie in one buffer, the per-request arrays first and the
positions last, so a batch is one write of a prefix of the slot: one
command and one event a batch. The write's event is kept until the write
ends (ended or failed), for PoCL aborts the process when a command whose
event nobody holds fails through a wait list; the slots in flight are in
queue order, so reaping polls only the oldest: O(1) polls a call, however
many are in flight. Slots freed past two are released, so what the pool
keeps when idle is two slots.
"""
import collections
import ctypes

import numpy as np

from . import _opencl

# The inputs in the order their regions lie in a slot.
DTYPES = {"query_start_loc": np.int32, "idx_mapping": np.int32, "seq_lens": np.int32,
          "positions": np.int64}
_KEPT_FREE = 2


class _Slot:
    """One batch's host staging, device buffer and sub-buffers, and the
    write's Event while it may run."""

    def __init__(self, context, layout, size):
        self.host = np.empty(size, np.uint8)
        self.buffer = _opencl.create_buffer(context, size, read_only=True)
        self.regions = {}
        try:
            for name, (origin, nbytes) in layout.items():
                self.regions[name] = _opencl.sub_buffer(self.buffer, origin, nbytes)
        except BaseException:
            self.release()
            raise
        self.event = None

    def release(self):
        for region in self.regions.values():
            region.close()
        self.buffer.close()


class Uploads:
    """The upload slots of one table, sized for its max_num_reqs and
    max_num_batched_tokens."""

    def __init__(self, queue, context, max_num_reqs, max_num_tokens):
        self._queue, self._context = queue, context
        capacity = {"query_start_loc": max_num_reqs + 1, "idx_mapping": max_num_reqs,
                    "seq_lens": max_num_reqs, "positions": max(max_num_tokens, 1)}
        alignment = max(_opencl.base_address_alignment(queue), 8)
        self._layout, size = {}, 0
        for name, dtype in DTYPES.items():
            nbytes = capacity[name] * np.dtype(dtype).itemsize
            self._layout[name] = (size, nbytes)
            size += -(-nbytes // alignment) * alignment
        self._size = size
        self.capacity = capacity
        self._free = []
        self._in_flight = collections.deque()

    def upload(self, arrays):
        """Enqueues one write of a batch's host inputs, arrays = {name:
        (address of a C array of the input's dtype, entries to copy)}, each
        within its capacity; returns {name: int handle of its buffer}
        without waiting."""
        self._reap()
        slot = self._free.pop() if self._free else _Slot(self._context, self._layout,
                                                          self._size)
        end = 0
        base = slot.host.ctypes.data
        for name, (address, count) in arrays.items():
            origin = self._layout[name][0]
            nbytes = count * np.dtype(DTYPES[name]).itemsize
            ctypes.memmove(base + origin, address, nbytes)
            end = max(end, origin + nbytes)
        try:
            slot.event = _opencl.write(self._queue, slot.buffer.int_ptr, base, end) if end \
                else None
        except BaseException:
            self._free.append(slot)
            raise
        (self._in_flight.append if slot.event else self._free.append)(slot)
        return {name: slot.regions[name].int_ptr for name in arrays}

    def _reap(self):
        while self._in_flight and _opencl.ended(self._in_flight[0].event):
            slot = self._in_flight.popleft()
            slot.event.close()
            slot.event = None
            if len(self._free) < _KEPT_FREE:
                self._free.append(slot)
            else:
                slot.release()

    @property
    def slots(self):
        """(slots in flight, free slots kept)."""
        return len(self._in_flight), len(self._free)

    def release(self):
        """Waits for the writes in flight (as clbt_table_destroy waits for
        its commits), then releases every slot."""
        in_flight, self._in_flight = list(self._in_flight), collections.deque()
        events = [slot.event for slot in in_flight]
        try:
            if all(event.open for event in events):
                _opencl.wait_until_ended(events)
            else:
                # The collector finalised an event of a garbage cycle before
                # the table that held it (at interpreter exit it takes a
                # cycle's objects in any order): the queue, which the C
                # table keeps, still says when the writes have run.
                _opencl.finish(self._queue)
        finally:
            for slot in in_flight + self._free:
                if slot.event is not None:
                    slot.event.close()
                slot.release()
            self._free = []
