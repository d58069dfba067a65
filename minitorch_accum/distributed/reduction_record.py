"""What one window's reduction over the ranks did, bucket by bucket: plain data for traces.

``DataParallel.last`` (and ZeRO-1's) is a ``WindowReduction`` after every window: one
``BucketReduction`` per collective call over the gradient arena, in the order the calls were
started, with the bytes it moved and when it started and ended on this rank's clock
(``time.perf_counter()`` seconds), and the window's two small fact reductions. Nothing here
holds an array or a communicator, so a record can be kept, compared, written as JSON
(``as_dict``) or turned into trace events (a Perfetto/Chrome "X" event per bucket: name
``bucket {index}``, ``ts = started``, ``dur = seconds``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BucketReduction", "WindowReduction"]


@dataclass(frozen=True)
class BucketReduction:
    """One collective call over elements ``[start, stop)`` of the arena's ``dtype`` buffer.

    ``nbytes`` counts what this rank contributed (a compensated arena sends its sums and its
    compensations: twice the bucket). ``seconds`` runs from the call's start to its result being in
    place: for a bucket started during the last backward (``during_backward``) that includes the
    backward work it overlapped with."""

    index: int
    collective: str  # "allreduce" or "reduce_scatter"
    dtype: str
    start: int
    stop: int
    nbytes: int
    started: float  # time.perf_counter() on this rank when the call was made
    seconds: float
    during_backward: bool = False

    @property
    def elements(self) -> int:
        return self.stop - self.start

    @property
    def ended(self) -> float:
        return self.started + self.seconds


@dataclass
class WindowReduction:
    """What the last window's reduction did, for ``maccum explain``, benchmarks and traces."""

    buckets: list[BucketReduction] = field(default_factory=list)  # in the order the calls started
    started: float = 0.0  # time.perf_counter() when the window's reduction phase began
    facts_seconds: float = 0.0  # the window's facts (counts, flags, written views, GEMM bounds)
    seconds: float = 0.0  # the whole phase: buckets (what was left of them) and facts
    started_during_backward: int = 0  # buckets an overlapped reduction started before the window closed

    @property
    def bytes(self) -> int:
        return sum(bucket.nbytes for bucket in self.buckets)

    @property
    def bucket_seconds(self) -> float:
        """Seconds from the first bucket's start to the last one's end (overlapped calls counted once)."""
        if not self.buckets:
            return 0.0
        return max(b.ended for b in self.buckets) - min(b.started for b in self.buckets)

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (times relative to the phase's start, as a trace shows them)."""
        return {"started": self.started, "facts_seconds": self.facts_seconds, "seconds": self.seconds,
                "bytes": self.bytes, "started_during_backward": self.started_during_backward,
                "buckets": [{**asdict(b), "offset": b.started - self.started} for b in self.buckets]}
