"""The record format: the checksum depends on the values only, and what encode_record writes
parse_record gives back; the state must be JSON-exact before it is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_accum.train.checkpoint import CHECKPOINT_FORMAT, CheckpointError
from minitorch_accum.train.checkpoint.record import (
    check_json_exact,
    encode_record,
    group_entry,
    parse_record,
    record_checksum,
)


def test_the_checksum_ignores_key_order_and_layout_but_not_values() -> None:
    body = {"tag": "A", "sequence": 3, "state": {"lr": 0.1, "name": "résumé"}}
    reordered = json.loads(json.dumps({"state": {"name": "résumé", "lr": 0.1}, "sequence": 3, "tag": "A"}, indent=4))
    assert record_checksum(body) == record_checksum(reordered)
    assert record_checksum(body) != record_checksum({**body, "sequence": 4})
    assert record_checksum(body) != record_checksum({**body, "state": {"lr": 0.1, "name": "resume"}})


def test_an_encoded_record_parses_back_to_what_was_encoded() -> None:
    groups = {"model": group_entry("model", b"weights"), "optimizer": group_entry("optimizer", b"")}
    state = {"step": 7, "rng": {"state": 2**100}, "seen": [1, 2.5, None, True]}
    record = parse_record(encode_record("step7.2", "step7", 12, groups, state), Path("ckpt"))
    assert record["format"] == CHECKPOINT_FORMAT and record["library"] == "minitorch_accum"
    assert (record["directory"], record["tag"], record["sequence"]) == ("step7.2", "step7", 12)
    assert record["groups"] == groups and record["groups"]["model"]["file"] == "model.safetensors"
    assert record["state"] == state


def test_a_changed_byte_of_the_record_is_refused() -> None:
    data = encode_record("A", "A", 1, {}, {"step": 1})
    with pytest.raises(CheckpointError, match=r"checkpoint ckpt is corrupt: state\.json does not match its checksum"):
        parse_record(data.replace(b'"step": 1', b'"step": 2'), Path("ckpt"))


@pytest.mark.parametrize("value", [{"a": (1, 2)}, {"a": [{"b": {1: 2}}]}, {"a": {"b": {1.5}}}, {"a": b"bytes"}])
def test_state_json_would_change_is_refused_however_deep(value: dict) -> None:
    with pytest.raises(TypeError, match=r"checkpoint state\['a'\]"):
        check_json_exact(value)


def test_json_exact_state_is_accepted() -> None:
    check_json_exact({"a": [1, 2.5, "x", None, False, {"b": []}], "c": {}})
