"""``maccum train --trace-out`` on 2 ranks: one Trace Event Format file per rank, each naming its
rank for Holistic Trace Analysis, with every bucket's collective and its bytes in the close; a trace
some rank cannot write stops every rank with one message before the first step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.distributed.launcher import run_programs, run_ranks
from tests.trace_events import check_trace_event_format, complete, inside

RANKS = 2

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traced")
    (out / "traces").mkdir()  # a trace's directory must exist: --trace-out never creates one
    run_ranks(RANKS, ["minitorch_accum.cli", "train", "--dataset", "digits", "--epochs", "1", "--accum", "2",
                      "--micro-batch", "128", "--out", str(out / "run"), "--progress", "none",
                      "--trace-out", str(out / "traces" / "fit.trace.json")])
    return out / "traces"


def test_each_rank_writes_its_file_with_its_place_in_the_job(traces: Path) -> None:
    files = sorted(p.name for p in traces.iterdir())
    assert files == ["fit.trace.rank0.json", "fit.trace.rank1.json"]
    windows = None
    for rank in range(RANKS):
        record = json.loads((traces / f"fit.trace.rank{rank}.json").read_text())
        assert record["distributedInfo"]["rank"] == rank and record["distributedInfo"]["world_size"] == RANKS
        events = check_trace_event_format(record)
        assert {e["pid"] for e in events} == {rank}
        steps = [e for e in complete(events, cat="window") if e["name"].startswith("ProfilerStep#")]
        windows = len(steps) if windows is None else windows
        assert len(steps) == windows > 1  # every rank takes every window
        reductions = complete(events, "reduce over ranks")
        assert len(reductions) == windows
        buckets = [e for e in complete(events, cat="collective") if e["args"]["param"].startswith("bucket")]
        assert len(buckets) >= windows
        for bucket in buckets:
            args = bucket["args"]
            assert args["path"] == "mpi" and args["bytes"] == 4 * args["elements"] > 0  # float32 sums
            assert any(inside(bucket, reduction, slack_us=5.0) for reduction in reductions), bucket


# HTA 0.5 calls pandas with arguments pandas deprecates; they are HTA's to change, not our files'
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_holistic_trace_analysis_reads_both_ranks(traces: Path) -> None:
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=str(traces))
    assert analysis.t.get_ranks() == [0, 1]
    steps = len([e for e in json.loads((traces / "fit.trace.rank0.json").read_text())["traceEvents"]
                 if e["name"].startswith("ProfilerStep#")])
    for rank in range(RANKS):
        frame = analysis.t.get_trace(rank)
        names = set(analysis.t.symbol_table.get_sym_table())
        assert {"forward", "backward", "allreduce", "optimizer step"} <= names
        # HTA leaves out the last ProfilerStep unless asked: the others are its iterations
        assert analysis.t.get_iterations(rank) == list(range(steps - 1))
        assert len(frame) > 0 and frame["dur"].min() >= 0


def test_a_trace_some_rank_cannot_write_stops_every_rank_with_one_message_before_the_first_step(
        tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "t.rank1.json").mkdir()  # rank 1 alone cannot write its file
    (tmp_path / "afile").write_text("mine")  # neither rank can
    traces = [tmp_path / "traces" / "t.json", tmp_path / "afile" / "t.json"]
    run_ranks(RANKS, ["tests.distributed.rank_programs", "refused_starts", str(tmp_path),
                      "traces=" + ",".join(map(str, traces))])
    expected = [f"rank 1: trace_out {tmp_path / 'traces' / 't.rank1.json'} is a directory; give a file name",
                f"trace_out {tmp_path / 'afile' / 't.rank0.json'} is inside {tmp_path / 'afile'}, which is a regular "
                "file, not a directory; choose another path"]  # rank 0's words, where it failed too
    for index, message in enumerate(expected):
        for rank in range(RANKS):
            said = json.loads((tmp_path / f"refused-{index}-rank{rank}.json").read_text())
            assert said == {"message": message, "step": 0, "run_directory": False}, (index, rank)  # nor its lock


def test_maccum_train_into_a_read_only_trace_on_rank_0_stops_both_ranks_before_the_first_step(
        tmp_path: Path, read_only: Path) -> None:
    # an MPMD launch: rank 1's trace could be written, so rank 1 stops only because rank 0 could not
    train = ["minitorch_accum.cli", "train", "--dataset", "digits", "--epochs", "1", "--accum", "2", "--micro-batch",
             "128", "--out", str(tmp_path / "run"), "--progress", "plain", "--trace-out"]
    result = run_programs([[*train, str(read_only / "t.json")], [*train, str(tmp_path / "t.json")]])
    line = (f"maccum train: error: --trace-out {read_only / 't.json'}: cannot create files in {read_only}: "
            "Read-only file system (EROFS); choose a writable directory")
    said = sorted(text for text in result.stderr.splitlines() if "Abort(2)" not in text)  # MPI's own line
    assert result.returncode == 2 and result.stdout == "", result  # no progress line on either rank
    assert said == [f"[0] {line}", f"[1] {line}"], result.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "t.json").exists()
