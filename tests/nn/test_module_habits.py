"""Module habits from PyTorch: state_dict / load_state_dict, apply, to(dtype), zero_grad's message, and a
layer refusing an input of another dtype, naming itself and both dtypes."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.nn import functional as F


def mlp(dtype: str = "float32", seed: int = 0) -> nn.Sequential:
    mta.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8, dtype=dtype), nn.Tanh(), nn.LayerNorm(8, dtype=dtype),
                         nn.Linear(8, 3, dtype=dtype))


def test_state_dict_round_trips_into_a_fresh_model() -> None:
    trained, fresh = mlp(seed=0), mlp(seed=1)
    state = trained.state_dict()
    assert list(state) == [n for n, _ in trained.named_parameters()]
    assert all(isinstance(v, np.ndarray) for v in state.values())
    for name, value in trained.to_record().items():
        np.testing.assert_array_equal(state[name], value)
    result = fresh.load_state_dict(state)
    assert result == nn.IncompatibleKeys([], []) and result.missing_keys == []
    for (name, a), (_, b) in zip(trained.named_parameters(), fresh.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    state["0.weight"][...] = 0  # a copy: changing it changes nothing in the model
    assert np.abs(trained[0].weight.numpy()).sum() > 0


def test_load_state_dict_strict_and_not() -> None:
    model, other = mlp(), mlp(seed=5)
    partial = {"0.weight": other[0].weight.numpy(), "extra.weight": np.zeros(2)}
    with pytest.raises(nn.RecordError, match=r"missing: 0\.bias, 2\.bias, 2\.weight, 3\.bias, 3\.weight; "
                                             r"unexpected: extra\.weight"):
        model.load_state_dict(partial)
    before = model[3].weight.numpy()
    result = model.load_state_dict(partial, strict=False)
    assert result.missing_keys == ["0.bias", "2.bias", "2.weight", "3.bias", "3.weight"]
    assert result.unexpected_keys == ["extra.weight"]
    np.testing.assert_array_equal(model[0].weight.numpy(), other[0].weight.numpy())
    np.testing.assert_array_equal(model[3].weight.numpy(), before)
    with pytest.raises(nn.RecordError, match=r"0.weight: record has shape \(2, 2\), module has \(4, 8\)"):
        model.load_state_dict({"0.weight": np.zeros((2, 2))}, strict=False)


def test_optimizer_state_dict_round_trips() -> None:
    model = mlp("float64")
    opt = optim.AdamW(lr=0.01)
    x, y = np.random.default_rng(0).normal(size=(5, 4)), np.array([0, 1, 2, 0, 1])
    opt.step(model, F.cross_entropy(model(x), y).backward())
    restored = optim.AdamW(lr=0.5)
    restored.load_state_dict(opt.state_dict(), model=model)
    assert restored.step_count == 1 and restored.lr == 0.01
    np.testing.assert_array_equal(restored.state["0.weight"]["exp_avg"], opt.state["0.weight"]["exp_avg"])


def test_apply_visits_children_before_their_parent_once_each() -> None:
    shared = nn.Linear(2, 2)
    inner = nn.Sequential(shared, nn.ReLU())
    model = nn.Sequential(inner, shared, nn.Tanh())
    seen: list[str] = []
    assert model.apply(lambda m: seen.append(type(m).__name__)) is model
    # torch.nn.Module.apply's order (children first), with the shared Linear once where torch visits it twice
    assert seen == ["Linear", "ReLU", "Sequential", "Tanh", "Sequential"]


def test_apply_with_init_functions_initializes_every_linear() -> None:
    model = mlp()

    def init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.weight)
            nn.init.ones_(module.bias)

    model.apply(init)
    for layer in (model[0], model[3]):
        assert not layer.weight.numpy().any() and (layer.bias.numpy() == 1).all()


def test_module_to_takes_the_dtype_positionally() -> None:
    model = mlp()
    weight = model[0].weight
    assert model.to(mta.float64) is model and weight.dtype == mta.float64 and model[0].weight is weight
    model.to("float32")
    assert all(p.dtype == mta.float32 for p in model.parameters())
    with pytest.raises(TypeError, match="unsupported dtype int64"):
        model.to(mta.int64)


def test_zero_grad_says_where_the_gradients_are() -> None:
    with pytest.raises(TypeError, match=r"AdamW.zero_grad\(\): there is nothing to zero: gradients are values here"
                                        r".*loss.backward\(\) returns a new Gradients container.*acc.zero\(\)"):
        optim.AdamW(lr=1e-3).zero_grad()
    with pytest.raises(TypeError, match=r"Sequential.zero_grad\(\): there is nothing to zero"):
        mlp().zero_grad()


@pytest.mark.parametrize(("model_dtype", "data_dtype"), [("float64", "float32"), ("float32", "float64")])
def test_a_layer_refuses_data_of_another_dtype_naming_itself(model_dtype: str, data_dtype: str) -> None:
    model = mlp(model_dtype)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(data_dtype)
    message = (rf"Linear\(in_features=4, out_features=8, bias=True\): input of dtype {data_dtype} into parameters "
               rf"of dtype {model_dtype}; cast the input \(x.to\(mta.{model_dtype}\)\) or the model "
               rf"\(model.to\(mta.{data_dtype}\)\)")
    for data in (mta.tensor(x), x):  # a tensor, or the array itself
        with pytest.raises(TypeError, match=message):
            model(data)
    with pytest.raises(TypeError, match=rf"LayerNorm\(8, eps=1e-05\): input of dtype {data_dtype}"):
        model[2](mta.tensor(x[:, :2].repeat(4, axis=1)))
    assert model(mta.tensor(x).to(model_dtype)).dtype == np.dtype(model_dtype)


def test_integer_ids_and_matching_floats_pass() -> None:
    table = nn.Embedding(5, 3, dtype="float64")
    assert table(np.array([1, 4])).dtype == mta.float64
    assert table(mta.tensor(np.array([0, 2], dtype=np.int32))).shape == (2, 3)
    model = mlp("float64")
    assert model(np.zeros((2, 4))).dtype == mta.float64
