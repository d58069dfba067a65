"""What the trace shows: first write copies, later writes add, GEMM fusion never
materializes a weight gradient, the Burn path allocates containers."""

from __future__ import annotations

import json

import pytest

from minitorch_accum.accum import Accumulator
from tests.accum.helpers import data, mlp, summed_loss


def run_window(fusion: str, steps: int = 3, **kwargs):
    model = mlp("float32")
    x, y = data()
    acc = Accumulator(model, steps=steps, fusion=fusion, trace=True, **kwargs)
    for i in range(steps):
        acc.backward(summed_loss(model, x[i * 4:(i + 1) * 4], y[i * 4:(i + 1) * 4], "float32"), num_items=4)
    return model, acc


def test_leaf_fusion_copies_first_and_adds_after() -> None:
    model, acc = run_window("leaf")
    for name, _ in model.named_parameters():
        kernels = [e.kernel for e in acc.trace.for_param(name)]
        assert kernels == ["copy_scale", "add_scale", "add_scale"]
    event = acc.trace.for_param("0.weight")[1]
    assert event.elements == 40 and event.bytes == 40 * 12  # 12 bytes per fp32 add_scale element
    assert {e.micro_batch for e in acc.trace.events} == {0, 1, 2}


def test_gemm_fusion_never_materializes_a_weight_gradient() -> None:
    _, acc = run_window("gemm")
    for name in ("0.weight", "2.weight"):
        events = acc.trace.for_param(name)
        assert [e.kernel for e in events] == ["gemm-beta0", "gemm-beta1", "gemm-beta1"]
        assert not any(e.materialized for e in events)
    assert [e.kernel for e in acc.trace.for_param("0.bias")] == ["copy_scale", "add_scale", "add_scale"]


def test_compensated_uses_the_neumaier_pair() -> None:
    _, acc = run_window("leaf", compensated=True)
    assert [e.kernel for e in acc.trace.for_param("0.weight")] == [
        "copy_scale_compensated", "add_scale_compensated", "add_scale_compensated"]
    acc.grads()
    assert "fold_compensation" in acc.trace.kernels_used()


def test_burn_path_stores_then_adds_containers() -> None:
    _, acc = run_window("none")
    assert [e.kernel for e in acc.trace.for_param("0.weight")] == ["container-store", "container-add",
                                                                   "container-add"]
    assert acc.arena is None


def test_trace_exports_table_and_json(tmp_path) -> None:
    _, acc = run_window("gemm")
    table = acc.trace.table()
    assert "gemm-beta1" in table and "0.weight" in table
    acc.trace.save_json(tmp_path / "trace.json")
    saved = json.loads((tmp_path / "trace.json").read_text())
    assert len(saved["events"]) == len(acc.trace) and saved["totals"]["gemm-beta0"]["calls"] == 2


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_window_state_flags(fusion: str) -> None:
    _, acc = run_window(fusion, steps=3)
    assert acc.is_boundary and acc.micro_step == 3 and acc.items_seen == 12
    acc.zero()
    assert not acc.is_boundary and acc.micro_step == 0 and acc.items_seen == 0
