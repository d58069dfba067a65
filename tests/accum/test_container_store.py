"""Burn's path, ``fusion="none"``: containers summed per micro-batch, and what its trace says of them."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum import nn
from minitorch_accum.accum import Accumulator, ContainerStore, GradientsAccumulator
from tests.accum.helpers import PassRecorder, data, mlp, summed_loss


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.a = nn.Linear(5, 3, dtype="float64", rng=rng)
        self.b = nn.Linear(5, 3, dtype="float64", rng=rng)

    def forward(self, t):
        return self.b(t)


def test_a_parameter_without_a_gradient_does_not_stop_the_sum_of_the_others() -> None:
    model = TwoHeads()  # head a comes first and never gets a gradient
    x, y = data()
    summer = GradientsAccumulator()
    for rows in (slice(0, 4), slice(4, 9)):
        summer.accumulate(model, summed_loss(model, x[rows], y[rows], "float64").backward())
    total = summer.grads()
    direct = summed_loss(model, x[:9], y[:9], "float64").backward()
    assert model.a.weight not in total
    for p in (model.b.weight, model.b.bias):
        np.testing.assert_allclose(total[p], direct[p], rtol=1e-13)


def test_an_empty_container_store_is_finite_with_norm_zero() -> None:
    store = ContainerStore(list(mlp().named_parameters()))
    assert store.views() == [] and store.norm() == 0.0
    assert store.finite_check() is True
    assert store.poisoned is False


def test_the_norm_of_a_container_store_is_that_of_its_summed_gradients() -> None:
    model = mlp()
    x, y = data()
    store = ContainerStore(list(model.named_parameters()))
    for rows in (slice(0, 4), slice(4, 9)):
        store.micro_batch(summed_loss(model, x[rows], y[rows], "float64"), None, 1.0)
    direct = summed_loss(model, x[:9], y[:9], "float64").backward()
    expected = np.sqrt(sum(float(np.sum(np.asarray(direct[p]) ** 2)) for p in model.parameters()))
    assert store.norm() == pytest.approx(expected, rel=1e-12) and expected > 0


def test_state_keys_split_at_their_first_slash_and_unknown_roles_are_named() -> None:
    from minitorch_accum.accum.gradient_store import split_state_key

    assert split_state_key("grad/blocks/0.weight", ("grad",)) == ("grad", "blocks/0.weight")
    assert split_state_key("arena/float32", ("arena", "saved")) == ("arena", "float32")
    for key in ("bogus/0.weight", "grad", "grad/", "/0.weight"):
        with pytest.raises(ValueError, match=f"^accumulator state holds an unexpected array '{key}'$"):
            split_state_key(key, ("grad",))


def test_the_recorder_hears_each_add_of_a_container_as_one_pass_of_its_micro_batch() -> None:
    model = mlp()
    x, y = data()
    store = ContainerStore(list(model.named_parameters()))
    store.recorder = PassRecorder()
    for rows in (slice(0, 4), slice(4, 9)):
        store.micro_batch(summed_loss(model, x[rows], y[rows], "float64"), None, 1.0)
    names = sorted(n for n, _ in model.named_parameters())
    (first, first_is_window_pass), (second, second_is_window_pass) = store.recorder.passes
    assert sorted(first) == [(n, "container-store") for n in names]
    assert sorted(second) == [(n, "container-add") for n in names]
    assert not first_is_window_pass and not second_is_window_pass


def test_a_container_store_is_no_leaf_sink() -> None:
    model = mlp()
    x, y = data()
    store = ContainerStore(list(model.named_parameters()))
    with pytest.raises(TypeError, match=r"^ContainerStore: Burn's containers are summed whole, not written leaf by "
                                        r"leaf: no sink$"):
        store.micro_batch(summed_loss(model, x[:4], y[:4], "float64"), None, 1.0, sink=store)
    assert store.views() == []


def test_each_add_is_a_materialized_write_of_its_micro_batch_timed_inside_its_backward() -> None:
    model = mlp("float64", hidden=32)
    x, y = data()
    acc = Accumulator(model, steps=3, fusion="none", trace=True)
    for i in range(3):
        acc.backward(summed_loss(model, x[i * 5:(i + 1) * 5], y[i * 5:(i + 1) * 5], "float64"), num_items=5)
    trace = acc.trace
    backwards = [s for s in trace.spans if s.name == "backward"]
    assert len(backwards) == 3
    for i, span in enumerate(backwards):
        adds = [e for e in trace.events if e.micro_batch == i]
        assert len(adds) == 4 and all(e.materialized is True for e in adds)
        # one add timed as a whole, shared out by elements: the same time per element for each parameter
        per_element = [e.seconds / e.elements for e in adds]
        assert max(per_element) == pytest.approx(min(per_element), rel=1e-9)
        assert 0 <= sum(e.seconds for e in adds) <= span.seconds
    assert all(e.micro_batch >= 0 for e in trace.events)


def test_the_end_of_window_check_is_a_window_pass_timed_inside_the_trace() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=1, fusion="none", trace=True)
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    assert not acc.found_nonfinite()
    lifetime = acc.trace.clock()
    checks = [e for e in acc.trace.events if e.kernel == "finite_check"]
    assert len(checks) == 4 and all(e.micro_batch == -1 for e in checks)
    assert 0 <= sum(e.seconds for e in checks) <= lifetime


def test_a_saved_gradient_of_an_unknown_parameter_is_refused_by_name() -> None:
    acc = Accumulator(mlp(), steps=2, fusion="none")
    state = {"meta": {"steps": 2, "reduction": "items", "fusion": "none", "micro_step": 1, "items": 3,
                      "window_index": 0, "skipped_windows": [], "loss_scaler": None, "store": {}},
             "arrays": {"grad/9.weight": np.zeros((8, 3))}}
    with pytest.raises(ValueError, match=r"^accumulator state names unknown parameter '9\.weight'$"):
        acc.load_state_dict(state)
