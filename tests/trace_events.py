"""Checks of a Trace Event Format file shared by the tests of the trace (accum, train, cli,
distributed): the fields the format requires, and the spans a window must have."""

from __future__ import annotations

from typing import Any

REQUIRED = ("name", "ph", "ts", "pid", "tid")
PHASES = {"X", "C", "M"}


def check_trace_event_format(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """Assert the JSON object format: ``traceEvents`` whose every event has name, ph, ts, pid and
    tid of the right types, ``dur`` on complete events, numeric counter values, named metadata;
    returns the events."""
    assert isinstance(trace.get("traceEvents"), list) and trace["traceEvents"], "no traceEvents"
    for event in trace["traceEvents"]:
        missing = [field for field in REQUIRED if field not in event]
        assert not missing, f"event {event} lacks {missing}"
        assert isinstance(event["name"], str) and event["name"], event
        assert event["ph"] in PHASES, event
        assert isinstance(event["ts"], int | float) and event["ts"] >= 0, event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        if event["ph"] == "X":
            assert isinstance(event.get("dur"), int | float) and event["dur"] >= 0, event
        elif event["ph"] == "C":
            assert event["args"] and all(isinstance(v, int | float) for v in event["args"].values()), event
        else:
            assert event["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), event
            assert event["args"], event
    return trace["traceEvents"]


def complete(events: list[dict[str, Any]], name: str | None = None, cat: str | None = None) -> list[dict[str, Any]]:
    """The ``X`` events, of one name or category if given."""
    return [e for e in events if e["ph"] == "X" and (name is None or e["name"] == name)
            and (cat is None or e.get("cat") == cat)]


def inside(inner: dict[str, Any], outer: dict[str, Any], slack_us: float = 1.0) -> bool:
    """Whether the span ``inner`` lies within ``outer`` (to rounding of the microseconds)."""
    return (outer["ts"] - slack_us <= inner["ts"]
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + slack_us)
