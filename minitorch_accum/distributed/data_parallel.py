"""DataParallel: the window of every rank summed into one, once per window.

Each rank accumulates its own micro-batches into its arena with no communication at all
(PyTorch's ``no_sync``); when the window closes, one reduction phase makes it global:

1. views not written on this rank are zeroed (they hold an earlier window's sums), then
   every bucket of the arena is all-reduced in place, in plan order (compensated arenas
   reduce their (sum, compensation) pairs exactly); with ``overlap`` a bucket starts during
   the window's last backward, as soon as every parameter in it has its gradient;
2. a small int64 all-reduce of the window's facts: micro-batches, items, the non-finite
   flag, a stop request, and which parameters each rank wrote (a rank may have written
   none: it holds no micro-batch of a short last window, but it still takes part);
   a small float64 all-reduce sums the GEMM finiteness bounds;
3. the global facts are adopted: the window is normalized once by the global item count.

Every rank ends with bit-identical sums, so every rank takes the same optimizer step.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from minitorch_accum.accum import ArenaStore
from minitorch_accum.distributed.buckets import (
    DEFAULT_BUCKET_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    Bucket,
    plan_buckets,
)
from minitorch_accum.distributed.communicator import Communicator, Pending
from minitorch_accum.distributed.reduction_record import BucketReduction, WindowReduction

__all__ = ["DataParallel", "WindowReduction"]

_FACTS = 4  # micro-batches, items, non-finite flag, stop request; then one entry per parameter


class DataParallel:
    """The WindowReducer of plain data parallelism: every rank ends with the global sums."""

    sharded = False

    def __init__(self, communicator: Communicator, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                 first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES, overlap: bool = False) -> None:
        self.comm = communicator
        #: start each bucket's reduction during the window's last backward, as soon as every
        #: parameter in it has its gradient (off by default: measured slower on the CPU)
        self.overlap = bool(overlap)
        self.shards = communicator.world_size
        self.bucket_bytes = int(bucket_bytes)
        self.first_bucket_bytes = int(first_bucket_bytes)
        self.windows_reduced = 0
        self.last = WindowReduction()
        #: set by the caller when this rank wants to stop; ``stop_agreed`` says whether any rank did
        self.stop_requested = False
        self.stop_agreed = False
        self._plans: dict[int, list[Bucket]] = {}
        self._in_flight: list[tuple[Bucket, Pending, float]] = []
        self._launched = 0
        self._waiting: dict[int, set[int]] = {}
        self._zeroed = False

    def buckets(self, store: ArenaStore) -> list[Bucket]:
        """The buckets of ``store``'s arena (planned once per arena)."""
        key = id(store.arena)
        if key not in self._plans:
            self._plans[key] = plan_buckets(store.arena, self.shards, self.bucket_bytes, self.first_bucket_bytes)
        return self._plans[key]

    # ------------------------------------------------------------ WindowReducer
    def window_closing(self, store: ArenaStore) -> None:
        """The window's last micro-batch is about to run: with ``overlap``, reduce each bucket
        as soon as backward has finished every parameter in it."""
        if not self.overlap:
            return
        # views still unwritten are zeroed now: a first write copies over the zeros, and no
        # bucket already in flight is written to afterwards
        store.zero_unwritten()
        self._zeroed = True
        ids = {name: id(p) for name, p in zip(store.arena.names, store.arena.params, strict=True)}
        self._waiting = {b.index: {ids[n] for n in b.params} for b in self.buckets(store)}
        self._launched = 0
        # a parameter cut by a bucket edge waits in both buckets
        waiting_on: dict[int, list[set[int]]] = {}
        for waiting in self._waiting.values():
            for param_id in waiting:
                waiting_on.setdefault(param_id, []).append(waiting)

        def leaf_done(param: Any) -> None:
            for waiting in waiting_on.get(id(param), ()):
                waiting.discard(id(param))
            self._launch(store, only_ready=True)

        store.leaf_done = leaf_done

    def _launch(self, store: ArenaStore, only_ready: bool) -> None:
        """Start the next buckets in plan order (every rank starts them in the same order)."""
        plan = self.buckets(store)
        comp = store.compensation
        while self._launched < len(plan):
            bucket = plan[self._launched]
            if only_ready and self._waiting.get(bucket.index):
                return
            pending = self.comm.iallreduce(bucket.of(store.arena.buffers),
                                           None if comp is None else bucket.of(comp.buffers))
            self._in_flight.append((bucket, pending, time.perf_counter()))
            self._launched += 1

    def reduce(self, store: ArenaStore, micro_batches: int, items: int) -> tuple[int, int]:
        started = time.perf_counter()
        store.leaf_done = None
        self.last = WindowReduction(started=started)
        if not self._zeroed:
            store.zero_unwritten()
        self._reduce_gradients(store)
        facts_started = time.perf_counter()
        facts = self.comm.allreduce_scalars(
            [micro_batches, items, int(store.flag[0]), int(self.stop_requested), *store.written_mask()], np.int64)
        bounds = self.comm.allreduce_scalars(store.gemm_bounds(), np.float64)
        self.last.facts_seconds = time.perf_counter() - facts_started
        store.adopt(facts[_FACTS:], bounds, nonfinite=bool(facts[2]))
        self.stop_agreed = bool(facts[3])
        self.windows_reduced += 1
        self._zeroed = False
        self.last.seconds = time.perf_counter() - started
        self._trace(store)
        return int(facts[0]), int(facts[1])

    def _reduce_gradients(self, store: ArenaStore) -> None:
        if self.overlap:
            self.last.started_during_backward = self._launched
            self._launch(store, only_ready=False)  # what backward did not start, in plan order
            for position, (bucket, pending, started) in enumerate(self._in_flight):
                pending.wait()
                self._record(store, bucket, started, during_backward=position < self.last.started_during_backward)
            self._in_flight, self._launched = [], 0
            return
        comp = store.compensation
        for bucket in self.buckets(store):
            start = time.perf_counter()
            if comp is None:
                self.comm.allreduce(bucket.of(store.arena.buffers))
            else:
                self.comm.allreduce_pairs(bucket.of(store.arena.buffers), bucket.of(comp.buffers))
            store.arena.backend.synchronize()
            self._record(store, bucket, start)

    def _record(self, store: ArenaStore, bucket: Bucket, started: float, during_backward: bool = False) -> None:
        """The bucket's call in ``last``: bytes this rank sent (sums and compensations) and its time."""
        nbytes = bucket.nbytes * (1 if store.compensation is None else 2)
        self.last.buckets.append(BucketReduction(bucket.index, self._collective_name, bucket.dtype.name, bucket.start,
                                                 bucket.stop, nbytes, started, time.perf_counter() - started,
                                                 during_backward))

    def finite_check(self, store: ArenaStore) -> bool:
        # every rank holds the same sums, flag and bounds: the same answer everywhere
        return store.finite_check()

    def norm(self, store: ArenaStore) -> float:
        return store.norm()

    def complete(self, store: ArenaStore) -> None:
        """Nothing to gather: every rank holds the whole global window."""

    def _trace(self, store: ArenaStore) -> None:
        if store.recorder is None:
            return
        # the first collective also waits for the slowest rank to finish its micro-batches
        store.recorder("(window facts, wait)", "allreduce", 0, 0, self.last.facts_seconds, materialized=False,
                       window_pass=True)
        for bucket in self.last.buckets:
            store.recorder(f"bucket {bucket.index} [{bucket.start}:{bucket.stop}]", bucket.collective,
                           bucket.elements, bucket.nbytes, bucket.seconds, materialized=False, window_pass=True)

    _collective_name = "allreduce"

    def describe(self, store: Any) -> str:
        """One line on how a window is reduced: ranks, buckets, bytes."""
        buckets = self.buckets(store)
        total = sum(b.nbytes for b in buckets)
        return (f"{self.comm.world_size} ranks, one reduction per window over {len(buckets)} bucket(s) "
                f"of the arena ({total:,} bytes per rank)")
