"""How often the verdicts cry wolf, and whether they still catch the bugs: a measurement.

    python -m minitorch_accum.testing.false_alarms --runs 2000 --jobs 2 --out false_alarms.json

Run i checks family ``i mod F`` of ``false_alarm_corpus`` (correct models, the correct recipe) in
float32 or float64, on a batch of 6 to 16 rows and one split of 2 to 6 micro-batches, both drawn
from a generator seeded by i, with every property. A failed (or inconclusive) property there is a
false alarm. Then every museum bug (``bugs.EXHIBITS``) that can show on a family runs through its
property on each family and dtype, and must fail. Prints the table (family x dtype x property:
runs, false alarms, the worst gap / bound) and the bugs caught, and writes both as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from minitorch_accum.testing.equivalence import check_properties
from minitorch_accum.testing.false_alarm_corpus import FAMILIES, Family
from minitorch_accum.testing.properties import PROPERTIES
from minitorch_accum.testing.property_results import FAILED, INEXACT

__all__ = ["BugRun", "Run", "bug_runs", "correct_run", "main", "table"]

DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Run:
    """One correct model checked: per property its verdict and worst gap / bound."""

    family: str
    dtype: str
    rows: int
    split: tuple[int, ...]
    seed: int
    statuses: dict[str, str]
    ratios: dict[str, float]
    seconds: float


@dataclass(frozen=True)
class BugRun:
    """One museum bug on one family: caught when its property fails."""

    bug: str
    family: str
    dtype: str
    property: str
    status: str
    ratio: float

    @property
    def caught(self) -> bool:
        return self.status == FAILED


def _split(rng: np.random.Generator, rows: int) -> tuple[int, ...]:
    parts = int(rng.integers(2, min(rows, 6) + 1))
    cuts = np.sort(rng.choice(np.arange(1, rows), size=parts - 1, replace=False))
    return tuple(int(n) for n in np.diff([0, *cuts, rows]))


def correct_run(index: int, families: Sequence[str] = tuple(FAMILIES)) -> Run:
    """Run ``index`` of the measurement: every property on a correct model."""
    family = FAMILIES[families[index % len(families)]]
    dtype = DTYPES[(index // len(families)) % len(DTYPES)]
    rng = np.random.default_rng(index)
    rows = int(rng.integers(6, 17))
    split = _split(rng, rows)
    seed = int(rng.integers(0, 2**31))
    start = time.perf_counter()
    report = check_properties(family.factory, family.loss_fn, family.batch(seed, rows), splits=[split], dtype=dtype,
                              seed=seed % 1000, raise_on_failure=False)
    ratios = {r.name: max((w.ratio for w in r.worst.values()), default=0.0) for r in report.results}
    return Run(family.name, dtype, rows, split, seed, {r.name: r.status for r in report.results}, ratios,
               time.perf_counter() - start)


def _shows_on(bug: str, family: Family, dtype: str) -> bool:
    """Whether the bug can show on this family: the label-shift miscount needs shifted sequences, the
    float32 accumulator a float64 model."""
    if bug == "count_before_shift":
        return family.sequences
    if bug == "float32_accumulator":
        return dtype == "float64"
    return True


def bug_runs(family_name: str) -> list[BugRun]:
    """Every museum bug that can show on ``family_name``, in both dtypes, through its property."""
    from minitorch_accum.testing import bugs

    family = FAMILIES[family_name]
    ids_or_x, targets = family.batch(7, 12)
    out = []
    for dtype in DTYPES:
        for exhibit in bugs.EXHIBITS.values():
            if exhibit.inexact or not _shows_on(exhibit.name, family, dtype):
                continue
            # a bug that lives in loss_fn is made in the family's own loss; the recipe is then the correct one
            loss_fn = exhibit.faulty_loss_of(family.loss_fn) if exhibit.faulty_loss_of else family.loss_fn
            # uneven micro-batches (2 against 3 items...), ranks holding different item counts
            report = check_properties(family.factory, loss_fn, (ids_or_x, targets), splits=[(1, 3, 2, 6)],
                                      dtype=dtype, recipe=exhibit.recipe(), properties=[exhibit.property],
                                      raise_on_failure=False)
            result = report[exhibit.property]
            out.append(BugRun(exhibit.name, family.name, dtype, exhibit.property, result.status,
                              max((w.ratio for w in result.worst.values()), default=0.0)))
    return out


def table(runs: Sequence[Run]) -> list[dict]:
    """Family x dtype x property: runs, false alarms, inconclusive, the worst gap / bound."""
    rows: dict[tuple[str, str, str], dict] = {}
    for run in runs:
        for name, status in run.statuses.items():
            row = rows.setdefault((run.family, run.dtype, name), {
                "family": run.family, "dtype": run.dtype, "property": name, "runs": 0, "false_alarms": 0,
                "inconclusive": 0, "worst_ratio": 0.0})
            row["runs"] += 1
            row["false_alarms"] += status == FAILED
            row["inconclusive"] += status == INEXACT
            row["worst_ratio"] = max(row["worst_ratio"], run.ratios[name])
    order = {name: i for i, name in enumerate(PROPERTIES)}
    return sorted(rows.values(), key=lambda r: (r["family"], r["dtype"], order.get(r["property"], 99)))


def _print(runs: Sequence[Run], bugs_run: Sequence[BugRun], seconds: float) -> None:
    print(f"{len(runs)} runs of correct models ({len({r.family for r in runs})} families, float32 and float64, "
          f"every property), {seconds:.0f} s")
    print("| family | dtype | property | runs | false alarms | inconclusive | worst gap / bound |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for row in table(runs):
        print(f"| {row['family']} | {row['dtype']} | {row['property']} | {row['runs']} | {row['false_alarms']} | "
              f"{row['inconclusive']} | {row['worst_ratio']:.3g} |")
    alarms = sum(r.statuses[n] in (FAILED, INEXACT) for r in runs for n in r.statuses)
    checks = sum(len(r.statuses) for r in runs)
    print(f"false alarms: {alarms} of {checks} property checks")
    if bugs_run:
        caught = sum(b.caught for b in bugs_run)
        print(f"museum bugs on the corpus: {caught} of {len(bugs_run)} caught")
        for b in bugs_run:
            if not b.caught:
                print(f"  MISSED {b.bug} on {b.family} ({b.dtype}) by {b.property}: {b.status}")


def _compact(index: int, run: Run) -> dict:
    """A run as the JSON keeps it: which one (``correct_run(index)`` replays it), its verdicts, its worst ratio."""
    return {"index": index, "family": run.family, "dtype": run.dtype, "split": run.split,
            "verdicts": sorted(set(run.statuses.values())), "worst_ratio": float(f"{max(run.ratios.values()):.3g}")}


def _write(path: Path, record: dict) -> None:
    """JSON with one line per table row, bug and run."""
    lines = ["{"]
    for position, (key, value) in enumerate(record.items()):
        comma = "," if position < len(record) - 1 else ""
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(item) for item in value)
            lines.append(f" {json.dumps(key)}: [\n  {items}\n ]{comma}" if value else f" {json.dumps(key)}: []{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    path.write_text("\n".join(lines) + "\n}\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minitorch_accum.testing.false_alarms",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="correct-model runs (default 200)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--no-bugs", action="store_true", help="skip the museum's bugs")
    parser.add_argument("--out", type=Path, default=None, help="write the runs and the table as JSON here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    families = list(FAMILIES)
    if args.jobs > 1:
        with get_context("fork").Pool(args.jobs) as pool:
            runs = pool.map(correct_run, range(args.runs), chunksize=4)
            bugs_run = [] if args.no_bugs else [b for part in pool.map(bug_runs, families) for b in part]
    else:
        runs = [correct_run(i) for i in range(args.runs)]
        bugs_run = [] if args.no_bugs else [b for name in families for b in bug_runs(name)]
    seconds = time.perf_counter() - start
    _print(runs, bugs_run, seconds)
    if args.out is not None:
        _write(args.out, {
            "command": "python -m minitorch_accum.testing.false_alarms " + " ".join(sys.argv[1:] if argv is None
                                                                                  else argv),
            "seconds": round(seconds, 1), "table": table(runs),
            "bugs": [{**asdict(b), "caught": b.caught} for b in bugs_run],
            "runs": [_compact(index, run) for index, run in enumerate(runs)]})
    failed = any(r.statuses[n] in (FAILED, INEXACT) for r in runs for n in r.statuses)
    return 1 if failed or any(not b.caught for b in bugs_run) else 0


if __name__ == "__main__":
    raise SystemExit(main())
