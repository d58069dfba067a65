"""Checking, before any rank does work the others must match, that every rank means the same run.

Ranks started with different settings do not fail by themselves: with another seed they train
silently to other parameters; with another k they reach different collectives and wait forever.
``check_ranks_agree`` gathers a small JSON description from every rank (two all-gathers of known
size, which every rank reaches whatever its settings) and compares it entry by entry; every rank
then raises the same ``RanksDisagreeError``, one line naming each entry that differs and which
ranks hold which value.

Ranks that mean the same run may still compute differently: another BLAS kernel or NumPy SIMD
target on one host rounds otherwise (``backend/numerics.py``). ``compare_rank_numerics`` gathers
every rank's numerics fingerprint; a difference is not an error by default (the run is still right,
equal to one process up to rounding): it returns one line saying so, or, strict, raises
``RanksComputeDifferentlyError`` on every rank.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from minitorch_accum.backend.numerics import BIT_IDENTITY_NEEDS, NumericsFingerprint, numerics_differences
from minitorch_accum.distributed.checkpoint_broadcast import gather_json
from minitorch_accum.distributed.communicator import Communicator

__all__ = ["RankStartError", "RanksComputeDifferentlyError", "RanksDisagreeError", "check_ranks_agree",
           "compare_rank_numerics", "describe_disagreement", "describe_rank_numerics", "stop_if_any_rank_failed"]

_MISSING = "<absent>"
_SHOWN = 60  # characters of a value shown in the message


class RanksDisagreeError(ValueError):
    """Data-parallel ranks were started with different settings, data or models (raised on every rank)."""

    def __init__(self, message: str, comm: Communicator) -> None:
        super().__init__(message)
        self.comm = comm

    def wait_for_every_rank(self) -> None:
        """Return once every rank has reached this point: a caller that reports the error and then
        ends the job waits here, so no rank is ended before it has said what was wrong."""
        self.comm.agree(False)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


class RanksComputeDifferentlyError(RanksDisagreeError):
    """Strict numerics: the ranks compute with different BLAS kernels or NumPy SIMD targets (raised on every rank)."""


class RankStartError(RanksDisagreeError):
    """A rank could not start the run (its directory, an output path): raised on every rank with that
    rank's message, so each says the same thing before the job ends."""


def stop_if_any_rank_failed(comm: Communicator, failure: Exception | None) -> None:
    """Return when no rank failed to start; otherwise every rank raises, none left waiting in a collective.

    ``failure``: what this rank could not do (None: nothing failed). In one process it is raised
    itself; data-parallel, every rank raises the same RankStartError holding the message of the
    lowest failing rank (prefixed ``rank R:`` when that is not rank 0), chained from its own failure.
    Every rank takes part: one all-reduce, and one all-gather pair when something failed."""
    if not comm.agree(failure is not None):
        return
    if comm.world_size == 1:
        assert failure is not None
        raise failure
    messages = gather_json(comm, None if failure is None else str(failure))
    rank, message = next((r, m) for r, m in enumerate(messages) if m is not None)
    raise RankStartError(message if rank == 0 else f"rank {rank}: {message}", comm) from failure


def _show(value: Any) -> str:
    text = _MISSING if value is _MISSING else json.dumps(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _first_difference(values: list[Any]) -> tuple[str, list[Any]]:
    """For lists of entries (parameters, say) that differ: where the first difference is, and
    each rank's entry there, so the message shows the entry rather than the whole list."""
    if not all(isinstance(v, list) for v in values):
        return "", values
    for position in range(max(len(v) for v in values)):
        entries = [v[position] if position < len(v) else _MISSING for v in values]
        if any(e != entries[0] for e in entries):
            return f" (entry {position} of {'/'.join(str(len(v)) for v in values)})", entries
    return "", values


def describe_disagreement(every: list[Mapping[str, Any]]) -> list[str]:
    """One phrase per entry on which the ranks' descriptions differ (empty when they all agree)."""
    # the settings first, then the data and the model (which usually differ because a setting does)
    names = sorted({name for description in every for name in description},
                   key=lambda name: (name.startswith(("data.", "model.")), name))
    phrases = []
    for name in names:
        values = [description.get(name, _MISSING) for description in every]
        if all(v == values[0] for v in values):
            continue
        where, shown = _first_difference(values)
        groups: dict[str, list[int]] = {}
        for rank, value in enumerate(shown):
            groups.setdefault(_show(value), []).append(rank)
        holders = "; ".join(f"{_ranks(ranks)}: {value}" for value, ranks in groups.items())
        phrases.append(f"{name}{where}: {holders}")
    return phrases


def check_ranks_agree(comm: Communicator, description: Mapping[str, Any], what: str = "run") -> None:
    """RanksDisagreeError on every rank unless every rank passed the same ``description``
    (JSON values by name: settings, digests of the data, the model's parameter table)."""
    if comm.world_size == 1:
        return
    every = gather_json(comm, dict(description))
    phrases = describe_disagreement(every)
    if phrases:
        raise RanksDisagreeError(
            f"the {comm.world_size} data-parallel ranks disagree on the {what}: {' | '.join(phrases)}; start every "
            "rank with the same command line, data and model (an MPMD launch or a stale checkout on one host "
            "does this)", comm)


def describe_rank_numerics(every: list[NumericsFingerprint], products: Iterable[Any] | None = None) -> list[str]:
    """One phrase per compared numerics field on which the ranks differ, each group of ranks with
    what it computes with: ``BLAS: rank 0 computes with OpenBLAS Haswell, rank 1 with OpenBLAS SkylakeX``;
    ``products``, the dtypes of the run's products, leaves out what cannot change its bits
    (``numerics_differences``)."""
    phrases = []
    for name, values in numerics_differences(every, products).items():
        groups: dict[str, list[int]] = {}
        for rank, value in enumerate(values):
            groups.setdefault(value, []).append(rank)
        held = [f"{_ranks(ranks)} {'computes' if len(ranks) == 1 else 'compute'} with {value}" if position == 0
                else f"{_ranks(ranks)} with {value}" for position, (value, ranks) in enumerate(groups.items())]
        phrases.append(f"{name}: {', '.join(held)}")
    return phrases


def compare_rank_numerics(comm: Communicator, fingerprint: NumericsFingerprint, strict: bool = False,
                          products: Iterable[Any] | None = None) -> str | None:
    """None when every rank computes alike (or in one process); else one line naming each differing
    field and its ranks, or, ``strict``, RanksComputeDifferentlyError on every rank. Every rank
    takes part (one all-gather pair) and gets the same answer. ``products``: the dtypes of the
    run's products (its parameters'), so that a float32 run on the native GEMM is not told of a
    BLAS that rounds none of them."""
    if comm.world_size == 1:
        return None
    every = [NumericsFingerprint.from_dict(record) for record in gather_json(comm, fingerprint.as_dict())]
    phrases = describe_rank_numerics(every, products)
    if not phrases:
        return None
    if strict:
        raise RanksComputeDifferentlyError(
            f"strict numerics (--strict-numerics): the {comm.world_size} data-parallel ranks compute differently: "
            f"{' | '.join(phrases)}; {BIT_IDENTITY_NEEDS}", comm)
    return (f"numerics: {' | '.join(phrases)}: the run equals one process up to rounding, not bit for bit "
            "(start every rank with the same BLAS kernel, float32 GEMM and NumPy SIMD target; --strict-numerics "
            "refuses)")
