"""What each rank runs in the multi-process tests (``python -m mpi4py -m tests.distributed.rank_programs
<scenario> <out> ...``); the data and models are shared with the tests, which check the results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.distributed import DataParallel, MPICommunicator, rank_windows
from minitorch_accum.distributed.rank_agreement import RankStartError
from minitorch_accum.nn import functional as F
from minitorch_accum.train import Classifier, LearnerBuilder

PAD = -100
VOCAB = 7


def token_data(n: int = 15, width: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sequences padded with ignore_index: every micro-batch holds its own number of items."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(n, width))
    targets = rng.integers(0, VOCAB, size=(n, width))
    lengths = rng.integers(1, width + 1, size=n)
    targets[np.arange(width)[None, :] >= lengths[:, None]] = PAD
    return ids, targets


class TokenModel(nn.Module):
    def __init__(self, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        self.embed = nn.Embedding(VOCAB, 6, dtype="float64", rng=rng)
        self.head = nn.Linear(6, VOCAB, dtype="float64", rng=rng)

    def forward(self, ids: np.ndarray) -> mta.Tensor:
        return self.head(self.embed(ids).tanh())


def summed_loss(model: nn.Module, ids: np.ndarray, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    loss = F.cross_entropy(model(ids), targets, reduction="sum", ignore_index=PAD)
    return loss, int((targets != PAD).sum())


WINDOW_CASES = [("leaf", False), ("gemm", False), ("leaf", True), ("gemm", True)]
B, K = 2, 3


def window(out: Path) -> None:
    """Each case: the global window gradients of every window, R ranks x k x b."""
    comm = MPICommunicator()
    ids, targets = token_data()
    order = np.random.default_rng(5).permutation(len(ids))
    batches = -(-len(ids) // B)
    results = {}
    for (fusion, compensated), overlap in [(case, overlap) for case in WINDOW_CASES for overlap in (False, True)]:
        model = TokenModel()
        comm.counts.clear()
        # tiny buckets, so that overlap has several to start during the last backward
        reducer = DataParallel(comm, bucket_bytes=128, first_bucket_bytes=64) if overlap else DataParallel(comm)
        reducer.overlap = overlap
        acc = Accumulator(model, steps=K, fusion=fusion, accum_dtype="float64", compensated=compensated,
                          reducer=reducer)
        grads, early = [], []
        for share in rank_windows(batches, K, comm.world_size, comm.rank):
            for index in share.batches:
                rows = order[index * B:(index + 1) * B]
                loss, items = summed_loss(model, ids[rows], targets[rows])
                acc.backward(loss, num_items=items, closes_window=index == share.batches[-1])
            window_grads = acc.grads()
            early.append(reducer.last.started_during_backward)
            grads.append({name: np.array(window_grads[p]) for name, p in model.named_parameters()})
            acc.zero()
        results[f"{fusion}-{int(compensated)}{'-overlap' if overlap else ''}"] = {
            "grads": grads, "calls": dict(comm.counts.calls), "buckets": len(reducer.buckets(acc.store)),
            "started_during_backward": early}
    if comm.rank == 0:
        arrays = {f"{case}/{w}/{name}": g for case, r in results.items() for w, d in enumerate(r["grads"])
                  for name, g in d.items()}
        np.savez(out / "window.npz", **arrays)
        (out / "window.json").write_text(json.dumps({case: {k: v for k, v in r.items() if k != "grads"}
                                                     for case, r in results.items()}))


def classification_data(n: int = 101, seed: int = 0) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    return ArrayDataset(x, (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64))


def mlp(seed: int = 0, dropout: bool = False) -> nn.Module:
    mta.manual_seed(seed)
    middle = [nn.Tanh(), nn.Dropout(0.3)] if dropout else [nn.Tanh()]
    return nn.Sequential(nn.Linear(6, 16, dtype="float64"), *middle, nn.Linear(16, 3, dtype="float64"))


def fit(out: Path, k: int, epochs: int, *, compensated: bool, resume: bool = False, zero: bool = False,
        distributed: bool = True, fail_at_step: int | None = None, init_by_rank: bool = False,
        poisoned_item: int | None = None, dropout: bool = False) -> None:
    """A Learner run on the classification data; rank 0 saves the parameters to params.npz, and every
    rank its parameters, history and generator state to params-rank{r}.npz, history-rank{r}.json and
    rng-rank{r}.json. ``init_by_rank``: each rank starts from its own initial values (seed = rank);
    ``poisoned_item``: that item's features are NaN; ``dropout``: the model drops 30% of its hidden units
    (the Learner seeded, so that each rank draws its own masks)."""
    builder = (LearnerBuilder(out).num_epochs(epochs).grads_accumulation(k).progress("none")
               .accum_dtype("float64").compensated(compensated).fusion("leaf" if compensated else "gemm")
               .clip_grad_norm(1.0).with_file_checkpointer(every_steps=5))
    if distributed:
        builder = builder.distributed(zero=zero, check_every=1)
    if dropout:
        builder = builder.seed(11)
    rank = MPICommunicator().rank if distributed else 0
    module = mlp(rank if init_by_rank else 0, dropout)
    model = FailingClassifier(module, fail_at_step) if fail_at_step else module
    learner = builder.build(model, optim.AdamW(lr=0.01, weight_decay=0.1))
    data = classification_data()
    if poisoned_item is not None:
        data.arrays[0][poisoned_item] = np.nan
    trained, history = learner.fit(DataLoader(data, 4, seed=3),
                                   DataLoader(classification_data(40, seed=9), 16, shuffle=False), resume=resume)
    state_elements = sum(v.size for slots in learner.optimizer.state.values() for v in slots.values()
                         if isinstance(v, np.ndarray))
    np.savez(out / f"params-rank{learner.rank}.npz", **{name: p.numpy() for name, p in trained.named_parameters()})
    (out / f"history-rank{learner.rank}.json").write_text(json.dumps(history.steps))
    (out / f"rng-rank{learner.rank}.json").write_text(json.dumps(mta.get_rng_state()))
    if learner.rank == 0:
        np.savez(out / "params.npz", **{name: p.numpy() for name, p in trained.named_parameters()})
        (out / "history.json").write_text(json.dumps({"steps": history.steps, "valid": history.valid}))
        (out / "facts.json").write_text(json.dumps({
            "calls": learner.comm.counts.calls, "optimizer_state_elements": state_elements,
            "parameters": sum(p.size for p in trained.parameters()), "stepper": type(learner.stepper).__name__}))


def refused_starts(out: Path, traces: list[str]) -> None:
    """A fit for each trace path, each of which some rank cannot write: every rank writes what it raised
    to refused-{i}-rank{r}.json (its message, the steps taken, whether the run directory exists)."""
    for index, trace in enumerate(traces):
        learner = (LearnerBuilder(out / f"run{index}").progress("none").trace(trace).distributed()
                   .build(mlp(), optim.AdamW(lr=0.01)))
        learner.step_model.train_step = lambda batch: sys.exit("a micro-batch ran before the trace was checked")
        try:
            learner.fit(DataLoader(classification_data(), 4, seed=3))
        except RankStartError as error:
            (out / f"refused-{index}-rank{learner.rank}.json").write_text(json.dumps({
                "message": str(error), "step": learner.step, "run_directory": (out / f"run{index}").exists()}))
            error.wait_for_every_rank()


class FailingClassifier(Classifier):
    """Raises on rank 1 at its ``fail_at``-th micro-batch, while rank 0 goes on into the collective."""

    def __init__(self, module: nn.Module, fail_at: int) -> None:
        super().__init__(module)
        self.fail_at = fail_at
        self.calls = 0

    def train_step(self, batch: object) -> object:
        from mpi4py import MPI

        self.calls += 1
        if MPI.COMM_WORLD.Get_rank() == 1 and self.calls == self.fail_at:
            raise RuntimeError("rank 1 fails on purpose")
        return super().train_step(batch)


class SignalInLastValidation(Classifier):
    """Sends ``signum`` to its own process on rank ``target`` in its last validation batch: after the
    last optimizer step, while the other rank goes on to the end of the run."""

    def __init__(self, module: nn.Module, signum: int, target: int, last_call: int) -> None:
        super().__init__(module)
        self.signum, self.target, self.last_call, self.calls = signum, target, last_call, 0

    def valid_step(self, batch: object) -> object:
        import os

        from mpi4py import MPI

        self.calls += 1
        if MPI.COMM_WORLD.Get_rank() == self.target and self.calls == self.last_call:
            os.kill(os.getpid(), self.signum)
        return super().valid_step(batch)


def stop_after_training(out: Path, signum: int, target: int, epochs: int = 2) -> None:
    """A signal to one rank after the last step: every rank writes what fit raised to stop-rank{r}.json."""
    from minitorch_accum.train import TrainingInterrupted

    comm = MPICommunicator()
    valid = DataLoader(classification_data(40, seed=9), 16, shuffle=False)  # 3 batches: rank 0 takes 2, rank 1 one
    per_epoch = len(range(comm.rank, len(valid), comm.world_size))
    model = SignalInLastValidation(mlp(0), signum, target, epochs * per_epoch)
    learner = (LearnerBuilder(out).num_epochs(epochs).grads_accumulation(2).progress("none").accum_dtype("float64")
               .distributed().build(model, optim.AdamW(lr=0.01)))
    try:
        learner.fit(DataLoader(classification_data(), 4, seed=3), valid)
        stopped = None
    except TrainingInterrupted as stop:
        stopped = {"signum": stop.signum, "complete": stop.complete, "step": stop.step,
                   "checkpoint": None if stop.checkpoint is None else str(stop.checkpoint), "message": str(stop)}
        stop.wait_for_every_rank()
    (out / f"stop-rank{learner.rank}.json").write_text(json.dumps(stopped))


def main(argv: list[str]) -> None:
    scenario, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    options = dict(arg.split("=", 1) for arg in argv[2:])
    if scenario == "window":
        window(out)
    elif scenario == "fit":
        fit(out, int(options["k"]), int(options["epochs"]), compensated=options.get("compensated") == "1",
            resume=options.get("resume") == "1", zero=options.get("zero") == "1",
            distributed=options.get("distributed", "1") == "1",
            fail_at_step=int(options["fail_at"]) if "fail_at" in options else None,
            init_by_rank=options.get("init") == "rank", dropout=options.get("dropout") == "1",
            poisoned_item=int(options["poison"]) if "poison" in options else None)
    elif scenario == "stop_after_training":
        stop_after_training(out, int(options["signal"]), int(options["target"]))
    elif scenario == "refused_starts":
        refused_starts(out, options["traces"].split(","))
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
