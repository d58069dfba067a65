"""ArenaStore: where a window's gradients land when they accumulate in a persistent arena.

It is the autodiff engine's leaf sink for every micro-batch of the window:

- ``fusion="leaf"``: each gradient contribution goes straight into the parameter's
  arena view through a fused kernel: ``copy_scale`` for the first write of the window
  (no zeroing pass ever runs), ``add_scale`` after it (``cast_add_scale`` for 16-bit
  gradients; the Neumaier pair when compensated);
- ``fusion="gemm"``: in addition, a matmul's weight gradient arrives as the two factors
  of a GEMM, which writes into the view itself with beta = 1 (beta = 0 for the first
  write), so that gradient never exists as a separate array.

A bfloat16 arena (``accum_dtype="bfloat16"``) halves the gradient memory: each write sums in
float32 and rounds the sum back, to nearest (``rounding="nearest"``: a long window stalls, every
addend smaller than half a unit of the running sum is lost) or stochastically
(``rounding="stochastic"``: up with probability equal to the discarded fraction, so the sum is
exact in expectation). The random bits of a write come from a counter-based stream keyed by
(``rounding_seed``, the window's index, the write's draw, the element's offset in the arena):
the draw is how many times this parameter's view was written before in the window (the
micro-batch's index, but for a weight used twice in one micro-batch), so a run gives the same
bits on every path and thread count, and a run resumed mid-window the bits it would have drawn.
A bfloat16 arena takes no GEMM-written gradient (BLAS writes float32 or float64 with beta = 1,
rounding to nearest): a matmul's weight gradient is computed apart and written by the kernel.

The store owns everything about the gradients themselves: the arena, the compensation
arena, which views hold data this window, the bounds that prove GEMM-written views
finite, the non-finite flag the kernels raise, and the draws of the rounding stream. The
window around it (counts, items, normalization, loss scale) is the Accumulator's.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from minitorch_accum import kernels
from minitorch_accum.accum.arena import GradArena
from minitorch_accum.accum.gradient_store import (
    ForeignParameterError,
    StoreRecorder,
    check_touched,
    split_state_key,
)
from minitorch_accum.autodiff import LeafSink, Tensor, run_backward
from minitorch_accum.autodiff.graph import TensorBase
from minitorch_accum.backend import is_low_precision
from minitorch_accum.kernels.arrays import Array  # a NumPy or a CuPy array: Any to mypy (CuPy has no types)
from minitorch_accum.nn import Param

__all__ = ["ROUNDINGS", "ArenaStore"]

#: the kernel that writes a gradient into its view, by (first write of the window, 16-bit gradient),
#: under its name in kernels.catalog: the name ``add`` returns is the kernel it ran
_WRITES: dict[tuple[bool, bool], tuple[str, Callable[..., None]]] = {
    (True, False): ("copy_scale", kernels.copy_scale),
    (True, True): ("cast_copy_scale", kernels.copy_scale),  # copy_scale casts a 16-bit g itself
    (False, False): ("add_scale", kernels.add_scale),
    (False, True): ("cast_add_scale", kernels.cast_add_scale),
}
#: the same with a compensation arena (Neumaier's pair), by first write of the window
_COMPENSATED_WRITES: dict[bool, tuple[str, Callable[..., None]]] = {
    True: ("copy_scale_compensated", kernels.copy_scale_compensated),
    False: ("add_scale_compensated", kernels.add_scale_compensated),
}
#: the same into a bfloat16 arena rounded stochastically, by (first write, 16-bit gradient)
_STOCHASTIC_WRITES: dict[tuple[bool, bool], tuple[str, Callable[..., None]]] = {
    (True, False): ("copy_scale_stochastic", kernels.copy_scale_stochastic),
    (True, True): ("copy_scale_stochastic", kernels.copy_scale_stochastic),  # it casts a 16-bit g itself
    (False, False): ("add_scale_stochastic", kernels.add_scale_stochastic),
    (False, True): ("cast_add_scale_stochastic", kernels.cast_add_scale_stochastic),
}
#: how a bfloat16 arena rounds each sum: the choices of ``rounding``
ROUNDINGS = ("nearest", "stochastic")


@cache
def _takes_background(gemm_into: Callable[..., bool]) -> bool:
    """Whether a Backend's ``gemm_into`` takes ``background`` (one written to the interface before it
    did takes five arguments: its GEMMs then run on the calling thread, as they did)."""
    try:
        parameters = inspect.signature(gemm_into).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it as the interface was
        return False
    return any(p.name == "background" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class ArenaStore:
    """A window's gradient sums in flat, aligned buffers; also the leaf sink of backward.

    Args:
        named: ``(name, Param)`` pairs of the model, in model order.
        accum_dtype: ``"float32"``, ``"float64"`` or ``"bfloat16"`` (16-bit gradients sum in float32
            unless the arena is bfloat16).
        compensated: keep Neumaier compensation terms in a second arena.
        fuse_gemm: let matmul weight gradients be written by the GEMM itself (not into bfloat16).
        shards: pad the arena so each flat buffer splits into this many aligned pieces (ranks).
        rounding: how a bfloat16 arena rounds each sum, ``"nearest"`` or ``"stochastic"``.
        rounding_seed: the stochastic stream's seed (an int in [0, 2^64)).
        window_index: what says the current window's index (the Accumulator's); without it the
            store counts its windows itself (``reset``).

    Nothing here observes: a tracer or a memory probe watches the writes through a wrapper of
    this sink (``micro_batch``'s ``sink``, observe/watched_writes.py) and hears of the window's
    passes through ``recorder``.
    """

    def __init__(self, named: Sequence[tuple[str, Param]], accum_dtype: npt.DTypeLike = "float32", *,
                 compensated: bool = False, fuse_gemm: bool = True, shards: int = 1, rounding: str = "nearest",
                 rounding_seed: int = 0, window_index: Callable[[], int] | None = None) -> None:
        if rounding not in ROUNDINGS:
            raise ValueError(f"ArenaStore: rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
        self.arena = GradArena(named, accum_dtype, shards=shards)
        self.bfloat16 = self.arena.accum_dtype.name == "bfloat16"
        if rounding == "stochastic" and not self.bfloat16:
            raise ValueError(f"ArenaStore: rounding='stochastic' rounds the sums of a bfloat16 arena; a "
                             f"{self.arena.accum_dtype.name} arena rounds every add to nearest "
                             "(accum_dtype='bfloat16')")
        if compensated and self.bfloat16:
            raise ValueError("ArenaStore: a bfloat16 arena has no Neumaier compensation (its sums round to bfloat16); "
                             "compensate a float32 arena, or round a bfloat16 one stochastically")
        if isinstance(rounding_seed, bool) or not isinstance(rounding_seed, int | np.integer) \
                or not 0 <= rounding_seed < 2**64:
            raise ValueError(f"ArenaStore: rounding_seed must be an int in [0, 2**64), got {rounding_seed!r}")
        self.rounding = rounding
        self.rounding_seed = int(rounding_seed)
        self.compensation: GradArena | None = self.arena.like() if compensated else None
        self.flag = kernels.new_flag(next(iter(self.arena.buffers.values())))
        # the Neumaier pair needs each contribution as an array, so compensation turns GEMM fusion off; so
        # does a bfloat16 arena, which BLAS cannot write: the kernel rounds each weight gradient into it
        self.fuses_gemm = fuse_gemm and not compensated and not self.bfloat16
        self._names = {id(p): n for n, p in named}
        self._params = [p for _, p in named]
        #: told of each pass over the window's gradients (observe/: the Accumulator's tracer)
        self.recorder: StoreRecorder | None = None
        #: when set, called with each parameter whose gradient of this backward is complete
        self.leaf_done: Callable[[Param], None] | None = None
        self._scale = 1.0
        self._touched = False
        # a weight gradient's GEMM may run on a pool helper while backward goes on (the next write
        # into the arena, and the micro-batch's end, wait for it): only when nothing watches the
        # writes as they happen (a wrapping sink, the recorder, data parallelism's leaf_done)
        self._overlap = False
        self._in_flight: Any = None  # the backend whose background GEMM has not been settled
        self._window_index = window_index
        self._windows = -1  # the store's own count of windows, when nobody tells it the index
        self.reset()

    def reset(self) -> None:
        """A new window: nothing written yet (the next write to each view copies), flag clear."""
        self._windows += 1
        #: the writes of each view this window: the next one's draw of the rounding stream
        self._draws: dict[int, int] = {}
        self._written: set[int] = set()
        self._gemm_bound: dict[int, float] = {}  # param id -> bound on |entries| of its GEMM-written view
        self._folded = False
        self.poisoned = False
        self.leaf_done = None
        self.flag[0] = 0

    @property
    def nbytes(self) -> int:
        """Bytes the store keeps for the window: the arena and its compensation twin."""
        return self.arena.nbytes + (0 if self.compensation is None else self.compensation.nbytes)

    def micro_batch(self, loss: Tensor, seed: Array | None, scale: float, sink: LeafSink | None = None) -> None:
        """Backpropagate one micro-batch, every leaf gradient times ``scale`` going into the arena
        (through ``sink``, a wrapper of this store that watches its writes, when given)."""
        self._scale = scale
        self._touched = False
        self._overlap = sink is None and self.recorder is None and self.leaf_done is None
        try:
            # the engine hands add() only the leaves accepts() took, Params of the arena: the store is a
            # LeafSink though its add() and add_product() take a Param and say which kernel wrote
            run_backward(loss, seed, sink=cast(LeafSink, self) if sink is None else sink)
        except BaseException:
            # some views may hold part of this micro-batch: the sums are no longer whole
            self.poisoned = self.poisoned or self._touched
            raise
        finally:
            self._overlap = False
            self._settle()
        check_touched(self._touched)

    def _settle(self) -> None:
        """Wait for the GEMM left running in the background, if any (before the arena is touched)."""
        if self._in_flight is not None:
            backend, self._in_flight = self._in_flight, None
            backend.settle()

    # ------------------------------------------------- the engine's LeafSink protocol
    def accepts(self, leaf: TensorBase) -> bool:
        if leaf in self.arena:
            return True
        if isinstance(leaf, Param):
            raise ForeignParameterError(leaf.shape, window_intact=False)
        return False  # an input that requires grad: its gradient is nobody's business here

    def add(self, leaf: Param, grad: Array) -> str:
        """The window's first write to ``leaf``'s view copies ``scale * grad``, the next ones add it;
        returns the kernel that wrote."""
        self._settle()
        view = self.arena.view(leaf)
        if not grad.flags.c_contiguous:
            grad = leaf.backend.xp.ascontiguousarray(grad)
        first = not self.holds(leaf)
        if self.rounding == "stochastic":
            name, write = _STOCHASTIC_WRITES[first, is_low_precision(grad.dtype)]
            draw = self._draws.get(id(leaf), 0)
            write(view, grad, self._scale, self.rounding_seed, self.window_index, draw, self.arena.span(leaf)[1],
                  flag=self.flag)
            self._draws[id(leaf)] = draw + 1
        elif self.compensation is None:
            name, write = _WRITES[first, is_low_precision(grad.dtype)]
            write(view, grad, self._scale, flag=self.flag)
        else:
            name, write = _COMPENSATED_WRITES[first]
            write(view, self.compensation.view(leaf), grad, self._scale, flag=self.flag)
        self._written.add(id(leaf))
        self._touched = True
        return name

    def add_product(self, leaf: Param, a: Array, b: Array) -> str:
        """The same for a contribution ``a @ b``, which the GEMM writes into the view itself (beta 0
        on the window's first write, 1 after); returns what wrote it."""
        self._settle()
        first = not self.holds(leaf)
        if self._overlap and _takes_background(type(leaf.backend).gemm_into):
            fused = leaf.backend.gemm_into(a, b, self.arena.view(leaf), alpha=self._scale,
                                           beta=0.0 if first else 1.0, background=True)
            self._in_flight = leaf.backend
        else:
            fused = leaf.backend.gemm_into(a, b, self.arena.view(leaf), alpha=self._scale, beta=0.0 if first else 1.0)
        self._written.add(id(leaf))
        self._touched = True
        # A GEMM has no fused non-finite flag. Every entry of alpha a @ b, and every partial
        # sum of it, is at most |alpha| ||a||_F ||b||_F (Cauchy-Schwarz), so a running sum of
        # that bound that stays far below the dtype's maximum proves the view finite without
        # reading it. The norms read the factors, N (in + out) elements every micro-batch; the
        # end of the window can read the view instead, in x out once. So the bound is kept only
        # where the factors are the smaller read (a wide layer, few rows); elsewhere it is inf
        # and ``finite_check`` reads the view (the char transformer at b = 32: 18 norms, 0.31 ms
        # of a 12 ms micro-batch, against one read of 0.1 M elements a window).
        rows, columns = a.shape[0], b.shape[1]
        if a.shape[1] * (rows + columns) < rows * columns:
            bound = abs(self._scale) * _frobenius(a) * _frobenius(b)
        else:
            bound = math.inf
        self._gemm_bound[id(leaf)] = self._gemm_bound.get(id(leaf), 0.0) + bound
        return ("gemm-beta0" if first else "gemm-beta1") if fused else "gemm-fallback"

    @property
    def window_index(self) -> int:
        """The index of the window being written (the stochastic stream's window)."""
        return self._window_index() if self._window_index is not None else self._windows

    def holds(self, param: Param) -> bool:
        """Whether ``param``'s view holds this window's sums already (the next write adds)."""
        return id(param) in self._written

    # ------------------------------------------------------------- the window's end
    def views(self) -> list[tuple[Param, Array]]:
        """(param, arena view) for every parameter written in this window, in model order."""
        return [(p, self.arena.view(p)) for p in self._params if id(p) in self._written]

    def close(self) -> None:
        """Fold the compensation terms into the sums (once per window)."""
        if self.compensation is None or self._folded:
            return
        views = self.views()
        with self._pass("fold_compensation", views):
            kernels.multi_add_scale([v for _, v in views], [self.compensation.view(p) for p, _ in views], 1.0)
        self._folded = True

    def finite_check(self) -> bool:
        """True when every gradient written this window is finite.

        The kernels' flag covers what they wrote; a GEMM-written view whose running bound
        cannot rule out an overflow is read once (inf and nan are sticky under addition, so
        one look at the sum sees any micro-batch's)."""
        if int(self.flag[0]):
            return False
        unproven = [(p, v) for p, v in self.views() if not self.bound_is_safe(p, v)]
        if not unproven:
            return True
        with self._pass("finite_check", unproven):
            return math.isfinite(kernels.multi_l2_norm([v for _, v in unproven]))

    def bound_is_safe(self, param: Param, view: Array) -> bool:
        """True unless a GEMM wrote ``view`` and its running bound could reach the dtype's maximum (or
        was not kept: inf)."""
        bound = self._gemm_bound.get(id(param))
        return bound is None or bound < float(np.finfo(view.dtype).max) / 4

    def scale_in_place(self, factor: float) -> None:
        """Multiply the window's sums by ``factor``: one pass over each flat buffer."""
        with self._pass("scale", self.views()):
            for buffer in self.arena.buffers.values():
                buffer *= buffer.dtype.type(factor)

    def norm(self) -> float:
        """The global L2 norm of the sums as they are (one multi-tensor norm)."""
        arrays = [v for _, v in self.views()]
        return kernels.multi_l2_norm(arrays) if arrays else 0.0

    # ---------------------------------------------- what data parallelism needs to agree on
    @property
    def params(self) -> list[Param]:
        """Every parameter the store holds a gradient slot for, in model order."""
        return list(self._params)

    def written_mask(self) -> np.ndarray:
        """1 for each parameter (model order) written this window, else 0 (int64)."""
        return np.array([id(p) in self._written for p in self._params], dtype=np.int64)

    def gemm_bounds(self) -> np.ndarray:
        """The running bound on |entries| of each GEMM-written view (0 where no GEMM wrote, inf where
        the view is read at the window's end instead)."""
        return np.array([self._gemm_bound.get(id(p), 0.0) for p in self._params], dtype=np.float64)

    def zero_unwritten(self) -> None:
        """Zero the views not written this window (they hold an earlier window's sums), so a
        whole-buffer reduction adds nothing stale."""
        for p in self._params:
            if id(p) not in self._written:
                self.arena.view(p)[...] = 0
                if self.compensation is not None:
                    self.compensation.view(p)[...] = 0

    def adopt(self, written: np.ndarray, gemm_bounds: np.ndarray, nonfinite: bool) -> None:
        """After a reduction over ranks: the views written on any rank, the summed GEMM bounds
        and the flag of every rank become this store's."""
        self._written = {id(p) for p, w in zip(self._params, written, strict=True) if w}
        self._gemm_bound = {id(p): float(b) for p, b in zip(self._params, gemm_bounds, strict=True) if b > 0}
        self.flag[0] = 1 if nonfinite else int(self.flag[0])

    def _pass(self, kernel: str, views: list[tuple[Param, Array]]) -> contextlib.AbstractContextManager[None]:
        """``kernel`` over ``views`` as one pass the recorder times; nothing when none listens."""
        if self.recorder is None:
            return contextlib.nullcontext()
        return self.recorder.timed([(self._names[id(p)], kernel, v) for p, v in views], window_pass=True)

    # ------------------------------------------------------------------ checkpoints
    def state_meta(self) -> dict[str, Any]:
        """Which views hold data, their GEMM bounds and the flag, by parameter name; with stochastic
        rounding, the stream's state: its seed, the window and each view's draws so far."""
        meta: dict[str, Any] = {
            "written": [self._names[id(p)] for p, _ in self.views()],
            "gemm_bound": {self._names[i]: bound for i, bound in self._gemm_bound.items() if math.isfinite(bound)},
            "flag": int(self.flag[0]),
        }
        # the views without a bound (JSON has no inf), listed only when there are any: a state that has
        # none reads as one written before the list was kept
        unbounded = [self._names[i] for i, bound in self._gemm_bound.items() if not math.isfinite(bound)]
        if unbounded:
            meta["gemm_unbounded"] = unbounded
        if self.rounding == "stochastic":
            meta["rounding"] = {"mode": self.rounding, "seed": self.rounding_seed, "window": self.window_index,
                                "draws": {self._names[i]: n for i, n in self._draws.items()}}
        return meta

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The flat buffers as host arrays, keyed ``arena/<dtype>`` and ``compensation/<dtype>``."""
        arrays = {f"arena/{k}": v for k, v in self.arena.state_arrays().items()}
        if self.compensation is not None:
            arrays.update({f"compensation/{k}": v for k, v in self.compensation.state_arrays().items()})
        return arrays

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore ``state_meta()``/``state_arrays()`` output (the same model layout)."""
        by_name = {n: p for p, n in ((p, self._names[id(p)]) for p in self._params)}
        stream = meta.get("rounding")  # checked before anything is loaded
        if (stream is not None) != (self.rounding == "stochastic"):
            saved = "stochastic" if stream is not None else "nearest"
            raise ValueError(f"accumulator state was saved with rounding={saved!r}, this store rounds "
                             f"{self.rounding!r}")
        drawn = [] if stream is None else list(stream["draws"])
        unbounded = meta.get("gemm_unbounded", [])  # absent from a state saved before it was kept
        unknown = [n for n in [*meta["written"], *meta["gemm_bound"], *unbounded, *drawn] if n not in by_name]
        if unknown:
            raise ValueError(f"accumulator state names unknown parameters: {', '.join(sorted(set(unknown)))}")
        groups: dict[str, dict[str, np.ndarray]] = {"arena": {}, "compensation": {}}
        for key, value in arrays.items():
            role, dtype = split_state_key(key, groups)
            groups[role][dtype] = value
        self.arena.load_state_arrays(groups["arena"])
        if self.compensation is not None:
            self.compensation.load_state_arrays(groups["compensation"])
        self.reset()
        self._written = {id(by_name[n]) for n in meta["written"]}
        self._gemm_bound = {id(by_name[n]): float(b) for n, b in meta["gemm_bound"].items()}
        self._gemm_bound.update({id(by_name[n]): math.inf for n in unbounded})
        self.flag[0] = int(meta["flag"])
        if stream is not None:  # the generator's state: what the next write draws
            self.rounding_seed = int(stream["seed"])
            self._windows = int(stream["window"])
            self._draws = {id(by_name[n]): int(d) for n, d in stream["draws"].items()}


def _frobenius(matrix: Array) -> float:
    """||matrix||_F through the norm kernel; inf or nan when any entry is."""
    if not matrix.flags.c_contiguous:
        matrix = matrix.T if matrix.T.flags.c_contiguous else matrix.copy()
    return kernels.l2_norm(matrix)
