"""One thread at a time in each table (docs/python.md, "Threads").

A C table is one thread's at a time (docs/threading.md), and so is the
Python state beside it (the uploads in flight, the facade's deferred
work). Each table object therefore has a lock, an RLock (the calls nest: a
facade call runs table calls, a close closes groups), that every public
method and property of its class takes: threads that share a table are
serialised, call by call, and never run C on it at once. A group of a
multi-group table shares its table's lock, as it shares its C engine. The
lock costs a call about 0.4 us on PoCL here (docs/benchmarks.md). A
KVCache is one thread's at a time in C too (its one cl_kernel takes each
write's arguments) and has a lock of its own in the same way.
"""
import functools
import inspect


def one_thread_at_a_time(lock_of, unlocked=()):
    """A class decorator: each public method and property defined in the
    class, and close, runs holding lock_of(self); the methods named in
    unlocked take it in their own body (the facade's row updates, the
    decode step's hot path: see vllm.py)."""
    def decorate(cls):
        for name, value in list(vars(cls).items()):
            if (name.startswith("_") and name != "close") or name in unlocked:
                continue
            if isinstance(value, property):
                setattr(cls, name, property(*[None if f is None else _holding(f, lock_of)
                                              for f in (value.fget, value.fset, value.fdel)],
                                            value.__doc__))
            elif inspect.isfunction(value):
                setattr(cls, name, _holding(value, lock_of))
        return cls
    return decorate


def _holding(function, lock_of):
    @functools.wraps(function)
    def holding(self, *args, **kwargs):
        with lock_of(self):
            return function(self, *args, **kwargs)
    return holding
