"""What the Accumulator's tracer makes of a pass a store announces, and of the window it reads."""

from __future__ import annotations

import time
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest

from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.kernels import bytes_moved, kernel_path
from minitorch_accum.observe.trace import AccumulationTrace
from minitorch_accum.observe.window_tracer import WindowTracer
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


def _fake_accumulator(model: Any, reducer: Any = None, device_kind: str | None = None) -> Any:
    """What a WindowTracer reads of an accumulator, with the device and the reducer chosen."""
    acc = Accumulator(model, steps=2, fusion="leaf", accum_dtype="float64", compensated=True)
    device = SimpleNamespace(kind=device_kind) if device_kind is not None else object()
    return SimpleNamespace(window=acc.window, steps=acc.steps, store=acc.store, model=model, reducer=reducer,
                           device=lambda: device, forward_replay=None)


class NCCLCommunicator:  # named as the real ones are: the trace says the part before "Communicator"
    pass


class Communicator:  # the base class's own name: a local, one-rank collective
    pass


@pytest.mark.parametrize(("reducer", "path"), [
    (SimpleNamespace(comm=NCCLCommunicator()), "nccl"),
    (SimpleNamespace(comm=Communicator()), "local"),
    (SimpleNamespace(comm=LocalCommunicator()), "local"),
    (SimpleNamespace(), "collective"),  # a reducer with no communicator of its own
    (None, "collective"),
])
def test_a_collective_is_traced_on_the_communicator_the_reducer_holds(reducer: Any, path: str) -> None:
    tracer = WindowTracer(AccumulationTrace(), _fake_accumulator(mlp("float64"), reducer))
    tracer("bucket 0 [0:8]", "allreduce", 8, 64, 1e-3, materialized=False, window_pass=True)
    (event,) = tracer.trace.events
    assert event.path == path


@pytest.mark.parametrize(("device_kind", "path"), [("cuda", "cupy"), (None, kernel_path())])
def test_a_kernel_is_traced_on_the_device_the_parameters_live_on(device_kind: str | None, path: str) -> None:
    trace = AccumulationTrace(memory="counter")
    tracer = WindowTracer(trace, _fake_accumulator(mlp("float64"), device_kind=device_kind))
    tracer("w", "add_scale", 8, 96, 1e-3, materialized=True, window_pass=False)
    assert trace.events[0].path == path
    assert trace.memory.device == (device_kind or "cpu")  # a device without a kind is the CPU


def test_the_memory_recording_names_each_persistent_block_by_what_it_holds() -> None:
    model = mlp("float64")
    trace = AccumulationTrace(memory="counter")
    acc = _fake_accumulator(model)
    WindowTracer(trace, acc)
    names = {what: nbytes for _, nbytes, what in trace.memory.persistent}
    arena, compensation = acc.store.arena.buffers, acc.store.compensation.buffers
    assert {k: v for k, v in names.items() if "arena" in k} == {
        **{f"gradient arena ({dtype}, persistent)": b.nbytes for dtype, b in arena.items()},
        **{f"compensation arena ({dtype}, persistent)": b.nbytes for dtype, b in compensation.items()}}
    assert {k: v for k, v in names.items() if k.startswith("parameter ")} == {
        f"parameter {name}": p.data.nbytes for name, p in model.named_parameters()}


def test_a_kernel_told_only_its_duration_ended_now_and_began_the_window() -> None:
    trace = AccumulationTrace()
    tracer = WindowTracer(trace, _fake_accumulator(mlp("float64")))
    before = time.perf_counter()
    tracer("w", "add_scale", 8, 96, 0.25, materialized=True, window_pass=False)  # no started=: it just ended
    after = time.perf_counter()
    (event,) = trace.events
    assert trace.clock(before) - 0.25 <= event.start <= trace.clock(after) - 0.25
    tracer.window_ended()
    (step,) = [s for s in trace.spans if s.name.startswith("ProfilerStep#")]
    assert step.start == pytest.approx(event.start, abs=1e-9)  # the window began with its first kernel


def test_burns_container_path_traces_with_its_memory_named_and_no_arena() -> None:
    model = mlp("float64")
    x, y = data()
    acc = Accumulator(model, steps=2, fusion="none", accum_dtype="float64", trace=AccumulationTrace(memory="counter"))
    for i in range(2):
        acc.backward(summed_loss(model, x[3 * i:3 * i + 3], y[3 * i:3 * i + 3], "float64"), num_items=3)
    acc.grads()
    acc.zero()
    assert sorted(what for _, _, what in acc.trace.memory.persistent) == sorted(
        f"parameter {name}" for name, _ in model.named_parameters())  # no arena to name
    assert [s.name for s in acc.trace.spans if s.name.startswith("ProfilerStep#")] == ["ProfilerStep#0"]


def test_a_tracer_on_a_trace_that_holds_earlier_spans_starts_its_window_at_its_own_first_record() -> None:
    trace = AccumulationTrace()
    trace.add_span("an earlier window", "window", time.perf_counter() - 5.0)  # 5 s before this tracer
    tracer = WindowTracer(trace, _fake_accumulator(mlp("float64")))
    tracer("w", "add_scale", 8, 96, 1e-3, materialized=True, window_pass=False)
    tracer.window_ended()
    (step,) = [s for s in trace.spans if s.name.startswith("ProfilerStep#")]
    assert step.start == pytest.approx(trace.events[0].start, abs=1e-9)
