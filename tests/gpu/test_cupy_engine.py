"""The CuPy path of the engine, accumulation and training: the same results as on the CPU.

Skipped without a CUDA device (see tests/conftest.py); run by benchmarks/gpu_check.sh.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.data import DataLoader, load_digits
from minitorch_accum.nn import functional as F
from minitorch_accum.observe import PeakMemory
from minitorch_accum.train import LearnerBuilder

pytestmark = pytest.mark.gpu


def mlp(dtype: str = "float64") -> nn.Module:
    mta.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16, dtype=dtype), nn.GELU(), nn.LayerNorm(16, dtype=dtype),
                         nn.Linear(16, 4, dtype=dtype))


def _same_on_the_cpu_and_the_gpu(seed: int, rows: int, run: Any) -> None:
    """``run(model, x, y, device)``'s arrays for a fresh mlp and the same drawn batch of ``rows``,
    on the CPU and on the GPU: equal to float64 rounding."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 8))
    y = rng.integers(0, 4, size=rows)
    cpu, gpu = (run(mlp().to(device=device), x, y, device) for device in ("cpu", "cuda"))
    for a, b in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_tensor_ops_and_backward_match_the_cpu() -> None:
    def gradients(model: nn.Module, x: np.ndarray, y: np.ndarray, device: str) -> list[np.ndarray]:
        grads = F.cross_entropy(model(mta.tensor(x, dtype="float64", device=device)),
                                mta.tensor(y, device=device)).backward()
        return [np.asarray(mta.Tensor(grads[p]).numpy()) for p in model.parameters()]

    _same_on_the_cpu_and_the_gpu(0, 5, gradients)


def test_cross_device_op_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="different devices: cpu and cuda:0"):
        mta.ones(2) + mta.ones(2, device="cuda")
    moved = mta.ones(2, requires_grad=True)
    grads = (moved.to("cuda") * 3.0).sum().backward()
    np.testing.assert_array_equal(grads[moved], [3.0, 3.0])  # the gradient came back to the CPU


def test_a_gradient_on_another_device_than_its_parameter_is_refused_by_name() -> None:
    from minitorch_accum.autodiff.gradients import Gradients

    model = mlp().to(device="cuda")
    grads = Gradients()
    for p in model.parameters():
        grads.set(p, np.zeros(p.shape))  # host arrays for device parameters
    with pytest.raises(ValueError, match=r"^optimizer: gradient for 0\.weight is on another device than the "
                                         r"parameter$"):
        optim.SGD(lr=0.1).step(model, grads)


def test_the_gradient_norm_covers_gradients_on_several_devices() -> None:
    from minitorch_accum.autodiff.gradients import Gradients

    rng = np.random.default_rng(2)
    host, device = rng.normal(size=(3, 4)), rng.normal(size=(5,))
    on_host = mta.tensor(host, dtype="float64", requires_grad=True)
    on_device = mta.tensor(device, dtype="float64", device="cuda", requires_grad=True)
    grads = Gradients()
    grads.set(on_host, on_host.data)
    grads.set(on_device, on_device.data)
    assert optim.grad_norm(grads) == pytest.approx(np.hypot(np.linalg.norm(host), np.linalg.norm(device)), rel=1e-12)


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_accumulator_on_the_gpu_equals_the_cpu_window(fusion: str) -> None:
    def window(model: nn.Module, x: np.ndarray, y: np.ndarray, device: str) -> list[np.ndarray]:
        acc = Accumulator(model, steps=3, fusion=fusion, accum_dtype="float64")
        for i in range(3):
            part = slice(i * 4, (i + 1) * 4)
            loss = F.cross_entropy(model(mta.tensor(x[part], dtype="float64", device=device)),
                                   mta.tensor(y[part], device=device), reduction="sum")
            acc.backward(loss, num_items=4)
        opt = optim.AdamW(lr=0.01)
        opt.step(model, acc)
        return [p.numpy() for p in model.parameters()]

    _same_on_the_cpu_and_the_gpu(1, 12, window)


def test_gemm_fusion_writes_into_the_arena_on_the_gpu() -> None:
    model = mlp("float32").to(device="cuda")
    acc = Accumulator(model, steps=2, fusion="gemm", trace=True)
    x = mta.randn(4, 8, device="cuda")
    for _ in range(2):
        acc.backward(F.cross_entropy(model(x), mta.tensor(np.arange(4) % 4, device="cuda"), reduction="sum"),
                     num_items=4)
    assert [e.kernel for e in acc.trace.for_param("0.weight")] == ["gemm-beta0", "gemm-beta1"]


def test_peak_memory_is_measured_on_the_gpu() -> None:
    import cupy

    with PeakMemory("cuda") as probe:
        block = cupy.ones(1 << 20, dtype=cupy.float32)
        del block
    assert probe.peak_bytes >= 4 << 20


def test_learner_trains_on_the_gpu(tmp_path) -> None:
    train, _ = load_digits().split(0.8)
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    learner = (LearnerBuilder(tmp_path).num_epochs(1).grads_accumulation(4).devices(["cuda"]).progress("none")
               .build(model, optim.AdamW(lr=3e-3)))
    _, history = learner.fit(DataLoader(train, 32))
    assert history.steps[-1]["loss"] < history.steps[0]["loss"]


def test_a_replayed_micro_batch_on_the_gpu_is_an_eager_one_bit_for_bit() -> None:
    from minitorch_accum.models import CharTransformer, TransformerConfig

    rng = np.random.default_rng(0)
    batches = [(mta.tensor(rng.integers(0, 11, size=(4, 8)), device="cuda"),
                mta.tensor(rng.integers(0, 11, size=(4, 8)), device="cuda")) for _ in range(4)]
    windows = []
    for replay in (False, True):
        mta.manual_seed(0)
        model = CharTransformer(TransformerConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
        model.to(device="cuda")
        acc = Accumulator(model, steps=len(batches))

        def loss(x: mta.Tensor, y: mta.Tensor, model: nn.Module = model) -> mta.Tensor:
            return F.cross_entropy(model(x), y, reduction="sum")

        step = acc.capture(loss) if replay else loss
        grads = []
        for _ in range(2):
            for x, y in batches:
                acc.backward(step(x, y), num_items=32)
            grads.append([np.asarray(mta.Tensor(acc.grads()[p]).numpy()) for p in model.parameters()])
            acc.zero()
        windows.append(grads)
        if replay:
            assert step.last.outcome == "replayed"
    for a, b in zip(*windows, strict=True):
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(x, y)
