"""What every data-parallel rank must agree on before its first collective: the run's settings,
its data and its model (``distributed/rank_agreement.py`` compares them and names what differs).

- the settings: every row a checkpoint records (``record_settings``: k, the seed, the task's
  dataset and dtype, the optimizer and its learning rate, ...) and every other learner row that
  shapes which collectives a rank calls (epochs, checkpoint intervals, ZeRO-1, overlap, bucket sizes,
  the parameter check's interval), except the rows each rank may hold on its own (``per_rank`` in
  the settings table: its device, what it displays); and whether the run resumes;
- the data: the training set's size, the loader's batch size, seed and order, and a digest of the
  items themselves (every item read once, in chunks: a different or stale copy on one host differs);
- the model: each parameter's and buffer's name, shape and dtype (their values need not agree:
  rank 0's are broadcast).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from minitorch_accum.data import DataLoader
from minitorch_accum.nn import Module
from minitorch_accum.train.run_parts import RunParts
from minitorch_accum.train.run_settings import micro_batch_record, record_settings
from minitorch_accum.train.settings import SETTINGS

__all__ = ["data_description", "describe_run", "model_description", "settings_description"]

_CHUNK_ITEMS = 4096  # items read at a time for the data digest


def _plain(value: Any) -> Any:
    """A JSON value standing for a setting's value (an object by its type and state)."""
    try:
        json.dumps(value)
        return value
    except TypeError:
        pass
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    state = value.state_dict() if hasattr(value, "state_dict") else None
    return {"type": type(value).__name__, "state": _plain(state)}


def _flatten(record: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = _plain(value)
    return flat


def settings_description(run: RunParts, loader: DataLoader, resume: bool) -> dict[str, Any]:
    """The settings every rank must share, by name (recorded ones and those that shape collectives)."""
    config = run.config
    recorded = record_settings(config, micro_batch_record(loader), run.comm.world_size, run.optimizer)
    description = _flatten(recorded, "")
    for row in SETTINGS:
        if row.target == "learner" and not row.per_rank and row.name not in description:
            description[row.name] = _plain(getattr(config, row.name))
    description["resume"] = bool(resume)
    return description


def _update(digest: Any, value: Any) -> None:
    if isinstance(value, tuple | list):
        digest.update(f"seq{len(value)}".encode())
        for item in value:
            _update(digest, item)
    elif isinstance(value, Mapping):
        for key in sorted(value, key=str):
            digest.update(str(key).encode())
            _update(digest, value[key])
    else:
        array = np.ascontiguousarray(np.asarray(value))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.view(np.uint8).tobytes() if array.dtype != object else repr(array.tolist()).encode())


def data_description(loader: DataLoader) -> dict[str, Any]:
    """The training set's size, order and a digest of its items."""
    dataset = loader.dataset
    n = len(dataset)
    content = hashlib.blake2b(digest_size=8)
    for first in range(0, n, _CHUNK_ITEMS):
        _update(content, dataset.get_batch(np.arange(first, min(first + _CHUNK_ITEMS, n))))
    order = hashlib.blake2b(np.ascontiguousarray(loader.order(0)).view(np.uint8).tobytes(), digest_size=8)
    return {"data.items": n, "data.batch_size": micro_batch_record(loader), "data.shuffle": bool(loader.shuffle),
            "data.seed": loader.seed, "data.drop_last": bool(loader.drop_last),
            "data.order (epoch 0)": order.hexdigest(), "data.content": content.hexdigest()}


def model_description(model: Module) -> dict[str, Any]:
    """Each parameter's and buffer's name, shape and dtype, in the model's order."""
    return {"model.parameters": [[name, list(p.shape), str(p.dtype)] for name, p in model.named_parameters()],
            "model.buffers": [[name, list(np.shape(b.value)), str(b.value.dtype)]
                              for name, b in model.named_buffers()]}


def describe_run(run: RunParts, loader: DataLoader, resume: bool) -> dict[str, Any]:
    """Everything ``check_ranks_agree`` compares for a Learner's run."""
    return {**settings_description(run, loader, resume), **data_description(loader),
            **model_description(run.step_model)}
