"""What the Accumulator's tracer makes of a pass a store announces, and of the window it reads."""

from __future__ import annotations

import time
from itertools import pairwise

import pytest

from minitorch_accum.accum import Accumulator
from minitorch_accum.kernels import bytes_moved
from tests.accum.helpers import data, mlp, summed_loss


def test_a_window_pass_is_recorded_with_the_time_it_took_shared_out_end_to_end() -> None:
    model = mlp("float64")
    x, y = data()
    acc = Accumulator(model, steps=1, fusion="leaf", accum_dtype="float64", trace=True)
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    before = time.perf_counter()
    acc.store.scale_in_place(0.5)
    took = time.perf_counter() - before
    scales = [e for e in acc.trace.events if e.kernel == "scale"]
    sizes = {name: p.size for name, p in model.named_parameters()}
    assert [e.param for e in scales] == list(sizes)
    assert all(e.micro_batch == -1 and not e.materialized for e in scales)
    assert all(e.elements == sizes[e.param] and e.bytes == bytes_moved("scale", e.elements, 8, 8) for e in scales)
    assert 0.0 <= sum(e.seconds for e in scales) <= took
    assert acc.trace.clock(before) <= scales[0].start
    for earlier, later in pairwise(scales):
        assert later.start == pytest.approx(earlier.start + earlier.seconds, abs=1e-9)


def test_events_carry_the_window_and_micro_batch_the_accumulator_holds() -> None:
    model = mlp("float64")
    x, y = data()
    acc = Accumulator(model, steps=2, fusion="leaf", trace=True)
    for _ in range(2):
        for _ in range(2):
            acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
        acc.grads()
        acc.zero()
    writes = [(e.window, e.micro_batch) for e in acc.trace.events if e.kernel in ("copy_scale", "add_scale")]
    assert sorted(set(writes)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    steps = [s for s in acc.trace.spans if s.name.startswith("ProfilerStep#")]
    assert [(s.name, s.args["micro_batches"], s.args["items"]) for s in steps] == [("ProfilerStep#0", 2, 6),
                                                                                   ("ProfilerStep#1", 2, 6)]


def test_a_micro_batch_span_holds_its_forward_and_backward_from_the_same_instant() -> None:
    model = mlp("float64")
    x, y = data()
    acc = Accumulator(model, steps=3, fusion="leaf", accum_dtype="float64", trace=True)
    for i in range(3):
        with acc.micro_batch():
            loss = summed_loss(model, x[3 * i:3 * i + 3], y[3 * i:3 * i + 3], "float64")
            acc.backward(loss, num_items=3)
    spans = acc.trace.spans
    micro = [s for s in spans if s.name.startswith("micro-batch ")]
    assert [s.name for s in micro] == ["micro-batch 0", "micro-batch 1", "micro-batch 2"]
    for phase in ("forward", "backward"):
        inner = [s for s in spans if s.name == phase]
        assert len(inner) == 3
        for span, outer in zip(inner, micro, strict=True):
            assert outer.lane == span.lane and outer.start <= span.start  # never before the span that holds it
            assert span.start + span.seconds <= outer.start + outer.seconds
    # the forward is the micro-batch's from its first instant: the two begin together
    assert [s.start for s in spans if s.name == "forward"] == [s.start for s in micro]
