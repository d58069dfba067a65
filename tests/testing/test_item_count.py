"""item_count_matches_the_loss reads the items off the gradient a summed loss sends to the model's
output: positions, elements and rows for any output shape, the count named in the verdict, and the
models it cannot read (a tuple output, a loss that never reaches the output) reported, not crashed."""

from __future__ import annotations

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.testing import bugs, check_properties
from minitorch_accum.testing.item_count import COUNT, items_in_gradient
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED, SKIPPED
from tests.testing.models import Residual, batch, summed_loss

PROPERTY = ["item_count_matches_the_loss"]


def test_items_are_counted_off_the_gradient_for_one_two_and_three_axes() -> None:
    # one value per row: an item is an element, and a row
    assert items_in_gradient(np.array([0.5, 0.0, -2.0, 0.0, 1.0]), 5) == {"output elements": 3, "rows": 3}
    # (rows, classes): row 1 is not reached; a position is a row here
    two = np.array([[0.1, 0.0, 0.2], [0.0, 0.0, 0.0], [0.0, 0.3, 0.0], [1.0, 1.0, 1.0]])
    assert items_in_gradient(two, 4) == {"output positions": 3, "output elements": 6, "rows": 3}
    # (rows, length, vocabulary): positions are what a causal LM counts, neither rows nor elements
    three = np.zeros((3, 4, 2))
    three[0, :3, 0] = 1.0
    three[2, 1, :] = -1.0
    assert items_in_gradient(three, 3) == {"output positions": 4, "output elements": 5, "rows": 2}


class OneValuePerRow(nn.Module):
    """A regression head that returns one value per row, a 1-D output."""

    def __init__(self) -> None:
        mta.manual_seed(0)
        self.head = nn.Linear(5, 1)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.head(x).reshape(x.shape[0])


def _squares(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return (output * output).sum(), len(targets)


def _squares_one_too_many(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return (output * output).sum(), len(targets) + 1


def test_a_one_dimensional_output_is_counted_by_its_elements_and_a_wrong_count_is_named() -> None:
    right = check_properties(OneValuePerRow, _squares, batch(), splits=[(5, 7)], properties=PROPERTY,
                             raise_on_failure=False)[PROPERTY[0]]
    assert right.status == PASSED and right.error is None
    wrong = check_properties(OneValuePerRow, _squares_one_too_many, batch(), splits=[(5, 7)], properties=PROPERTY,
                             raise_on_failure=False)[PROPERTY[0]]
    assert wrong.status == FAILED and wrong.error is None
    assert "rows 0:12: loss_fn counted 13 items, its summed loss reaches 12 output elements, 12 rows" \
        in wrong.summary()


class ReturnsAPair(Residual):
    def forward(self, x: mta.Tensor) -> tuple[mta.Tensor, mta.Tensor]:
        output = super().forward(x)
        return output, output


def _loss_of_the_first(output: tuple[mta.Tensor, mta.Tensor], targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return summed_loss(output[0], targets)


def test_a_model_that_returns_a_tuple_is_not_applicable_and_says_why() -> None:
    result = check_properties(ReturnsAPair, _loss_of_the_first, batch(), splits=[(5, 7)], properties=PROPERTY,
                              raise_on_failure=False)[PROPERTY[0]]
    assert result.status == SKIPPED and result.error is None
    assert result.notes == ["the model returns a tuple, not one tensor: the items cannot be read off its gradient"]


def _constant(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return mta.tensor(np.array(1.0), requires_grad=True), len(targets)


def test_a_loss_that_never_reaches_the_output_shows_no_items_and_is_inconclusive_not_a_crash() -> None:
    result = check_properties(Residual, _constant, batch(), splits=[(5, 7)], properties=PROPERTY,
                              raise_on_failure=False)[PROPERTY[0]]
    assert result.status == INEXACT and result.error is None
    assert result.worst[COUNT].scenario == ("rows 0:12: loss_fn counted 12 items, its summed loss reaches "
                                            "0 output positions, 0 output elements, 0 rows")


def test_bugs_show_states_what_the_property_claims() -> None:
    text = bugs.describe(bugs.measure(bugs.exhibit("count_before_shift")))
    assert ("property: item_count_matches_the_loss (loss_fn counts as items what its summed loss sums: "
            "the output positions it reaches)") in text


def _constant_counting_five(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return mta.tensor(np.array(1.0), requires_grad=True), 5


def test_the_checks_own_count_of_a_one_dimensional_output_and_of_a_loss_that_never_reaches_it() -> None:
    from minitorch_accum.testing.check_context import CheckContext
    from minitorch_accum.testing.recipes import Recipe
    from minitorch_accum.testing.subject import Subject

    one_axis = CheckContext(Subject(OneValuePerRow, _squares_one_too_many, batch()), ((5, 7),), Recipe())
    assert one_axis.notes == ["loss_fn counts 13 items in the batch, but the loss depends on 12 positions of the "
                              "output (12 elements, 12 rows): it divides by the wrong number; the big batch is "
                              "normalized here by the 12 items really there"]
    unreached = CheckContext(Subject(Residual, _constant_counting_five, batch()), ((5, 7),), Recipe())
    assert unreached.notes == ["loss_fn counts 5 items in the batch, but the loss depends on 0 positions of the output "
                               "(0 elements, 0 rows): it divides by the wrong number; the big batch is normalized here "
                               "by the 0 items really there"]
