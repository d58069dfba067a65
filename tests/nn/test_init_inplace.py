"""PyTorch's in-place initializers: seeded by mta.manual_seed, in place, the right bounds and spreads
for this library's (in, out) Linear weight, and clear refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn


def weight(fan_in: int = 300, fan_out: int = 200, dtype: str = "float64") -> nn.Param:
    return nn.Linear(fan_in, fan_out, dtype=dtype).weight  # stored (in, out)


def test_a_seed_gives_the_same_values_and_the_array_is_written_in_place() -> None:
    w = weight()
    array = w.data
    mta.manual_seed(7)
    first = nn.init.xavier_uniform_(w).numpy()
    assert w.data is array  # in place: whatever holds the Param sees the values
    mta.manual_seed(7)
    assert (nn.init.xavier_uniform_(w).numpy() == first).all()
    again = nn.init.xavier_uniform_(w, generator=np.random.default_rng(7)).numpy()
    np.testing.assert_array_equal(again, first)  # manual_seed(7) is default_rng(7)
    assert nn.init.normal_(w) is w


@pytest.mark.parametrize(("init", "bound"), [
    (lambda w: nn.init.xavier_uniform_(w), math.sqrt(6 / 500)),
    (lambda w: nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain("tanh")), 5 / 3 * math.sqrt(6 / 500)),
    (lambda w: nn.init.kaiming_uniform_(w, a=math.sqrt(5)), 1 / math.sqrt(300)),  # torch.nn.Linear's default
    (lambda w: nn.init.kaiming_uniform_(w, nonlinearity="relu"), math.sqrt(2) * math.sqrt(3 / 300)),
    (lambda w: nn.init.kaiming_uniform_(w, mode="fan_out", nonlinearity="relu"), math.sqrt(2) * math.sqrt(3 / 200)),
    (lambda w: nn.init.uniform_(w, -0.25, 0.25), 0.25),
])
def test_uniform_initializers_fill_their_interval(init, bound: float) -> None:
    values = init(weight()).numpy()
    assert np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.99 * bound  # 60000 draws reach the edge
    assert abs(values.mean()) < 0.01 * bound * 3


@pytest.mark.parametrize(("init", "std"), [
    (lambda w: nn.init.xavier_normal_(w), math.sqrt(2 / 500)),
    (lambda w: nn.init.kaiming_normal_(w, nonlinearity="relu"), math.sqrt(2 / 300)),
    (lambda w: nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"), math.sqrt(2 / 200)),
    (lambda w: nn.init.normal_(w, 0.0, 0.02), 0.02),
])
def test_normal_initializers_have_their_spread(init, std: float) -> None:
    values = init(weight()).numpy()
    # 60000 draws: the sample deviation is within 1% of the true one with overwhelming probability
    np.testing.assert_allclose(values.std(), std, rtol=0.02)


def test_an_embedding_table_and_a_plain_param_are_read_as_pytorch_reads_a_weight() -> None:
    table = nn.Embedding(400, 100).weight  # (num, dim): PyTorch's fan_in is dim, fan_out num
    values = nn.init.kaiming_uniform_(table, nonlinearity="relu").numpy()
    assert np.abs(values).max() <= math.sqrt(6 / 100) and np.abs(values).max() > 0.99 * math.sqrt(6 / 100)
    plain = nn.Param(mta.zeros(50, 400, dtype="float64"))  # (out, in) as a PyTorch user makes it
    assert np.abs(nn.init.kaiming_uniform_(plain, nonlinearity="relu").numpy()).max() <= math.sqrt(6 / 400)


def test_trunc_normal_stays_inside_its_bounds() -> None:
    values = nn.init.trunc_normal_(weight(), mean=0.5, std=1.0, a=0.0, b=1.0).numpy()
    assert values.min() >= 0.0 and values.max() <= 1.0
    assert 0.45 < values.mean() < 0.55  # symmetric around the mean inside [0, 1]
    narrow = nn.init.trunc_normal_(weight(), std=0.02).numpy()
    np.testing.assert_allclose(narrow.std(), 0.02, rtol=0.02)  # +-2 absolute: the cut never bites


def test_constants_and_the_dtype_of_the_param_are_kept() -> None:
    w = weight(dtype="float32")
    assert nn.init.constant_(w, 0.5).dtype == mta.float32 and (w.numpy() == 0.5).all()
    bias = nn.Linear(3, 4).bias
    assert nn.init.zeros_(bias).tolist() == [0.0] * 4 and nn.init.ones_(bias).tolist() == [1.0] * 4


def test_gains_and_refusals() -> None:
    assert nn.init.calculate_gain("relu") == math.sqrt(2) and nn.init.calculate_gain("linear") == 1.0
    assert nn.init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01**2))
    with pytest.raises(ValueError, match="calculate_gain: unknown nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match=r"xavier_uniform_: fan in and fan out need a tensor of at least 2 axes"):
        nn.init.xavier_uniform_(nn.Linear(2, 3).bias)
    with pytest.raises(ValueError, match="mode must be 'fan_in' or 'fan_out'"):
        nn.init.kaiming_normal_(weight(), mode="fan_avg")
    with pytest.raises(TypeError, match=r"nn.init.zeros_: expects a tensor \(a Param such as layer.weight\)"):
        nn.init.zeros_(np.zeros(3))
    with pytest.raises(TypeError, match="expects a float tensor, got int64"):
        nn.init.ones_(mta.arange(3))
