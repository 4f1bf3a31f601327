"""clbt's exceptions: one class per kind of failure, each also the built-in
exception a Python caller would catch for it.

Every C status (CLBT_STATUS_MAP in clbt.h) maps to exactly one class, so
``except ValueError`` catches what a malformed argument raises and
``except clbt.Error`` catches everything clbt raises. ``Error(code,
message)`` builds the class of its status, so code that raises or catches
``Error`` keeps working. The package's own checks, made before a C call
reads an argument, raise the same classes with the status C would have
returned; a wrong type (a float array, an int where a sequence or a
buffer goes) is a TypeMismatchError, which is a TypeError.
"""
from ._library import lib

__all__ = ["DeviceError", "Error", "InvalidArgumentError", "OutOfMemoryError",
           "OutOfRangeError", "TypeMismatchError", "error_class"]

# The statuses the package raises of its own (clbt.h's values; a test
# checks each against the header's table).
NULL_ARGUMENT = -4001
INVALID_ARGUMENT = -4002
INVALID_CONFIG = -4003
SIZE_OVERFLOW = -4004
ROW_OUT_OF_RANGE = -4005
ROW_OVERFLOW = -4006
INVALID_BLOCK_ID = -4007
TOO_MANY_REQUESTS = -4008
TOO_MANY_TOKENS = -4009
BUFFER_TOO_SMALL = -4010


class Error(Exception):
    """What a clbt call refused, or why it failed: the status's name
    (``status``, e.g. "CLBT_ROW_OVERFLOW"), its value (``code``) and the
    message naming the argument and its bound (``message``). A refused call
    changes nothing."""

    def __new__(cls, code: int, message: str):
        if cls is Error:
            cls = error_class(code)
        return Exception.__new__(cls, code, message)

    def __init__(self, code: int, message: str):
        self.code = code
        self.status = lib.clbt_status_name(code).decode()
        self.message = message
        super().__init__("%s (%d): %s" % (self.status, code, message))

    def __reduce__(self):
        return type(self), (self.code, self.message)


class InvalidArgumentError(Error, ValueError):
    """An argument clbt does not accept: a value out of its bound, a
    malformed batch or config, a size past a capacity, a closed object."""


class OutOfRangeError(Error, IndexError):
    """A row index that is not below max_num_reqs."""


class TypeMismatchError(Error, TypeError):
    """An argument of the wrong type: a float or 2-D array where int32[n]
    goes, a scalar where a sequence goes, an int where a buffer goes. Its
    status is CLBT_INVALID_ARGUMENT; raised by the package before C is
    called."""


def wrong_type(message):
    """The TypeMismatchError of an argument of the wrong type."""
    return TypeMismatchError(INVALID_ARGUMENT, message)


class OutOfMemoryError(Error, MemoryError):
    """Host or device memory ran out (CLBT_CL_OUT_OF_HOST_MEMORY,
    CLBT_CL_MEM_OBJECT_ALLOCATION_FAILURE)."""


class DeviceError(Error, RuntimeError):
    """No device fits, the device lacks what clbt needs, or an OpenCL call
    failed: every OpenCL status but the two of OutOfMemoryError."""


# clbt's own statuses by name; every OpenCL one (CLBT_CL_*) not named here
# is a DeviceError.
_BY_NAME = {
    "CLBT_NULL_ARGUMENT": InvalidArgumentError,
    "CLBT_INVALID_ARGUMENT": InvalidArgumentError,
    "CLBT_INVALID_CONFIG": InvalidArgumentError,
    "CLBT_SIZE_OVERFLOW": InvalidArgumentError,
    "CLBT_ROW_OUT_OF_RANGE": OutOfRangeError,
    "CLBT_ROW_OVERFLOW": InvalidArgumentError,
    "CLBT_INVALID_BLOCK_ID": InvalidArgumentError,
    "CLBT_TOO_MANY_REQUESTS": InvalidArgumentError,
    "CLBT_TOO_MANY_TOKENS": InvalidArgumentError,
    "CLBT_BUFFER_TOO_SMALL": InvalidArgumentError,
    "CLBT_CONTEXT_MISMATCH": InvalidArgumentError,
    "CLBT_INVALID_SELECTOR": InvalidArgumentError,
    "CLBT_NO_MATCHING_DEVICE": DeviceError,
    "CLBT_UNSUPPORTED_DEVICE": DeviceError,
    "CLBT_READ_ONLY_BUFFER": InvalidArgumentError,
    "CLBT_CL_OUT_OF_HOST_MEMORY": OutOfMemoryError,
    "CLBT_CL_MEM_OBJECT_ALLOCATION_FAILURE": OutOfMemoryError,
}


def error_class(code: int) -> type:
    """The Error subclass of a status; Error itself for a value clbt.h does
    not list."""
    name = lib.clbt_status_name(code).decode()
    if name in _BY_NAME:
        return _BY_NAME[name]
    return DeviceError if name.startswith("CLBT_CL_") else Error
