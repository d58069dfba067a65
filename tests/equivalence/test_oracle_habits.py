"""The PyTorch habits checked against PyTorch itself: mta.tensor's dtypes, repeat / t / topk / std / clone
(values and gradients), clip_grad_norm_, the initializers' bounds and gains, Module.apply's order, and
LambdaLR / OneCycleLR / SequentialLR step by step. Skipped when torch is not installed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F
from minitorch_accum.optim.lr_scheduler import CosineAnnealingLR, LambdaLR, OneCycleLR, SequentialLR, StepLR
from minitorch_accum.testing.strategies import arrays, shapes
from tests.optim.schedule_rates import rates, torch_rates

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

TORCH_DTYPES = {torch.float64: mta.float64, torch.float32: mta.float32, torch.float16: mta.float16,
                torch.int32: mta.int32, torch.int64: mta.int64, torch.bool: mta.bool, torch.uint8: mta.uint8}


@pytest.mark.parametrize("data", [
    np.zeros(3, dtype=np.float64), np.zeros(2, dtype=np.float32), np.zeros(2, dtype=np.float16),
    np.arange(3, dtype=np.int32), np.arange(3), np.array([True]), np.zeros(2, dtype=np.uint8),
    [1.0, 2.0], 0.5, [[0.5], [1.5]], np.float64(2.0), np.float32(2.0),
], ids=lambda d: type(d).__name__ + ("" if not hasattr(d, "dtype") else f"-{d.dtype}"))
def test_tensor_takes_the_dtype_torch_tensor_takes(data) -> None:
    assert mta.tensor(data).dtype == TORCH_DTYPES[torch.tensor(data).dtype]


def leaves(values: np.ndarray):
    ours = mta.tensor(values, requires_grad=True)
    theirs = torch.tensor(values, requires_grad=True)
    return ours, theirs


def compare(ours: mta.Tensor, theirs, leaf_ours: mta.Tensor, leaf_theirs, rtol: float = 1e-12) -> None:
    """The values, and the gradients of the outputs weighted by 1, 2, 3, ..."""
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=rtol, atol=0)
    weights = np.arange(1.0, 1.0 + ours.size).reshape(ours.shape)
    grads = (ours * weights).sum().backward()
    (theirs * torch.from_numpy(weights)).sum().backward()
    np.testing.assert_allclose(np.asarray(grads[leaf_ours]), leaf_theirs.grad.numpy(), rtol=rtol, atol=1e-15)


@given(data=st.data())
def test_repeat_t_and_clone_match_torch(data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=3, max_side=3))
    repeats = tuple(data.draw(st.lists(st.integers(0, 3), min_size=max(len(shape), 1), max_size=len(shape) + 2)))
    values = data.draw(arrays(shape))
    ours, theirs = leaves(values)
    compare(ours.repeat(*repeats), theirs.repeat(*repeats), ours, theirs)
    ours, theirs = leaves(values)
    compare(ours.clone(), theirs.clone(), ours, theirs)
    if len(shape) <= 2:
        ours, theirs = leaves(values)
        compare(ours.t(), theirs.t(), ours, theirs)


@given(data=st.data(), largest=st.booleans(), ordered=st.booleans())
def test_topk_matches_torch(data: st.DataObject, largest: bool, ordered: bool) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3))
    count = int(np.prod(shape))
    values = np.array(data.draw(st.permutations(range(count))), dtype=np.float64).reshape(shape) / 7.0
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[dim]))
    ours, theirs = leaves(values)
    top, reference = ours.topk(k, dim, largest, ordered), theirs.topk(k, dim, largest, ordered)
    if ordered:  # torch leaves the order of sorted=False open: compare the sets then
        np.testing.assert_array_equal(top.indices.numpy(), reference.indices.numpy())
        compare(top.values, reference.values, ours, theirs)
    else:
        np.testing.assert_array_equal(np.sort(top.indices.numpy(), axis=dim),
                                      np.sort(reference.indices.numpy(), axis=dim))


@given(data=st.data(), keep=st.booleans(), unbiased=st.booleans())
def test_std_matches_torch(data: st.DataObject, keep: bool, unbiased: bool) -> None:
    shape = data.draw(shapes(min_dims=1, min_side=2))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    values = data.draw(arrays(shape).filter(lambda a: np.all(a.std(axis=dim) > 1e-3)))
    ours, theirs = leaves(values)
    compare(ours.std(dim, unbiased, keep), theirs.std(dim, unbiased=unbiased, keepdim=keep), ours, theirs,
            rtol=1e-11)
    assert mta.tensor(values).std().item() == pytest.approx(torch.tensor(values).std().item(), rel=1e-12)


def test_clip_grad_norm_matches_torch() -> None:
    rng = np.random.default_rng(0)
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6, dtype="float64"), nn.Tanh(), nn.Linear(6, 2, dtype="float64"))
    reference = torch.nn.Sequential(torch.nn.Linear(4, 6, dtype=torch.float64), torch.nn.Tanh(),
                                    torch.nn.Linear(6, 2, dtype=torch.float64))
    with torch.no_grad():
        for ours, theirs in zip((model[0], model[2]), (reference[0], reference[2]), strict=True):
            theirs.weight.copy_(torch.from_numpy(ours.weight.numpy().T.copy()))
            theirs.bias.copy_(torch.from_numpy(ours.bias.numpy()))
    x, y = rng.normal(size=(9, 4)) * 3, rng.integers(0, 2, size=9)
    grads = F.cross_entropy(model(x), y).backward()
    torch.nn.functional.cross_entropy(reference(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    norm = nn.utils.clip_grad_norm_(grads, 0.1)
    torch_norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.1)
    assert norm.item() == pytest.approx(torch_norm.item(), rel=1e-12)
    np.testing.assert_allclose(grads[model[0].weight], reference[0].weight.grad.numpy().T, rtol=1e-12)
    np.testing.assert_allclose(grads[model[2].bias], reference[2].bias.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize(("ours", "theirs"), [
    (lambda w: nn.init.xavier_uniform_(w), lambda w: torch.nn.init.xavier_uniform_(w)),
    (lambda w: nn.init.xavier_normal_(w, gain=2.0), lambda w: torch.nn.init.xavier_normal_(w, gain=2.0)),
    (lambda w: nn.init.kaiming_uniform_(w, a=math.sqrt(5)),
     lambda w: torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))),
    (lambda w: nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"),
     lambda w: torch.nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu")),
    (lambda w: nn.init.kaiming_normal_(w, nonlinearity="tanh"),
     lambda w: torch.nn.init.kaiming_normal_(w, nonlinearity="tanh")),
    (lambda w: nn.init.trunc_normal_(w, std=0.5, a=-0.4, b=0.8),
     lambda w: torch.nn.init.trunc_normal_(w, std=0.5, a=-0.4, b=0.8)),
])
def test_initializers_give_a_linear_weight_torchs_distribution(ours, theirs) -> None:
    # our Linear(300, 100) stores (in, out), torch's (out, in): the same fans must give the same spread
    mta.manual_seed(0)  # seeded both: the comparison of two samples is then the same every run
    torch.manual_seed(0)
    ours_values = ours(nn.Linear(300, 100, dtype="float64").weight).numpy()
    theirs_values = theirs(torch.nn.Linear(300, 100, dtype=torch.float64).weight.detach()).numpy()
    for statistic in (np.std, lambda a: np.quantile(a, 0.01), lambda a: np.quantile(a, 0.99)):
        # 30000 draws each: the spread and the 1% and 99% quantiles agree within 3% (their standard errors
        # are about 1%); a fan read the wrong way is off by sqrt(3)
        np.testing.assert_allclose(statistic(ours_values), statistic(theirs_values), rtol=0.03)


@pytest.mark.parametrize("nonlinearity", ["linear", "sigmoid", "tanh", "relu", "leaky_relu", "selu"])
def test_gains_are_torchs(nonlinearity: str) -> None:
    assert nn.init.calculate_gain(nonlinearity) == torch.nn.init.calculate_gain(nonlinearity)
    if nonlinearity == "leaky_relu":
        assert nn.init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu", 0.2)


def test_apply_visits_modules_in_torchs_order() -> None:
    ours = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Tanh(), nn.Sequential(nn.GELU()))
    theirs = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), torch.nn.Tanh(),
                                 torch.nn.Sequential(torch.nn.GELU()))
    seen_ours: list[str] = []
    seen_theirs: list[str] = []
    ours.apply(lambda m: seen_ours.append(type(m).__name__))
    theirs.apply(lambda m: seen_theirs.append(type(m).__name__))
    assert seen_ours == seen_theirs


def test_a_linear_with_another_dtype_is_refused_by_both() -> None:
    x = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(RuntimeError, match="dtype"):
        torch.nn.Linear(3, 2, dtype=torch.float64)(torch.from_numpy(x))
    with pytest.raises(TypeError, match="input of dtype float32 into parameters of dtype float64"):
        nn.Linear(3, 2, dtype="float64")(mta.tensor(x))


def test_lambda_lr_matches_torch() -> None:
    def fn(step: int) -> float:
        return 0.95**step if step % 3 else 1.0 / (step + 1)

    assert rates(LambdaLR(0.2, fn), 12) == torch_rates(lambda o: torch.optim.lr_scheduler.LambdaLR(o, fn), 0.2, 12)


@given(total=st.integers(1, 40), pct=st.floats(0.05, 0.95), strategy=st.sampled_from(["cos", "linear"]),
       three_phase=st.booleans(), div=st.floats(1.5, 50.0), final=st.floats(1.0, 1e4))
def test_one_cycle_matches_torch(total: int, pct: float, strategy: str, three_phase: bool, div: float,
                                 final: float) -> None:
    ours = OneCycleLR(0.3, total, pct_start=pct, anneal_strategy=strategy, three_phase=three_phase, div_factor=div,
                      final_div_factor=final)

    def theirs(optimizer):
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.3, total_steps=total, pct_start=pct,
                                                   anneal_strategy=strategy, three_phase=three_phase,
                                                   div_factor=div, final_div_factor=final, cycle_momentum=False)

    try:
        expected = torch_rates(theirs, 0.3, total)
    except ZeroDivisionError:  # a phase of zero length: torch divides by zero too
        with pytest.raises(ZeroDivisionError):
            rates(ours, total)
        return
    assert rates(ours, total) == expected


@pytest.mark.parametrize("case", ["warmup-then-step", "warmup-then-cosine", "three"])
def test_sequential_lr_matches_torch(case: str) -> None:
    base, n = 0.4, 25  # ours stays at min_lr after its total_steps, where torch's cosine rises again

    def warm(step: int) -> float:
        return (step + 1) / 5

    if case == "warmup-then-step":
        ours = SequentialLR([LambdaLR(base, warm), StepLR(base, 4, 0.7)], [5])

        def theirs(o):
            return torch.optim.lr_scheduler.SequentialLR(
                o, [torch.optim.lr_scheduler.LambdaLR(o, warm), torch.optim.lr_scheduler.StepLR(o, 4, 0.7)], [5])
    elif case == "warmup-then-cosine":
        ours = SequentialLR([LambdaLR(base, warm), CosineAnnealingLR(base, 20, min_lr=0.01)], [5])

        def theirs(o):
            return torch.optim.lr_scheduler.SequentialLR(
                o, [torch.optim.lr_scheduler.LambdaLR(o, warm),
                    torch.optim.lr_scheduler.CosineAnnealingLR(o, 20, eta_min=0.01)], [5])
    else:
        ours = SequentialLR([LambdaLR(base, warm), StepLR(base, 3, 0.5), LambdaLR(base, lambda s: 0.9**s)], [4, 11])

        def theirs(o):
            return torch.optim.lr_scheduler.SequentialLR(
                o, [torch.optim.lr_scheduler.LambdaLR(o, warm), torch.optim.lr_scheduler.StepLR(o, 3, 0.5),
                    torch.optim.lr_scheduler.LambdaLR(o, lambda s: 0.9**s)], [4, 11])

    # StepLR and CosineAnnealingLR in torch step recursively from the previous rate: equal to rounding
    np.testing.assert_allclose(rates(ours, n), torch_rates(theirs, base, n), rtol=1e-12, atol=0)
