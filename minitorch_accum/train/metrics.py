"""Step-level metrics: one JSON line per optimizer step in ``DIR/metrics.jsonl``.

Every line of kind ``"train"`` holds: epoch, step, micro_batches, items, loss (per
item over the window), accuracy, lr, grad_norm, peak_array_bytes, peak_activation_bytes,
accumulation_seconds (forward + backward + accumulation of the window's
micro-batches), step_seconds (clipping + optimizer step), items_per_second and
skipped (a non-finite window). Validation lines (kind ``"valid"``) come once per
epoch.

Memory is measured around each micro-batch's forward and backward, and a line holds the
largest of its window's micro-batches: ``peak_array_bytes`` counts array buffers alone
(the activation memory: saved activations and temporaries, from NumPy's allocator or
CuPy's pool; null where arrays cannot be told apart), ``peak_activation_bytes`` everything
the allocator counted (on the CPU: the same arrays plus Python objects such as the graph's
nodes, a few tens of KiB per micro-batch whatever its size; ``observe/memory.py`` says how). The progress
lines show the first and the difference; ``maccum compare`` shows the same two figures.

A line is appended with a single ``write`` to a file opened ``O_APPEND``, so a kill
or a full disk can cut only the line being written, never an earlier one; such a
torn last line is dropped (and reported) when a resumed run truncates the log.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from minitorch_accum.durable_files import describe_os_error, replace_file_atomically, write_all

__all__ = ["METRICS", "MetricsLog", "MetricsLogError"]

#: metric names accepted by LearnerBuilder.metric(...), shown by the progress display
METRICS = ("loss", "accuracy", "items_per_second", "grad_norm", "lr", "peak_memory")

# how far back from the end to look for the last newline when checking for a torn tail
_TAIL_CHUNK = 1 << 16


class MetricsLogError(RuntimeError):
    """metrics.jsonl cannot be read (a malformed line) or written (disk full, read-only)."""


class MetricsLog:
    """Appends JSON lines and keeps them in memory (the history).

    ``notes`` collects one-line messages the caller may show the user (a torn last line
    that was dropped)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self._tail_checked = False

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line. On an OSError the file is cut back to its previous
        length (no partial line stays) and MetricsLogError names the file and the cause."""
        data = (json.dumps(record) + "\n").encode("utf-8")
        try:
            # read-write: the first write looks at the last byte for a torn line
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise MetricsLogError(f"cannot write {self.path}: {describe_os_error(exc)}") from exc
        try:
            if not self._tail_checked:
                self._drop_torn_tail(fd)
                self._tail_checked = True
            start = os.lseek(fd, 0, os.SEEK_END)
            try:
                write_all(fd, data)
            except OSError:
                # a partial line would be glued to the next one written after the disk frees up
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                raise
        except OSError as exc:
            raise MetricsLogError(f"cannot write {self.path}: {describe_os_error(exc)}") from exc
        finally:
            os.close(fd)
        self.records.append(record)

    def _drop_torn_tail(self, fd: int) -> None:
        """A file that does not end in a newline ends in a line cut short by a kill: appending
        to it would merge that fragment with the new line, so the fragment goes first."""
        size = os.lseek(fd, 0, os.SEEK_END)
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        end = size
        while end > 0:
            begin = max(0, end - _TAIL_CHUNK)
            chunk = os.pread(fd, end - begin, begin)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                keep = begin + newline + 1
                break
            end = begin
        else:
            keep = 0
        os.ftruncate(fd, keep)
        self._note_torn(size - keep)

    def _note_torn(self, size: int) -> str:
        note = (f"{self.path}: dropped a torn last line ({size} bytes; the run stopped while "
                "writing it)")
        self.notes.append(note)
        return note

    def sync(self) -> None:
        """Flush the log to disk: call before saving a checkpoint, so that after a crash the
        log still holds every line up to the checkpoint's step."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise MetricsLogError(f"cannot sync {self.path}: {describe_os_error(exc)}") from exc
        try:
            os.fsync(fd)
        except OSError as exc:
            raise MetricsLogError(f"cannot sync {self.path}: {describe_os_error(exc)}") from exc
        finally:
            os.close(fd)

    def truncate_after(self, step: int) -> str | None:
        """Forget lines of steps after ``step`` (a resumed run re-does them); keep the rest
        in ``records``. A torn last line (no newline, not a JSON object) is dropped and the
        returned note (also in ``notes``) says so; None when nothing was torn. Any other
        malformed line raises MetricsLogError naming the file and the line number."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        except OSError as exc:
            raise MetricsLogError(f"cannot read {self.path}: {describe_os_error(exc)}") from exc
        lines = data.split(b"\n")
        tail = lines.pop()  # what follows the last newline: empty unless the last write was cut short
        records = [(number, self._parse(raw, number)) for number, raw in enumerate(lines, start=1)
                   if raw.strip()]
        note = None
        if tail:
            try:
                records.append((len(lines) + 1, self._parse(tail, len(lines) + 1)))
            except MetricsLogError:
                note = self._note_torn(len(tail))
        kept = []
        for number, record in records:
            record_step = record.get("step", 0)
            if type(record_step) is not int:
                raise MetricsLogError(f"{self.path}, line {number}: 'step' is {record_step!r}, not an integer")
            if record_step <= step:
                kept.append(record)
        if note is not None or len(kept) != len(records) or tail:
            text = "".join(json.dumps(record) + "\n" for record in kept).encode("utf-8")
            tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
            try:
                replace_file_atomically(self.path, text, tmp)
            except OSError as exc:
                raise MetricsLogError(f"cannot rewrite {self.path}: {describe_os_error(exc)} "
                                      "(the log is unchanged)") from exc
        self.records = kept
        self._tail_checked = True
        return note

    def _parse(self, raw: bytes, number: int) -> dict[str, Any]:
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise MetricsLogError(f"{self.path}, line {number}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise MetricsLogError(f"{self.path}, line {number}: not valid JSON ({exc.msg} at column "
                                  f"{exc.colno})") from None
        if not isinstance(record, dict):
            raise MetricsLogError(f"{self.path}, line {number}: expected a JSON object, got "
                                  f"{type(record).__name__}")
        return record

    def reset(self) -> None:
        """Start an empty log (a new run)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise MetricsLogError(f"cannot write {self.path}: {describe_os_error(exc)}") from exc
        os.close(fd)
        self.records = []
        self._tail_checked = True
