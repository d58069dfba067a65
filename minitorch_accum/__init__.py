"""minitorch_accum: a small tensor and autograd library whose subject is gradient accumulation.

Layers, each importing only those below it: kernels -> backend -> ops -> autodiff ->
nn, optim -> accum -> train, data, cli. See DESIGN.md in the repository.

Names follow Burn where Burn has them and PyTorch elsewhere: ``mta.float32``,
``mta.int64`` (``mta.long``), ``mta.bool`` are dtypes (``mta.bool`` is the bool dtype, as ``torch.bool``),
``mta.tensor`` copies its data and ``mta.from_numpy`` shares it.
"""

from minitorch_accum import autodiff
from minitorch_accum.autodiff import *  # noqa: F403  (the user-facing part of its __all__ is this package's)
from minitorch_accum.backend import (
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
    uint8,
)
from minitorch_accum.ops import OpError

# PyTorch's spellings of two dtypes (mta.bool shadows the builtin only as an attribute of this package)
bool = bool_
long = int64

__version__ = "0.1.0"

# the engine's own pieces stay in minitorch_accum.autodiff
_ENGINE = ("LeafSink", "apply", "run_backward")
for _name in _ENGINE:
    del globals()[_name]

__all__ = [
    *(name for name in autodiff.__all__ if name not in _ENGINE),
    "Device",
    "OpError",
    "__version__",
    "bfloat16",
    "bool",
    "cuda_available",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "get_rng_state",
    "int8",
    "int16",
    "int32",
    "int64",
    "long",
    "manual_seed",
    "set_default_dtype",
    "set_rng_state",
    "uint8",
]
