"""ZeRO-1: each rank keeps, and steps, only its shard of the optimizer state.

The window's sums are reduce-scattered instead of all-reduced (each flat buffer of the
arena in one call): rank ``r`` receives the global sums of elements ``[r*S, (r+1)*S)``
of the buffer, ``S = size / R`` (the arena is padded so that ``S`` is a whole number of
cache lines). The parameters live in flat buffers with the arena's layout, so the same
range of them is this rank's shard: the fused optimizer steps the pieces of parameters
that fall in it (state for those pieces only: 1/R of the optimizer's memory), then the
parameters are all-gathered. Clipping uses the global norm: each rank's sum of squares
over its shard, all-reduced. The result equals plain data parallelism: the same sums,
the same elementwise step.

Checkpoints stay independent of R: ``state_dict()`` gathers the pieces' state into whole
per-parameter arrays, ``load_state_dict()`` cuts this rank's pieces out of them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.accum import Accumulator, ArenaStore, GradArena
from minitorch_accum.distributed.buckets import Bucket
from minitorch_accum.distributed.checkpoint_broadcast import gather_json
from minitorch_accum.distributed.communicator import Communicator
from minitorch_accum.distributed.data_parallel import DataParallel
from minitorch_accum.nn import Module, Param
from minitorch_accum.optim import Optimizer

__all__ = ["Piece", "ZeroRedundancy", "ZeroRedundancyOptimizer"]


@dataclass(frozen=True)
class Piece:
    """Elements [start, stop) of the flat buffer of ``dtype``: part of parameter ``name`` (which
    starts at ``offset`` in that buffer) inside this rank's shard."""

    name: str
    param: Param
    dtype: np.dtype
    offset: int
    start: int
    stop: int

    @property
    def key(self) -> str:
        """The optimizer-state name of the piece: ``<name>@<first>:<end>`` within the parameter."""
        return f"{self.name}@{self.start - self.offset}:{self.stop - self.offset}"


class ZeroRedundancy(DataParallel):
    """The WindowReducer of ZeRO-1: after a window each rank holds its shard of the global sums."""

    sharded = True
    _collective_name = "reduce_scatter"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.overlap:
            raise ValueError("ZeRO-1 reduce-scatters each flat buffer in one call after the window: overlap is "
                             "for plain data parallelism")

    def shard(self, buffer: Any) -> tuple[int, int]:
        """[start, stop) of this rank's shard of a flat buffer."""
        size = buffer.size // self.comm.world_size
        return self.comm.rank * size, (self.comm.rank + 1) * size

    def _reduce_gradients(self, store: ArenaStore) -> None:
        comp = store.compensation
        for index, (dtype, buffer) in enumerate(store.arena.buffers.items()):
            start_time = time.perf_counter()
            lo, hi = self.shard(buffer)
            received = store.arena.backend.xp.empty(hi - lo, dtype=dtype)
            if comp is None:
                self.comm.reduce_scatter(buffer, received)
            else:
                received_comp = store.arena.backend.xp.empty_like(received)
                self.comm.reduce_scatter_pairs(buffer, comp.buffers[dtype], received, received_comp)
                comp.buffers[dtype][lo:hi] = received_comp
            buffer[lo:hi] = received
            self._record(store, Bucket(index, dtype, 0, int(buffer.size), tuple(store.arena.names)), start_time)

    def buckets(self, store: ArenaStore) -> list[Bucket]:
        """One bucket per flat buffer: ZeRO-1 reduce-scatters each buffer in one call."""
        return [Bucket(i, dtype, 0, int(buffer.size), tuple(store.arena.names))
                for i, (dtype, buffer) in enumerate(store.arena.buffers.items())]

    def pieces(self, arena: GradArena, params: list[Param] | None = None) -> list[Piece]:
        """The pieces of ``params`` (default: all of the arena's) inside this rank's shard."""
        chosen = {id(p) for p in params} if params is not None else None
        out = []
        for name, param in zip(arena.names, arena.params, strict=True):
            if chosen is not None and id(param) not in chosen:
                continue
            dtype, offset, size = arena.span(param)
            lo, hi = self.shard(arena.buffers[dtype])
            start, stop = max(offset, lo), min(offset + size, hi)
            if start < stop:
                out.append(Piece(name, param, dtype, offset, start, stop))
        return out

    def _written_pieces(self, store: ArenaStore) -> list[tuple[Piece, Any]]:
        written = [p for p, _ in store.views()]
        return [(piece, store.arena.buffers[piece.dtype][piece.start:piece.stop])
                for piece in self.pieces(store.arena, written)]

    def finite_check(self, store: ArenaStore) -> bool:
        # the flag is every rank's already (the window's facts); what the GEMM bounds cannot
        # prove finite is read in each rank's shard, and the answer agreed on
        local = bool(int(store.flag[0]))
        if not local:
            unproven = {id(p) for p, v in store.views() if not store.bound_is_safe(p, v)}
            arrays = [g for piece, g in self._written_pieces(store) if id(piece.param) in unproven]
            local = bool(arrays) and not math.isfinite(kernels.multi_l2_norm(arrays))
        return not self.comm.agree(local)

    def norm(self, store: ArenaStore) -> float:
        arrays = [g for _, g in self._written_pieces(store)]
        local = kernels.multi_l2_norm(arrays) if arrays else 0.0
        return math.sqrt(float(self.comm.allreduce_scalars([local * local], np.float64)[0]))

    def complete(self, store: ArenaStore) -> None:
        """Gather every rank's shard of the sums, so every view holds the global window."""
        for buffer in store.arena.buffers.values():
            lo, hi = self.shard(buffer)
            self.comm.allgather(buffer[lo:hi].copy(), buffer)


class ZeroRedundancyOptimizer:
    """Steps an optimizer on this rank's shard of the parameters, then all-gathers them.

    ``step(model, acc, lr)`` as an Optimizer's; ``state_dict()``/``load_state_dict()`` are
    collective (every rank calls them) and speak whole parameters, as the optimizer's own."""

    def __init__(self, optimizer: Optimizer, accumulator: Accumulator) -> None:
        if not isinstance(accumulator.reducer, ZeroRedundancy):
            raise TypeError("ZeroRedundancyOptimizer needs an Accumulator built with a ZeroRedundancy reducer")
        self.optimizer = optimizer
        self.accumulator = accumulator
        self.reducer: ZeroRedundancy = accumulator.reducer
        self.comm: Communicator = self.reducer.comm
        store = accumulator.store
        assert isinstance(store, ArenaStore)
        self.arena = store.arena
        for name, param in zip(self.arena.names, self.arena.params, strict=True):
            dtype, _, _ = self.arena.span(param)
            if param.dtype != dtype:
                raise TypeError(f"ZeRO-1 steps parameters in their gradient arena's layout: parameter {name} is "
                                f"{param.dtype.name}, its gradients accumulate in {dtype.name}; use float32 or "
                                "float64 parameters with an arena of their dtype")
        # the parameters' own flat buffers, in the arena's layout (allocated once)
        self.flat = {dtype: self.arena.backend.xp.zeros(buffer.size, dtype=dtype)
                     for dtype, buffer in self.arena.buffers.items()}
        self._pieces = self.reducer.pieces(self.arena)
        self._piece_params = {piece.key: Param(self.flat[piece.dtype][piece.start:piece.stop])
                              for piece in self._pieces}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)  # lr, skipped_steps, hyperparameters(), ...

    def _bind(self) -> None:
        """Make every parameter a view of the flat buffers (again, after load_record replaced it)."""
        for param in self.arena.params:
            dtype, offset, size = self.arena.span(param)
            view = self.flat[dtype][offset:offset + size].reshape(param.shape)
            if param.data is not view:
                view[...] = param.data
                param.data = view

    def step(self, model: Module, acc: Accumulator, lr: float | None = None) -> Module:
        if acc is not self.accumulator:
            raise ValueError("ZeroRedundancyOptimizer.step: use the accumulator it was made with")
        self._bind()
        scale = acc.window_scale()
        if acc.found_nonfinite():
            self.optimizer.skipped_steps += 1
            return model
        written = {id(p) for p, _ in acc.store.views()}
        grouped: list[list[Any]] = [[] for _ in self.optimizer.param_groups]
        for piece in self._pieces:
            group = self.optimizer.group_index(piece.param)
            if id(piece.param) not in written or group is None:
                continue
            grad = self.arena.buffers[piece.dtype][piece.start:piece.stop]
            grouped[group].append((piece.key, self._piece_params[piece.key], grad))
        self.optimizer.update(grouped, scale, lr)
        for buffer in self.flat.values():
            lo, hi = self.reducer.shard(buffer)
            self.comm.allgather(buffer[lo:hi].copy(), buffer)
        for param in self.arena.params:
            param.bump_version()  # gathered in place
        return model

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state_dict with whole parameters' state, gathered from every rank."""
        own = self.optimizer.state_dict()
        pieces = {piece.key: piece for piece in self._pieces}
        slot_names = sorted({slot for slots in own["state"].values() for slot, v in slots.items()
                             if isinstance(v, np.ndarray)})
        slot_names = sorted({s for names in gather_json(self.comm, slot_names) for s in names})
        scalars: dict[str, dict[str, Any]] = {}
        for rank_scalars in gather_json(self.comm, {pieces[k].name: {s: v for s, v in slots.items()
                                                                        if not isinstance(v, np.ndarray)}
                                                    for k, slots in own["state"].items() if k in pieces}):
            scalars.update(rank_scalars)
        state: dict[str, dict[str, Any]] = {name: dict(values) for name, values in scalars.items()}
        for slot in slot_names:
            whole = {dtype: np.zeros(buffer.size, dtype=dtype) for dtype, buffer in self.flat.items()}
            for key, slots in own["state"].items():
                if key in pieces and slot in slots:
                    piece = pieces[key]
                    whole[piece.dtype][piece.start:piece.stop] = slots[slot]
            for buffer in whole.values():
                lo, hi = self.reducer.shard(buffer)
                self.comm.allgather(buffer[lo:hi].copy(), buffer)
            for name, param in zip(self.arena.names, self.arena.params, strict=True):
                if name in state:
                    dtype, offset, size = self.arena.span(param)
                    state[name][slot] = whole[dtype][offset:offset + size].reshape(param.shape).copy()
        return {**own, "state": state}

    def load_state_dict(self, state: dict[str, Any], model: Module | None = None) -> None:
        """Load whole parameters' state (as ``state_dict()`` gives it): this rank keeps its pieces."""
        by_name = {piece.name: [] for piece in self._pieces}
        for piece in self._pieces:
            by_name[piece.name].append(piece)
        names = dict(zip(self.arena.names, self.arena.params, strict=True))
        pieces_state: dict[str, dict[str, Any]] = {}
        for name, slots in state["state"].items():
            if name not in names:
                raise ValueError(f"optimizer state names parameter {name!r}, which the model does not have")
            for piece in by_name.get(name, []):
                lo, hi = piece.start - piece.offset, piece.stop - piece.offset
                pieces_state[piece.key] = {slot: (np.ascontiguousarray(np.asarray(v).reshape(-1)[lo:hi])
                                                  if isinstance(v, np.ndarray) else v) for slot, v in slots.items()}
        self.optimizer.load_state_dict({**state, "state": pieces_state})
