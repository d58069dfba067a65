"""Module discovery, naming, modes, dtype/device moves and records."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn


class Block(nn.Module):
    def __init__(self) -> None:
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.drop(self.proj(self.norm(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        self.embed = nn.Embedding(10, 4)
        self.blocks = [Block(), Block()]
        self.scale = nn.Param(np.ones(1, dtype=np.float32))
        self.head = nn.Linear(4, 3, bias=False)

    def forward(self, ids: np.ndarray) -> mta.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h * self.scale)


def test_parameters_in_definition_order_with_dotted_names() -> None:
    names = [name for name, _ in Net().named_parameters()]
    assert names == [
        "embed.weight",
        "blocks.0.norm.weight", "blocks.0.norm.bias", "blocks.0.proj.weight", "blocks.0.proj.bias",
        "blocks.1.norm.weight", "blocks.1.norm.bias", "blocks.1.proj.weight", "blocks.1.proj.bias",
        "scale", "head.weight",
    ]
    assert Net().num_params() == 40 + 2 * (4 + 4 + 16 + 4) + 1 + 12


def test_shared_parameter_appears_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            self.a = nn.Linear(2, 2)
            self.b = self.a

    assert [n for n, _ in Tied().named_parameters()] == ["a.weight", "a.bias"]


def test_sequential_names_and_indexing() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert isinstance(model[1], nn.ReLU) and len(model) == 3
    with pytest.raises(TypeError, match="item 1 is a int"):
        nn.Sequential(nn.ReLU(), 3)


def test_linear_stores_weight_in_out_and_computes_x_w_plus_b() -> None:
    layer = nn.Linear(3, 2)
    assert layer.weight.shape == (3, 2) and layer.bias.shape == (2,)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(layer(mta.tensor(x)).numpy(), x @ layer.weight.value + layer.bias.value, rtol=1e-6)
    bound = 1 / np.sqrt(3)
    assert np.all(np.abs(layer.weight.value) <= bound)


def test_seeded_init_is_reproducible() -> None:
    mta.manual_seed(123)
    a = nn.Linear(5, 5).weight.numpy()
    mta.manual_seed(123)
    b = nn.Linear(5, 5).weight.numpy()
    np.testing.assert_array_equal(a, b)
    c = nn.Linear(5, 5, rng=np.random.default_rng(1)).weight.numpy()
    d = nn.Linear(5, 5, rng=np.random.default_rng(1)).weight.numpy()
    np.testing.assert_array_equal(c, d)


def test_train_eval_switch_every_submodule_and_dropout() -> None:
    net = Net()
    net.eval()
    assert all(not m.training for m in net.modules())
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(net(ids).numpy(), net(ids).numpy())  # dropout off
    net.train()
    assert all(m.training for m in net.modules())


def test_to_dtype_keeps_param_identity() -> None:
    net = Net()
    params = net.parameters()
    net.to(dtype="float64")
    assert all(p.dtype == np.float64 for p in net.parameters())
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    bn = nn.BatchNorm1d(3).to(dtype="float64")
    assert bn.running_mean.value.dtype == np.float64


def test_param_value_can_be_assigned_and_is_checked() -> None:
    layer = nn.Linear(2, 2)
    layer.weight.value = np.eye(2, dtype=np.float32)
    np.testing.assert_array_equal(layer.weight.numpy(), np.eye(2))
    with pytest.raises(ValueError, match=r"shape \(3, 3\), the parameter has \(2, 2\)"):
        layer.weight.value = np.eye(3, dtype=np.float32)
    with pytest.raises(TypeError, match="dtype float64, the parameter has float32"):
        layer.weight.value = np.eye(2)


def test_record_round_trip_and_errors() -> None:
    mta.manual_seed(0)
    source = Net()
    mta.manual_seed(1)
    target = Net()
    record = source.to_record()
    assert all(isinstance(v, np.ndarray) for v in record.values())
    target.load_record(record)
    for (_, a), (_, b) in zip(source.named_parameters(), target.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    before = target.to_record()
    bad = dict(record)
    bad["head.weight"] = np.zeros((5, 5))
    del bad["scale"]
    bad["extra"] = np.zeros(1)
    with pytest.raises(nn.RecordError) as info:
        target.load_record(bad)
    message = str(info.value)
    assert "missing: scale" in message and "unexpected: extra" in message
    assert "head.weight: record has shape (5, 5), module has (4, 3)" in message
    for name, value in target.to_record().items():  # nothing was changed
        np.testing.assert_array_equal(value, before[name])


def test_batchnorm_updates_running_statistics_in_training_only() -> None:
    bn = nn.BatchNorm1d(2, momentum=0.5)
    x = mta.tensor([[1.0, 10.0], [3.0, 30.0]])
    bn(x)
    np.testing.assert_allclose(bn.running_mean.value, [1.0, 10.0])
    np.testing.assert_allclose(bn.running_var.value, [0.5 + 0.5 * 2.0, 0.5 + 0.5 * 200.0])
    bn.eval()
    frozen = bn.running_mean.value.copy()
    bn(x)
    np.testing.assert_array_equal(bn.running_mean.value, frozen)
