"""NumPy's data-memory handler slots (NEP 49): the C structures of a handler and the two
functions of NumPy's C-API table that read and set the current one. Both array trackers
(``array_tracker.py``, ``python_array_tracker.py``) make a counting handler current through them."""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = ["HANDLER_NAME", "DataAllocator", "DataHandler", "NumpyHandlerSlots", "numpy_handler_slots"]

# slots of NumPy's C-API table (numpy/__multiarray_api.h, fixed since NumPy 1.22)
_SET_HANDLER, _GET_HANDLER = 304, 305
HANDLER_NAME = b"minitorch_accum_array_bytes"


class DataAllocator(ctypes.Structure):
    """NumPy's PyDataMemAllocator (ndarraytypes.h): a context and the addresses of malloc,
    calloc, realloc and free (ctx, size...) functions."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]


class DataHandler(ctypes.Structure):
    """NumPy's PyDataMem_Handler: a name, version 1, the allocator."""

    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", DataAllocator)]


class NumpyHandlerSlots:
    """NumPy's PyDataMem_SetHandler and the handler current when found (NumPy's default one).

    ``set_handler(capsule) -> previous capsule``: NumPy keeps the current handler in a context
    variable, so a handler made current affects only the thread (context) that set it."""

    def __init__(self) -> None:
        import numpy as np

        core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed the package
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        table = ctypes.cast(api.PyCapsule_GetPointer(core._multiarray_umath._ARRAY_API, None),
                            ctypes.POINTER(ctypes.c_void_p))
        # PYFUNCTYPE: these calls keep the GIL (they read and set a context variable)
        self.set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(table[_SET_HANDLER])
        self.default_capsule = ctypes.PYFUNCTYPE(ctypes.py_object)(table[_GET_HANDLER])()
        self.default = DataHandler.from_address(api.PyCapsule_GetPointer(self.default_capsule, b"mem_handler"))
        self.handler_name = core.multiarray.get_handler_name
        if self.default.name.decode() != self.handler_name() or self.default.version != 1:
            raise ValueError("NumPy's C-API table does not hold the data-memory handler functions where expected")

    def prove(self, capsule: Any) -> None:
        """One round trip: NumPy must name the handler in ``capsule`` once it is current."""
        previous = self.set_handler(capsule)
        try:
            if self.handler_name() != HANDLER_NAME.decode():
                raise ValueError("NumPy did not take the array-counting data-memory handler")
        finally:
            self.set_handler(previous)


def numpy_handler_slots() -> NumpyHandlerSlots | None:
    """NumPy's handler slots, or None when this NumPy does not hold them where expected."""
    try:
        return NumpyHandlerSlots()
    except (AttributeError, ImportError, OSError, ValueError, TypeError):
        return None
