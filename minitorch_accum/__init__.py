"""minitorch_accum: a small tensor and autograd library whose subject is gradient accumulation.

Layers, each importing only those below it: kernels -> backend, data -> ops -> autodiff ->
nn -> optim -> models -> accum -> distributed -> testing -> train -> cli; docs/design.md in the
repository draws them, says where a gradient lands and how to add a kernel, an op, a setting
or a collective.

Names follow Burn where Burn has them and PyTorch elsewhere: ``mta.float32``,
``mta.int64`` (``mta.long``), ``mta.bool`` are dtypes (``mta.bool`` is the bool dtype, as ``torch.bool``),
``mta.tensor`` copies its data and ``mta.from_numpy`` shares it.

The names of this package are lent by backend (dtypes, devices, seeding), ops (``OpError``)
and autodiff (tensors and the functions on them, but for the engine's own pieces), and each
is loaded on first use (PEP 562), as are the sub-packages (``mta.ops``): so
``import minitorch_accum.kernels`` or ``.backend`` loads that layer and what it needs, not
the autograd above it.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see; at run time each name is looked up below
    from minitorch_accum.autodiff import *  # noqa: F403
    from minitorch_accum.backend import (  # noqa: F401
        Device,
        bfloat16,
        bool_,
        cuda_available,
        float16,
        float32,
        float64,
        get_default_dtype,
        get_rng_state,
        int8,
        int16,
        int32,
        int64,
        manual_seed,
        set_default_dtype,
        set_rng_state,
        set_threads,
        thread_settings,
        uint8,
    )
    from minitorch_accum.ops import OpError  # noqa: F401

    bool = bool_
    long = int64

__version__ = "0.1.0"

#: the engine's own pieces stay in minitorch_accum.autodiff; the rest of its __all__ is this package's
_ENGINE = ("LeafSink", "apply", "run_backward")
#: this package's other names, lent by backend and ops (``bool`` and ``long`` are aliases)
_OWN = ["Device", "OpError", "__version__", "bfloat16", "bool", "cuda_available", "float16", "float32",
        "float64", "get_default_dtype", "get_rng_state", "int8", "int16", "int32", "int64", "long",
        "manual_seed", "set_default_dtype", "set_rng_state", "set_threads", "thread_settings", "uint8"]
#: PyTorch's spellings of two dtypes (mta.bool shadows the builtin only as an attribute of this package);
#: ``bool_`` itself stays an attribute too
_ALIASES = {"bool": "bool_", "long": "int64", "bool_": "bool_"}


def __getattr__(name: str) -> Any:
    """A name of ``__all__``, a sub-package (``mta.ops``), or ``__all__`` itself, loaded the first
    time it is asked for."""
    if name == "__all__":
        autodiff = importlib.import_module(f"{__name__}.autodiff")
        value: Any = [*(n for n in autodiff.__all__ if n not in _ENGINE), *_OWN]
    elif name.startswith("__") or not name.isidentifier():
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name in _OWN or name in _ALIASES:
        target = _ALIASES.get(name, name)
        lender = "backend" if target != "OpError" else "ops"
        value = getattr(importlib.import_module(f"{__name__}.{lender}"), target)
    else:
        autodiff = importlib.import_module(f"{__name__}.autodiff")
        if name.startswith("_") or name not in autodiff.__all__ or name in _ENGINE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(autodiff, name)
    globals()[name] = value  # found once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__")})
