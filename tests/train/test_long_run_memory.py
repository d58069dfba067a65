"""A long run does not grow: measuring each micro-batch's memory leaks nothing.

Each test runs in a fresh interpreter, so the resident set it reads is that run's alone."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitorch_accum.observe.memory import array_tracking_available

pytestmark = pytest.mark.skipif(not array_tracking_available(), reason="this NumPy has no data-memory handler")

_RSS = textwrap.dedent("""
    def rss_kib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
""")


def _run(program: str, directory: Path) -> dict:
    # from a file: run with -c, the leak this guards against did not show (its traces differ)
    script = directory / "program.py"
    script.write_text(_RSS + textwrap.dedent(program))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the resident set from /proc")
def test_a_thousand_optimizer_steps_keep_the_resident_set_flat(tmp_path: Path) -> None:
    # 1000 optimizer steps of 2 micro-batches (2000 probes) of a 6-8-2 MLP, after a warm-up run of
    # 200 steps that loads every code path. The run itself keeps one metrics record per step (in
    # History and MetricsLog: ~0.7 KiB with its dict and floats) and the allocator rounds and
    # fragments; 3 KiB per step bounds that with room to spare. Starting and stopping tracemalloc
    # around each micro-batch grew it by ~12 KiB per micro-batch: ~24 MiB here, 8x the bound.
    result = _run(f"""
        import json, tracemalloc
        import numpy as np
        import minitorch_accum as mta
        from minitorch_accum import nn, optim
        from minitorch_accum.data import ArrayDataset, DataLoader
        from minitorch_accum.train import LearnerBuilder

        def fit(directory, steps):
            rng = np.random.default_rng(0)
            x = rng.normal(size=(steps * 8, 6)).astype(np.float32)
            y = (x[:, 0] > 0).astype(np.int64)
            mta.manual_seed(0)
            model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
            learner = (LearnerBuilder(directory).num_epochs(1).grads_accumulation(2).progress("none")
                       .build(model, optim.SGD(0.01)))
            _, history = learner.fit(DataLoader(ArrayDataset(x, y), 4))
            return history

        fit({str(tmp_path / "warm")!r}, 200)
        before = rss_kib()
        history = fit({str(tmp_path / "run")!r}, 1000)
        grown = rss_kib() - before
        print(json.dumps({{"steps": len(history.steps), "grown_kib": grown, "tracing": tracemalloc.is_tracing(),
                          "measured": history.steps[-1]["peak_array_bytes"]}}))
    """, tmp_path)
    assert result["steps"] == 1000 and result["measured"] > 0  # memory was measured on every micro-batch
    assert not result["tracing"]
    assert result["grown_kib"] < 3 * 1000, f"the resident set grew {result['grown_kib']} KiB over 1000 steps"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the resident set from /proc")
def test_ten_thousand_probes_leave_nothing_behind(tmp_path: Path) -> None:
    # nothing is kept between probes: 10,000 of them, each with arrays and Python objects, may
    # grow the resident set by no more than the allocator's slack (256 KiB: 26 bytes a probe,
    # where the leak cost ~30 bytes per traced allocation site per probe, ~2 MiB here)
    result = _run("""
        import json, tracemalloc
        import numpy as np
        from minitorch_accum.observe import PeakMemory

        def probe():
            with PeakMemory() as peak:
                arrays = [np.empty(n) for n in (10, 100, 1000)]
                objects = [(i, str(i)) for i in range(20)]
                del arrays, objects
            return peak

        for _ in range(500):
            probe()
        before = rss_kib()
        for _ in range(10_000):
            last = probe()
        print(json.dumps({"grown_kib": rss_kib() - before, "arrays": last.array_peak_bytes,
                          "other": last.other_bytes, "tracing": tracemalloc.is_tracing()}))
    """, tmp_path)
    assert result["arrays"] == 8 * (10 + 100 + 1000) and result["other"] > 0
    assert not result["tracing"]
    assert result["grown_kib"] < 256, f"the resident set grew {result['grown_kib']} KiB over 10,000 probes"
