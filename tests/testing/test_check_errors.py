"""Every mistake a tester makes calling the check is named: the argument, what was wrong, the fix."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.testing import check_accumulation, check_properties
from minitorch_accum.testing.check_context import check_splits
from minitorch_accum.testing.subject import Subject
from tests.testing.models import Residual, batch, summed_loss


class Unseeded(nn.Module):
    """A newcomer's model: no seed anywhere."""

    def __init__(self) -> None:
        self.a, self.b = nn.Linear(5, 6), nn.Linear(6, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.b(self.a(x).tanh())


def test_an_unseeded_class_is_checked_and_the_callers_random_stream_is_left_alone() -> None:
    mta.manual_seed(123)
    expected = mta.manual_seed(123).random(3)
    mta.manual_seed(123)
    report = check_accumulation(Unseeded, summed_loss, batch(), splits=[(5, 7)])
    assert report.passed
    np.testing.assert_array_equal(mta.backend.default_generator().random(3), expected)


def test_an_instance_for_a_factory_is_named() -> None:
    with pytest.raises(TypeError, match=r"model_factory: got a Residual instance, not a function that builds one.*"
                                        r"Residual or lambda: Residual\(\.\.\.\)"):
        check_accumulation(Residual(), summed_loss, batch())


def test_a_factory_returning_one_instance_or_shared_layers_is_refused() -> None:
    model = Residual()
    with pytest.raises(ValueError, match=r"returned the same Residual object twice.*not lambda: model"):
        check_properties(lambda: model, summed_loss, batch())
    shared = nn.Linear(5, 3)
    with pytest.raises(ValueError, match=r"share parameter objects \(0.weight, 0.bias\)"):
        check_accumulation(lambda: nn.Sequential(shared), summed_loss, batch())


def test_a_factory_building_another_architecture_or_drawing_elsewhere_is_named() -> None:
    widths = iter(range(3, 100))
    with pytest.raises(ValueError, match=r"two different architectures: '0.weight' is \(5, \d+\) in one and "
                                         r"\(5, \d+\) in the other"):
        check_accumulation(lambda: nn.Sequential(nn.Linear(5, next(widths)), nn.Linear(next(widths), 3)),
                           summed_loss, batch())
    numpy_global = np.random.default_rng()

    def elsewhere() -> nn.Module:
        model = nn.Sequential(nn.Linear(5, 3))
        model[0].weight.data[...] = numpy_global.normal(size=(5, 3))
        return model

    with pytest.raises(ValueError, match=r"parameters differ \(0.weight\) although the check seeds .*seed=0.*"
                                         "another source"):
        check_accumulation(elsewhere, summed_loss, batch())


@pytest.mark.parametrize(("splits", "error", "message"), [
    (24, TypeError, r"splits: give micro-batch sizes summing to the batch's 12 rows, e.g. \(6, 6\).*got int 24"),
    ((6.0, 6.0), TypeError, r"micro-batch sizes must be ints, got 6.0 \(a float\) in \(6.0, 6.0\)"),
    ([(6, 6), (6.5, 5.5)], TypeError, r"got 6.5 \(a float\)"),
    ((13, -1), ValueError, r"must be positive, got -1"),
    ((5, 5), ValueError, r"\(5, 5\) covers 10 rows, the batch holds 12"),
    ((), ValueError, "give at least one split"),
    ("6,6", TypeError, "got str '6,6'"),
    ([()], ValueError, "an empty split"),
])
def test_splits_of_the_wrong_type_or_size_are_named(splits: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        check_splits(splits, 12)


def test_numpy_splits_are_taken() -> None:
    assert check_splits(np.array([6, 6]), 12) == ((6, 6),)
    assert check_splits(np.array([[6, 6], [3, 9]]), 12) == ((6, 6), (3, 9))
    assert check_splits([np.int64(4), np.int64(8)], 12) == ((4, 8),)
    assert check_accumulation(Residual, summed_loss, batch(), splits=np.array([5, 7])).splits == ((5, 7),)


def test_batches_that_cannot_be_split_are_named() -> None:
    x, y = batch()
    with pytest.raises(TypeError, match=r"batch: a dict \('input_ids', 'labels'\) is not a pair.*batch\['labels'\]"):
        check_accumulation(Residual, summed_loss, {"input_ids": x, "labels": y})
    with pytest.raises(ValueError, match=r"batch: it holds 0 rows \(shapes \[\(0, 5\), \(0,\)\]\)"):
        check_accumulation(Residual, summed_loss, (x[:0], y[:0]))
    with pytest.raises(ValueError, match=r"batch: it holds 1 row .*at least 2 rows"):
        check_accumulation(Residual, summed_loss, (x[:1], y[:1]))
    with pytest.raises(TypeError, match=r"batch must be a pair .* got tuple of 3"):
        check_accumulation(Residual, summed_loss, (x, y, y))
    with pytest.raises(TypeError, match="batch: targets is int 3"):
        Subject(Residual, summed_loss, (x, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.dtype("float32"), mta.float32, "float32"])
def test_dtype_objects_are_read_and_a_non_float_is_named(dtype: object) -> None:
    assert check_accumulation(Residual, summed_loss, batch(), splits=[(5, 7)], dtype=dtype).dtype == "float32"
    with pytest.raises(TypeError, match=r"dtype: <class 'numpy.int32'> is not a float dtype; give one of float64"):
        check_accumulation(Residual, summed_loss, batch(), dtype=np.int32)


def test_a_float32_model_is_checked_in_float32_or_the_report_says_why_not() -> None:
    report = check_accumulation(Residual, summed_loss, batch(), splits=[(5, 7)])
    assert report.dtype == "float32" and not report.notes
    asked = check_accumulation(Residual, summed_loss, batch(), splits=[(5, 7)], dtype="float64")
    assert asked.dtype == "float64"
    assert any("the model's parameters are float32; checked in float64 as dtype= asks" in n for n in asked.notes)

    def mixed() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 4, dtype="float64"), nn.Linear(4, 3, dtype="float32"))

    with pytest.raises(TypeError, match="several float dtypes; pass the one to check"):
        check_accumulation(mixed, summed_loss, batch())


def test_an_unknown_property_is_refused_before_anything_runs() -> None:
    with pytest.raises(KeyError, match="no equivalence property 'window'"):
        check_properties(Residual, summed_loss, batch(), properties=["window"])


def test_splits_that_mix_kinds_are_named() -> None:
    assert check_splits([np.array([6, 6]), np.array([3, 9])], 12) == ((6, 6), (3, 9))
    with pytest.raises(TypeError, match="each split is a tuple of micro-batch sizes, got 12"):
        check_splits([(6, 6), 12], 12)
    with pytest.raises(TypeError, match=r"micro-batch sizes must be ints, got '6' \(str\)"):
        check_splits(("6", "6"), 12)


def test_a_list_batch_a_float64_model_and_an_explicit_dtype_are_taken_as_they_are() -> None:
    x, y = batch()
    assert check_accumulation(Residual, summed_loss, [x, y], splits=[(5, 7)]).passed

    def wide() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 3, dtype="float64"))

    assert check_accumulation(wide, summed_loss, (x, y), splits=[(5, 7)]).dtype == "float64"
    same = check_accumulation(Residual, summed_loss, (x, y), splits=[(5, 7)], dtype="float32")
    assert same.dtype == "float32" and not same.notes


def test_the_fusion_asked_for_is_the_one_accumulated_with(monkeypatch: pytest.MonkeyPatch) -> None:
    from minitorch_accum.testing import recipes

    seen = []

    class Recording(recipes.Accumulator):
        def __init__(self, *args: object, **kwargs: object) -> None:
            seen.append(kwargs["fusion"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(recipes, "Accumulator", Recording)
    check_accumulation(Residual, summed_loss, batch(), splits=[(5, 7)], fusion="none")
    assert seen and set(seen) == {"none"}


def _raises_exactly(error: type, message: str, call: object, *args: object, **kwargs: object) -> None:
    """The whole message, as the tester reads it (a partial match lets a word or a name go missing)."""
    with pytest.raises(error) as caught:
        call(*args, **kwargs)
    assert str(caught.value) == message


def test_each_subject_argument_error_reads_in_full() -> None:
    x, y = batch()
    _raises_exactly(TypeError, "model_factory must be a function returning a Module, got int", Subject, 3,
                    summed_loss, (x, y))
    _raises_exactly(TypeError, "loss_fn must be a function (output, targets) -> (summed loss, items), got str",
                    Subject, Residual, "sum", (x, y))
    _raises_exactly(TypeError, "batch: a dict ('input_ids', 'labels') is not a pair (inputs, targets); pass the "
                    "arrays, e.g. (batch['input_ids'], batch['labels'])", Subject, Residual, summed_loss,
                    {"input_ids": x, "labels": y})
    _raises_exactly(TypeError, "batch must be a pair (inputs, targets) with rows along axis 0, got ndarray",
                    Subject, Residual, summed_loss, x)
    _raises_exactly(TypeError, "batch must be a pair (inputs, targets) with rows along axis 0, got list of 3",
                    Subject, Residual, summed_loss, [x, y, y])
    for seed in ("0", True, 1.0):
        _raises_exactly(TypeError, f"seed must be an int, got {seed!r}", Subject, Residual, summed_loss, (x, y),
                        seed=seed)
    _raises_exactly(TypeError, "batch: an input is int 3, not an array with rows along axis 0", Subject, Residual,
                    summed_loss, (3, y))
    _raises_exactly(ValueError, "batch: inputs and targets hold different numbers of rows [11, 12]", Subject,
                    Residual, summed_loss, (x, y[:11]))
    _raises_exactly(ValueError, "batch: it holds 1 row (shapes [(1, 5), (1,)]); a window needs at least 2 rows to "
                    "be split into micro-batches that differ from the big batch", Subject, Residual, summed_loss,
                    (x[:1], y[:1]))
    two = Subject(Residual, summed_loss, (x[:2], y[:2]), dtype=np.float32, seed=np.int64(3))
    assert (two.rows, two.dtype, two.seed) == (2, "float32", 3)  # two rows split (1, 1); the dtype read by name


def test_each_factory_error_reads_in_full() -> None:
    subject = Subject(Residual, summed_loss, batch())
    model = Residual()
    _raises_exactly(ValueError, "model_factory returned the same Residual object twice: every property compares "
                    "freshly built models, and a model compared with itself always agrees; build a new one on each "
                    "call (MyModel, or lambda: MyModel(), not lambda: model)",
                    Subject(lambda: model, summed_loss, batch()).build_identical)
    shared = [nn.Linear(5, 5) for _ in range(3)]
    _raises_exactly(ValueError, "model_factory's models share parameter objects (0.weight, 0.bias, 1.weight, "
                    "1.bias): a step on one moves the other; build new layers on each call",
                    Subject(lambda: nn.Sequential(*shared), summed_loss, batch()).build_identical)
    widths = iter(range(3, 100))
    growing = Subject(lambda: nn.Sequential(nn.Linear(5, w := next(widths)), nn.Linear(w, w), nn.Linear(w, 3)),
                      summed_loss, batch())
    _raises_exactly(ValueError, "model_factory built two different architectures: '0.weight' is (5, 3) in one and "
                    "(5, 4) in the other; '0.bias' is (3,) in one and (4,) in the other; '1.weight' is (3, 3) in one "
                    "and (4, 4) in the other; '1.bias' is (3,) in one and (4,) in the other; it must build the same "
                    "model on every call (a factory whose width or layers depend on a random draw or a counter "
                    "cannot be checked)", growing.build_identical)
    widths = iter(range(3, 100))
    _raises_exactly(ValueError, "model_factory built two different architectures: '0.weight' is (5, 3) in one and "
                    "(5, 4) in the other; '0.bias' is (3,) in one and (4,) in the other; it must build the same model "
                    "on every call (a factory whose width or layers depend on a random draw or a counter cannot be "
                    "checked)",
                    Subject(lambda: nn.Sequential(nn.Linear(5, next(widths))), summed_loss, batch()).build_identical)
    layers = iter((3, 2))
    shrinking = Subject(lambda: nn.Sequential(*(nn.Linear(5, 5) for _ in range(next(layers)))), summed_loss, batch())
    _raises_exactly(ValueError, "model_factory built two different architectures: only one has 2.bias, 2.weight; it "
                    "must build the same model on every call (a factory whose width or layers depend on a random "
                    "draw or a counter cannot be checked)", shrinking.build_identical)
    numpy_global = np.random.default_rng()

    def elsewhere() -> nn.Module:
        built = nn.Sequential(nn.Linear(5, 5), nn.Linear(5, 5), nn.Linear(5, 3))
        for p in built.parameters():
            p.data[...] = numpy_global.normal(size=p.shape)
        return built

    _raises_exactly(ValueError, "model_factory built two models whose parameters differ (0.bias, 0.weight, 1.bias, "
                    "1.weight) although the check seeds minitorch_accum's generator (seed=0) before each call: the "
                    "factory draws from another source (NumPy's global generator, a Generator of its own, the "
                    "clock); seed that source inside the factory, or initialize from the library's generator",
                    Subject(elsewhere, summed_loss, batch()).build_identical)
    assert len(subject.build_identical()) == 2


class NoParameters(nn.Module):
    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return x[:, :3]


class MixedDtypes(nn.Module):
    def __init__(self) -> None:
        self.a = nn.Linear(5, 3)
        self.b = nn.Linear(3, 3).to(dtype="float64")

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.b(self.a(x).to(dtype="float64"))


def test_a_model_without_parameters_or_with_several_dtypes_is_named() -> None:
    # before, a model without parameters was said to hold several float dtypes (or, with dtype=, every
    # property crashed in its first backward)
    message = "model_factory built a NoParameters with no parameters: there is no gradient to accumulate, nothing " \
              "to check"
    _raises_exactly(ValueError, message, check_accumulation, NoParameters, summed_loss, batch())
    _raises_exactly(ValueError, message, check_properties, NoParameters, summed_loss, batch(), dtype="float64")
    _raises_exactly(TypeError, "dtype: the model's parameters hold several float dtypes; pass the one to check, "
                    "dtype='float32' or 'float64'", check_accumulation, MixedDtypes, summed_loss, batch())


def test_a_factory_that_builds_no_module_is_named_before_anything_is_built() -> None:
    _raises_exactly(TypeError, "model_factory must return a Module, got dict", check_accumulation,
                    lambda: {"weight": np.ones(3)}, summed_loss, batch())
    _raises_exactly(TypeError, "model_factory must return a Module, got int", Subject(lambda: 3, summed_loss,
                                                                                     batch()).build)


def test_a_loss_that_is_not_one_element_and_a_dtype_that_is_not_a_float_read_in_full() -> None:
    def per_item(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
        return (output * output).sum(axis=1), len(targets)  # one loss per row, not their sum

    _raises_exactly(TypeError, "loss_fn's loss must be a one-element Tensor, got Tensor", check_accumulation,
                    Residual, per_item, batch())
    _raises_exactly(TypeError, "dtype: 'int32' is not a float dtype; give one of float64, float32, float16, bfloat16 "
                    "(a name, np.float32, or mta.float32)", check_accumulation, Residual, summed_loss, batch(),
                    dtype="int32")
