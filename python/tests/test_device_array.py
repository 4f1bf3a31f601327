"""clbt.DeviceArray and StackedDeviceArray, the device views the vLLM
facade hands out as vLLM's .gpu tensors: views by indexing, writes through
the queue, and reads as torch tensors or numpy arrays: snapshots, which
later device work leaves as they were. Expected values are written
here by hand; the buffers are made and read with the package's own OpenCL
calls, apart from the code under test."""
import os
import subprocess
import sys

import numpy as np
import pytest

import clbt
import clbt.vllm
from clbt import _opencl
from clbt._device_array import DeviceArray, Memory, StackedDeviceArray
from clbt._library import lib

try:
    import torch
except ImportError:  # the host forms are numpy arrays then
    torch = None




class Buffer:
    """A device buffer of values, with the package's own writes and reads."""

    def __init__(self, device, values):
        self.device = device
        self.values = np.ascontiguousarray(values)
        self.buffer = _opencl.create_buffer(lib.clbt_device_context(device._live()),
                                            self.values.nbytes)
        self.handle = self.buffer.int_ptr
        self.queue = lib.clbt_device_queue(device._live())
        _opencl.write(self.queue, self.handle, self.values.ctypes.data,
                      self.values.nbytes).wait()
        self.synced = 0

    def sync(self):
        self.synced += 1

    def array(self, shape=None, dtype=None):
        memory = Memory(self.handle, self.queue, self.values.nbytes, self.sync)
        return DeviceArray(memory, self.values.shape if shape is None else shape,
                           self.values.dtype if dtype is None else dtype)

    def read(self):
        out = np.empty_like(self.values)
        return _opencl.read(self.queue, self.handle, out)

    def release(self):
        self.buffer.close()


@pytest.fixture
def grid(device):
    """A 3 x 4 int32 buffer holding 0 .. 11."""
    buffer = Buffer(device, np.arange(12, dtype=np.int32).reshape(3, 4))
    yield buffer
    buffer.release()


def test_shape_dtype_strides_and_reads(grid):
    a = grid.array()
    assert a.shape == (3, 4) and a.np_dtype == np.int32
    assert a.dtype == (np.int32 if torch is None else torch.int32)
    assert a.stride() == (4, 1) and a.stride(0) == 4 and a.is_contiguous()
    assert a.numel() == 12 and a.dim() == 2 and len(a) == 3 and a.size(1) == 4
    host = a.cpu()
    if torch is not None:
        assert isinstance(host, torch.Tensor) and host.dtype == torch.int32
    assert host.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert a.numpy().tolist() == host.tolist() == a.tolist()
    assert np.asarray(a).sum() == 66
    assert grid.synced >= 3  # every read ran the owner's pending work first


def test_basic_indexing_gives_views_of_the_same_buffer(grid):
    a = grid.array()
    row = a[1]
    assert isinstance(row, DeviceArray) and row.shape == (4,) and row.tolist() == [4, 5, 6, 7]
    assert a[1, 2].item() == 6 and int(a[-1, -1]) == 11
    assert a[:, 1].tolist() == [1, 5, 9] and not a[:, 1].is_contiguous()
    assert a[::2, 1:3].tolist() == [[1, 2], [9, 10]]
    assert a[..., 3].tolist() == [3, 7, 11] and a[None, 0].shape == (1, 4)
    assert a[:, ::-1][0].tolist() == [3, 2, 1, 0]
    assert a[0:0].shape == (0, 4) and a[0:0].tolist() == []
    # A view starts inside the buffer: data_ptr is the buffer's handle plus
    # its byte offset, the same at every call.
    assert a[1].data_ptr() == a.data_ptr() + 16 == a[1:].data_ptr()
    assert a[2, 1].data_ptr() == a.data_ptr() + 36
    assert a.view(12)[5].item() == 5 and a.view(-1, 6)[1, 0].item() == 6
    # Any other index copies to the host (a torch tensor when torch is there).
    picked = a[[0, 2]]
    assert picked.tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]
    assert a[np.array([2, 0]), 0].tolist() == [8, 0]


@pytest.mark.parametrize("key", [3, -4, (0, 4), (1, 2, 0)])
def test_index_out_of_range_is_refused(grid, key):
    with pytest.raises(IndexError):
        grid.array()[key]


def test_writes_reach_the_buffer_in_queue_order(grid):
    a = grid.array()
    a[0].fill_(-1)
    a[1, 1:3] = [50, 60]
    a[:, 3].copy_(np.array([7, 8, 9], np.int32))  # a view with gaps
    a[2, 0] = 99
    assert grid.read().tolist() == [[-1, -1, -1, 7], [4, 50, 60, 8], [99, 9, 10, 9]]
    a[2].copy_(a[1])  # device to device, through the host
    assert grid.read()[2].tolist() == [4, 50, 60, 8]
    a.zero_()
    assert not grid.read().any()
    a[[0, 2], 1] = 5  # an index that copies: read, patched, written back
    assert grid.read()[:, 1].tolist() == [5, 0, 5]


@pytest.mark.parametrize("shape, error, words", [
    ((-2, -6), clbt.InvalidArgumentError, "shape[0] is -2; a size >= 0 (or one -1, inferred)"),
    ((3, -4), clbt.InvalidArgumentError, "shape[1] is -4; a size >= 0 (or one -1, inferred)"),
    ((-1, -1), clbt.InvalidArgumentError, "shape (-1, -1) has 2 sizes of -1; one can be "
                                          "inferred"),
    ((5, -1), clbt.InvalidArgumentError, "shape (5, -1) is invalid for 12 elements"),
    ((0, -1), clbt.InvalidArgumentError, "shape (0, -1) is invalid for 12 elements"),
    ((5, 3), clbt.InvalidArgumentError, "shape (5, 3) is invalid for 12 elements"),
    ((2.5, 4.8), clbt.TypeMismatchError, "shape[0] is a float; an int expected"),
])
def test_view_refuses_negative_and_inconsistent_shapes(grid, shape, error, words):
    # 12 elements: (-2, -6) multiplied to 12 and was taken, as was (2.5,
    # 4.8) (truncated to 2 x 4 = 8). Refused as clbt's error naming the
    # shape, which is also the RuntimeError torch raises for one.
    a = grid.array()
    with pytest.raises(error) as refused:
        a.view(*shape)
    assert refused.value.status == "CLBT_INVALID_ARGUMENT"
    assert refused.value.message == words
    if error is clbt.InvalidArgumentError:
        assert isinstance(refused.value, RuntimeError)
    assert a.view(-1, 6).shape == (2, 6) and a.view((4, 3)).shape == (4, 3)
    assert a[0:0].view(4, 0).shape == (4, 0)
    assert grid.read().tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


@pytest.mark.parametrize("value, error", [(1.5, TypeError), (2**40, ValueError),
                                          ([1, 2, 3], ValueError)])
def test_writes_that_do_not_fit_are_refused_and_change_nothing(grid, value, error):
    before = grid.read().copy()
    with pytest.raises(error):
        grid.array()[0].copy_(value)
    assert grid.read().tolist() == before.tolist()
    with pytest.raises(ValueError):
        grid.array().fill_(2**40)


@pytest.fixture
def numpy_host_arrays():
    """Host arrays as numpy's for the test, as where torch is missing; the
    setting as it was afterwards."""
    previous = clbt.set_host_arrays("numpy")
    yield
    clbt.set_host_arrays(previous)


def test_operators_see_the_contents_without_torch(grid, numpy_host_arrays):
    a = grid.array()
    assert isinstance(a.cpu(), np.ndarray) and a.dtype == np.int32
    assert np.array_equal(a, np.arange(12).reshape(3, 4))
    assert (a[1] == np.array([4, 5, 6, 7])).all() and (a[0] + a[0]).tolist() == [0, 2, 4, 6]
    assert (a == 0).sum() == 1 and isinstance(a[[0]], np.ndarray)


def test_torch_functions_and_operators_see_the_contents(grid):
    if torch is None:
        return test_operators_see_the_contents_without_torch.__doc__  # covered above
    a = grid.array()
    expected = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    assert torch.equal(a, expected) and torch.equal(expected[1], a[1])
    assert (a[0] == torch.tensor([0, 1, 2, 3], dtype=torch.int32)).all()
    assert ((a[2] - 8) == torch.arange(4)).all() and (a[0] + a[0]).tolist() == [0, 2, 4, 6]
    assert (a == 0).sum().item() == 1 and bool(a[0, 1] == 1)
    assert torch.stack([a[0], a[1]]).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    clone = a.clone()
    a.zero_()
    assert clone.tolist()[1] == [4, 5, 6, 7]  # a host copy, kept
    assert a.to(torch.int64).dtype == torch.int64


def test_host_arrays_are_the_callers_choice(grid, device, numpy_host_arrays):
    # cpu(), clone() and the facade's host views give what set_host_arrays
    # says, whether or not torch is installed; dtype follows. A kind that
    # is none of the three, or torch where it does not import, is refused
    # and changes nothing.
    a = grid.array()
    table = clbt.vllm.BlockTable(16, 2, 2, 4, False, device)
    assert clbt.host_arrays() == "numpy"
    for host in (a.cpu(), a[1].clone(), table.get_cpu_tensor(), table.block_table.cpu):
        assert type(host) is np.ndarray
    assert a.dtype == np.dtype(np.int32) and a.cpu().tolist()[1] == [4, 5, 6, 7]
    with pytest.raises(clbt.InvalidArgumentError, match="set_host_arrays' kind is 'jax'; "
                       "'auto', 'numpy' or 'torch' expected"):
        clbt.set_host_arrays("jax")
    if torch is None:
        with pytest.raises(ImportError, match="kind is 'torch', and torch does not import"):
            clbt.set_host_arrays("torch")
        assert clbt.host_arrays() == "numpy" and type(a.cpu()) is np.ndarray
        assert clbt.set_host_arrays("auto") == "numpy"
        assert type(a.cpu()) is np.ndarray  # auto without torch
    else:
        assert clbt.set_host_arrays("torch") == "numpy" and clbt.host_arrays() == "torch"
        for host in (a.cpu(), a[1].clone(), table.get_cpu_tensor(), table.block_table.cpu):
            assert type(host) is torch.Tensor
        assert a.dtype == torch.int32 and a.cpu().tolist()[1] == [4, 5, 6, 7]
        assert clbt.set_host_arrays("auto") == "torch"
        assert type(a.cpu()) is torch.Tensor  # auto with torch
        clbt.set_host_arrays("numpy")
        # torch's functions still see torch tensors: torch is calling
        assert torch.equal(a, torch.arange(12, dtype=torch.int32).reshape(3, 4))
        assert (a[0] == torch.tensor([0, 1, 2, 3], dtype=torch.int32)).all()
    table.close()


@pytest.mark.parametrize("kind", ["numpy", "torch", "auto", "bogus"])
def test_host_arrays_from_the_environment(device, kind):
    # CLBT_HOST_ARRAYS sets the host arrays of a process that does not call
    # set_host_arrays; with numpy, reads never import torch.
    code = ("import sys, clbt, clbt.vllm\n"
            "table = clbt.vllm.BlockTable(16, 2, 2, 4, False, None)\n"
            "host = table.block_table.gpu.cpu()\n"
            "print(type(host).__module__, type(host).__name__, 'torch' in sys.modules,"
            " clbt.host_arrays())\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, CLBT_HOST_ARRAYS=kind), timeout=300)
    torch_or_numpy = "numpy ndarray False numpy" if torch is None else \
        "torch Tensor True torch"
    expected = {"numpy": "numpy ndarray False numpy", "torch": torch_or_numpy,
                "auto": torch_or_numpy}
    if kind in expected and (kind != "torch" or torch is not None):
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == expected[kind]
    else:
        assert run.returncode != 0
        assert ("CLBT_HOST_ARRAYS is 'bogus'; 'auto', 'numpy' or 'torch' expected"
                if kind == "bogus" else
                "CLBT_HOST_ARRAYS is 'torch', and torch does not import") in run.stderr


def test_reads_are_snapshots_that_later_device_work_leaves(grid):
    # numpy() and cpu() are what the buffer held at the read, as torch's
    # .cpu() of a device tensor is: later writes, fills and kernels do not
    # change them (they were views of a mapping, which later commands then
    # wrote), and a write to one stays on the host.
    a = grid.array()
    whole, row, column = a.numpy(), a[1].cpu(), a[:, 1].numpy()
    a.fill_(9)
    a[0, 0] = 42
    assert whole.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert row.tolist() == [4, 5, 6, 7] and column.tolist() == [1, 5, 9]
    assert whole.flags.writeable and whole.flags.c_contiguous and column.flags.c_contiguous
    whole[1, 1] = -1  # the snapshot's own memory
    assert grid.read().tolist() == [[42, 9, 9, 9], [9, 9, 9, 9], [9, 9, 9, 9]]
    assert a.numpy()[0].tolist() == [42, 9, 9, 9]


def test_a_read_of_the_slot_mapping_outlives_the_next_step(device):
    # The audit's case: rows {5, 6} of 16-token blocks; positions 0, 1 map
    # to slots 80, 81, then positions 16, 17 to 96, 97. The first read
    # keeps 80, 81.
    table = clbt.vllm.BlockTable(16, 4, 8, 64, False, device)
    table.append_row([5, 6], 0)
    table.commit_block_table(1)
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([0, 1], np.int64))
    first = table.slot_mapping.gpu[:2].cpu()
    table.compute_slot_mapping(1, np.array([0, 2], np.int32), np.array([16, 17], np.int64))
    device.finish()
    assert first.tolist() == [80, 81]
    assert table.slot_mapping.gpu[:2].tolist() == [96, 97]


def test_stacked_arrays_index_as_one(device):
    buffers = [Buffer(device, np.arange(4, dtype=np.int64) + 10 * g) for g in range(3)]
    try:
        stack = StackedDeviceArray(b.array() for b in buffers)
        assert stack.shape == (3, 4) and stack.np_dtype == np.int64
        assert stack.tolist() == [[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23]]
        assert isinstance(stack[1], DeviceArray) and stack[1].tolist() == [10, 11, 12, 13]
        assert stack[:, :2].tolist() == [[0, 1], [10, 11], [20, 21]]
        assert stack[1:, 3].tolist() == [13, 23] and stack[2, 1].item() == 21
        assert (stack[:, 1] == np.array([1, 11, 21])).all()
        assert stack.data_ptr() == stack[:, :2].data_ptr()
        stack[:, 0] = [7, 8, 9]
        stack[2].fill_(-1)
        assert [b.read().tolist() for b in buffers] == [[7, 1, 2, 3], [8, 11, 12, 13],
                                                        [-1, -1, -1, -1]]
        with pytest.raises(IndexError):
            stack[3]
    finally:
        for b in buffers:
            b.release()


def test_an_array_outlives_the_table_it_came_from(device):
    table = clbt.Table(device, block_size=16, max_num_reqs=2, max_num_blocks_per_req=2,
                       max_num_batched_tokens=4)
    handle = lib.clbt_table_slot_mapping(table._live())
    memory = Memory(handle, lib.clbt_device_queue(device._live()), 32, None)
    slots = DeviceArray(memory, (4,), np.int64)
    table.close()  # the array holds its own reference on the buffer
    assert slots.tolist() == [-1, -1, -1, -1]


def test_empty_refuses_a_shape_whose_bytes_numpy_would_wrap(device):
    # 2**32 x 2**32 float32 is 2**66 bytes: numpy's int64 product wraps it
    # to 0, which would put an array of that shape over a 4-byte buffer.
    with pytest.raises(clbt.InvalidArgumentError, match=r"shape \(4294967296, 4294967296\) "
                       r"of float32 is 73786976294838206464 bytes"):
        DeviceArray.empty(device, (2 ** 32, 2 ** 32), np.float32)
    for shape, found in ((5, "an int"), ((2.0, 3), "a tuple")):
        with pytest.raises(clbt.TypeMismatchError, match="shape is %s" % found):
            DeviceArray.empty(device, shape, np.float32)
    made = DeviceArray.empty(device, (3, 0), np.float32)
    assert made.shape == (3, 0) and made.numpy().shape == (3, 0)
