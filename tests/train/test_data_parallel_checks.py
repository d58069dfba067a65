"""Two guards of a data-parallel fit, on two ranks in one process (threads): the validation loss
is the one process's, over every item once; and the periodic check that the ranks hold the same
parameters runs every ``check_every`` steps and stops the run at the first one after they part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.distributed.parameter_sync import ParameterMismatchError
from minitorch_accum.testing import run_ranks
from minitorch_accum.testing.simulated_ranks import ThreadCommunicator
from minitorch_accum.train import LearnerBuilder


def _data(n: int, seed: int) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    return ArrayDataset(x, (x[:, 0] + x[:, 1] > 0).astype(np.int64))


def _mlp() -> nn.Module:
    mta.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8, dtype="float64"), nn.Tanh(), nn.Linear(8, 3, dtype="float64"))


def _builder(directory: Path, comm: ThreadCommunicator | None = None, **distributed: Any) -> LearnerBuilder:
    builder = LearnerBuilder(directory).num_epochs(1).grads_accumulation(1).progress("none").accum_dtype("float64")
    return builder if comm is None else builder.distributed(comm, **distributed)


def test_the_data_parallel_validation_loss_is_the_one_process_loss_over_every_item_once(tmp_path: Path) -> None:
    # 5 batches (4, 4, 4, 4, 2 items) over 2 ranks: rank 0 takes 3 of them, rank 1 takes 2
    valid = DataLoader(_data(18, seed=4), 4, shuffle=True, seed=2)
    one = _builder(tmp_path / "one").build(_mlp(), optim.SGD(0.1)).evaluate(valid)
    models = [_mlp(), _mlp()]  # built here: the global generator is not for threads to share

    def rank(comm: ThreadCommunicator) -> dict[str, Any]:
        return _builder(tmp_path / "ranks", comm).build(models[comm.rank], optim.SGD(0.1)).evaluate(valid)

    got = run_ranks(2, rank)
    assert one["items"] == 18
    for record in got:
        assert record["items"] == 18
        assert record["accuracy"] == one["accuracy"]  # a count of correct items over 18: exact
        # the same float64 sums, added in another order (each rank's, then across the ranks)
        assert record["loss"] == pytest.approx(one["loss"], rel=1e-12, abs=0)
    assert got[0] == got[1]


def _nudging_rank(directory: Path, models: list[nn.Module], nudge_after: int, check_every: int):
    """A rank program: rank 1 adds 1e-3 to one weight after optimizer step ``nudge_after``; each
    rank returns the agreement error it stopped with (None: the run finished) and its last step."""
    def rank(comm: ThreadCommunicator) -> tuple[str | None, int]:
        def nudge(learner: Any, record: dict[str, Any]) -> None:
            if learner.rank == 1 and record["step"] == nudge_after:
                learner.model[0].weight.data[2, 5] += 1e-3  # after a backward, before the next forward

        learner = (_builder(directory, comm, check_every=check_every).on_step_end(nudge)
                   .build(models[comm.rank], optim.SGD(0.1)))
        try:
            learner.fit(DataLoader(_data(64, seed=0), 4, seed=3))  # 8 steps of 2 x 4 items
        except ParameterMismatchError as error:
            return str(error), learner.step
        return None, learner.step

    return rank


@pytest.mark.parametrize(("nudge_after", "check_every", "caught_at"), [(1, 3, 3), (3, 3, 6), (4, 2, 6)])
def test_a_rank_whose_parameters_part_stops_the_run_at_the_next_agreement_check(
        tmp_path: Path, nudge_after: int, check_every: int, caught_at: int) -> None:
    models = [_mlp(), _mlp()]
    got = run_ranks(2, _nudging_rank(tmp_path, models, nudge_after, check_every))
    for message, step in got:  # every rank stops with the agreement error, at the same check
        assert message is not None and f"step {caught_at}" in message
        assert step == caught_at


def test_ranks_that_stay_together_pass_every_check(tmp_path: Path) -> None:
    models = [_mlp(), _mlp()]
    assert run_ranks(2, _nudging_rank(tmp_path, models, nudge_after=99, check_every=1)) == [(None, 8), (None, 8)]
