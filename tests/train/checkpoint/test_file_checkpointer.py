"""FileCheckpointer: verified records, safe saves under kills and full disks, honest fallback.

Kills are simulated by stopping a save at one of its filesystem operations (a
BaseException the code cannot catch as an OSError), leaving the directory exactly as
a kill at that moment would; failing disks by making those operations raise OSError.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.train.checkpoint import (
    CheckpointError,
    CheckpointFallbackWarning,
    FileCheckpointer,
)
from minitorch_accum.train.checkpoint.leftovers import HOST
from minitorch_accum.train.checkpoint.record import record_checksum

GROUPS = ("model", "optimizer", "accumulator")


def arrays(seed: int) -> dict[str, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return {"model": {"0.weight": rng.normal(size=(4, 3)).astype(np.float32), "0.bias": rng.normal(size=3)},
            "optimizer": {"0.weight/exp_avg": rng.normal(size=(4, 3)).astype(np.float32)},
            "accumulator": {"buffer": rng.normal(size=15).astype(np.float32)}}


def state(step: int) -> dict:
    return {"step": step, "epoch": 1, "next_batch": 5, "validated": False, "rng": {"state": 2**100 + step},
            "config": {"reduction": "items", "accum": 8, "lr": 0.003, "dataset": "digits"}}


def assert_arrays_equal(got: dict, expected: dict) -> None:
    assert sorted(got) == sorted(expected)
    for group in expected:
        assert sorted(got[group]) == sorted(expected[group])
        for name in expected[group]:
            np.testing.assert_array_equal(got[group][name], expected[group][name], err_msg=f"{group}/{name}")
            assert got[group][name].dtype == expected[group][name].dtype


def two_checkpoints(directory: Path, keep: int = 2) -> FileCheckpointer:
    ckpt = FileCheckpointer(directory, keep=keep)
    ckpt.save("A", arrays(1), state(1))
    ckpt.save("B", arrays(2), state(2))
    return ckpt


def record_of(checkpoint: Path) -> dict:
    return json.loads((checkpoint / "state.json").read_text())


def reseal(checkpoint: Path, edit: Callable[[dict], None]) -> None:
    """Edit state.json and recompute its checksum: what a hostile or careless hand could do,
    so the checks after the checksum are what must catch it."""
    record = record_of(checkpoint)
    edit(record)
    record.pop("record_sha256", None)
    record["record_sha256"] = record_checksum(record)
    (checkpoint / "state.json").write_text(json.dumps(record))


def hidden_entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def dead_pid() -> int:
    """A PID no process can have: one above the kernel's maximum."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


# ------------------------------------------------------------------ round trip and the record
def test_state_facts_round_trip_exactly_and_are_covered_by_the_checksum(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path)
    facts = {**state(7), "validated": True, "nothing": None, "ratio": -0.1 + 0.2, "name": "résumé ✓",
             "missing_value": float("nan"), "per_epoch": [{"epoch": 0, "ran": True}, {"epoch": 1, "ran": False}]}
    path = ckpt.save("A", arrays(1), facts)
    got_arrays, got = ckpt.load()
    assert_arrays_equal(got_arrays, arrays(1))
    assert math.isnan(got.pop("missing_value")) and math.isnan(facts.pop("missing_value"))
    assert got == facts and type(got["rng"]["state"]) is int
    # re-indenting the file is not a change; changing a fact is
    (path / "state.json").write_text(json.dumps(record_of(path), indent=4, sort_keys=True))
    assert ckpt.load()[1]["validated"] is True
    (path / "state.json").write_text((path / "state.json").read_text().replace('"validated": true',
                                                                               '"validated": false'))
    with pytest.raises(CheckpointError, match=r"state\.json does not match its checksum"):
        ckpt.load()


@pytest.mark.parametrize("bad, where", [({"betas": (0.9, 0.999)}, r"state\['betas'\] is a tuple"),
                                        ({"loss": np.float32(1.5)}, r"state\['loss'\] is a numpy\.float32"),
                                        ({"counts": {3: 1}}, r"state\['counts'\] has the key 3 of type int")])
def test_state_that_json_would_change_is_refused_when_saving(tmp_path: Path, bad: dict, where: str) -> None:
    with pytest.raises(TypeError, match=where):
        FileCheckpointer(tmp_path).save("A", arrays(1), {**state(1), **bad})
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.parametrize("tag, group", [("../escape", "model"), ("/tmp/escape", "model"), ("latest", "model"),
                                        (".hidden", "model"), ("A", "../escape"), ("A", "state.json/x")])
def test_a_tag_or_group_that_is_not_a_plain_name_is_refused(tmp_path: Path, tag: str, group: str) -> None:
    with pytest.raises(ValueError, match="must be a plain"):
        FileCheckpointer(tmp_path / "checkpoints").save(tag, {group: arrays(1)["model"]}, state(1))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", ["format", "groups", "state", "tag", "sequence", "directory", "record_sha256"])
def test_a_missing_key_in_state_json_is_a_clear_error(tmp_path: Path, key: str) -> None:
    ckpt = two_checkpoints(tmp_path)
    if key == "record_sha256":
        record = record_of(tmp_path / "B")
        del record[key]
        (tmp_path / "B" / "state.json").write_text(json.dumps(record))
    else:
        reseal(tmp_path / "B", lambda record: record.pop(key))
    with pytest.raises(CheckpointError, match=rf"checkpoint {tmp_path / 'B'} .*lacks '{key}'"):
        ckpt.load()


@pytest.mark.parametrize("fmt, message", [(1, "has format 1 .*this version reads format 2"),
                                          (3, "has format 3; this version reads format 2"),
                                          ("2", "has format '2'")])
def test_a_wrong_format_is_refused(tmp_path: Path, fmt: object, message: str) -> None:
    ckpt = two_checkpoints(tmp_path)
    if fmt == 1:  # exactly what earlier versions wrote: no library, no checksum of its own
        record = record_of(tmp_path / "B")
        legacy = {"format": 1, "tag": "B", "files": {e["file"]: e["sha256"] for e in record["groups"].values()},
                  "state": record["state"]}
        (tmp_path / "B" / "state.json").write_text(json.dumps(legacy))
    else:
        reseal(tmp_path / "B", lambda record: record.update(format=fmt))
    with pytest.raises(CheckpointError, match=message):
        ckpt.load()


def test_dropping_a_group_from_the_record_is_an_error_not_lost_state(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path)
    path = tmp_path / "B"
    record = record_of(path)
    del record["groups"]["optimizer"]
    (path / "state.json").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        ckpt.load()
    # with the checksum recomputed the record is consistent, and the caller's requirement catches it
    reseal(path, lambda record: None)
    with pytest.raises(CheckpointError, match=r"lacks the group\(s\) 'optimizer' \(it holds 'model', 'accumulator'\)"):
        ckpt.load(require=GROUPS)
    # and a group the record lists must be there
    (tmp_path / "A" / "accumulator.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"accumulator\.safetensors is missing"):
        ckpt.load(tmp_path / "A")


def test_require_names_the_groups_a_checkpoint_must_hold(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path)
    ckpt.save("A", {"model": arrays(1)["model"], "optimizer": {}}, state(1))
    got, _ = ckpt.load(require=("model", "optimizer"))
    assert got["optimizer"] == {}  # an empty group (SGD without momentum) is still a group
    with pytest.raises(CheckpointError, match=r"lacks the group\(s\) 'accumulator'"):
        ckpt.load(require=GROUPS)


@pytest.mark.parametrize("pointer", ["../outside", "ABSOLUTE", "B/../../outside", ".B.tmp-host-1"])
def test_latest_naming_a_path_outside_the_directory_is_refused(tmp_path: Path, pointer: str) -> None:
    ckpt = two_checkpoints(tmp_path / "checkpoints")
    outside = tmp_path / "outside"
    shutil.copytree(tmp_path / "checkpoints" / "B", outside)  # a valid checkpoint, just not in this directory
    shutil.copytree(tmp_path / "checkpoints" / "B", tmp_path / "checkpoints" / ".B.tmp-host-1")
    pointer = str(outside) if pointer == "ABSOLUTE" else pointer
    (tmp_path / "checkpoints" / "latest").write_text(pointer + "\n")
    with pytest.raises(CheckpointError, match=r"checkpoint pointer .*latest names .*(leaves|temporary)"):
        ckpt.load()
    loaded = ckpt.load_checkpoint()
    assert loaded.path == tmp_path / "checkpoints" / "B" and "latest names" in loaded.message


def test_a_checkpoint_symlinked_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path / "checkpoints")
    shutil.copytree(tmp_path / "checkpoints" / "B", tmp_path / "elsewhere")
    (tmp_path / "checkpoints" / "C").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "checkpoints" / "latest").write_text("C\n")
    with pytest.raises(CheckpointError, match=r"checkpoint .*/C is a symlink, not a directory"):
        ckpt.load()


@pytest.mark.parametrize("replace", ["symlink", "directory", "fifo"])
def test_files_that_are_not_regular_files_are_refused(tmp_path: Path, replace: str) -> None:
    ckpt = two_checkpoints(tmp_path / "checkpoints")
    path = tmp_path / "checkpoints" / "B"
    if replace == "symlink":  # same bytes, so only the kind of file can give it away
        shutil.copy(path / "model.safetensors", tmp_path / "copy.safetensors")
        (path / "model.safetensors").unlink()
        (path / "model.safetensors").symlink_to(tmp_path / "copy.safetensors")
        message = r"model\.safetensors is a symlink, not a regular file"
    elif replace == "directory":
        (path / "optimizer.safetensors").unlink()
        (path / "optimizer.safetensors").mkdir()
        message = r"optimizer\.safetensors is a directory, not a regular file"
    else:  # reading a FIFO would block for ever
        (path / "state.json").unlink()
        os.mkfifo(path / "state.json")
        message = r"state\.json is a FIFO, not a regular file"
    with pytest.raises(CheckpointError, match=message):
        ckpt.load()


@pytest.mark.parametrize("file", ["../../escape.safetensors", "/tmp/escape.safetensors", "other.safetensors"])
def test_a_group_file_outside_its_checkpoint_is_refused(tmp_path: Path, file: str) -> None:
    ckpt = two_checkpoints(tmp_path / "checkpoints")
    reseal(tmp_path / "checkpoints" / "B", lambda record: record["groups"]["model"].update(file=file))
    with pytest.raises(CheckpointError, match=rf"group 'model' names the file '{file}'"):
        ckpt.load()


# ------------------------------------------------------------------ kills
class Killed(BaseException):
    """Stands for SIGKILL: not an OSError, so no cleanup handler of the code runs."""


MUTATIONS = ("mkdir", "write", "rename", "replace", "unlink", "rmdir")


def save_killed_at(directory: Path, tag: str, kill_at: int, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Save step 3 under ``tag``, killed at the filesystem operation numbered ``kill_at``
    (counting from 0); True when the save finished first."""
    calls = 0

    def counting(name: str) -> Callable:
        real = getattr(os, name)

        def operation(*args, **kwargs):
            nonlocal calls
            calls += 1
            if calls > kill_at:
                raise Killed(f"{name} #{calls}")
            return real(*args, **kwargs)
        return operation

    with monkeypatch.context() as patch:
        for name in MUTATIONS:
            patch.setattr(os, name, counting(name))
        try:
            FileCheckpointer(directory).save(tag, arrays(3), state(3))
        except Killed:
            return False
    return True


@pytest.mark.parametrize("same_tag", [True, False])
def test_a_kill_at_any_point_of_a_save_leaves_latest_on_an_intact_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, same_tag: bool) -> None:
    for kill_at in range(1000):
        directory = tmp_path / f"kill{kill_at}"
        two_checkpoints(directory)
        completed = save_killed_at(directory, "B" if same_tag else "C", kill_at, monkeypatch)
        # a new process: strict load (no fallback) must find an intact checkpoint
        got, got_state = FileCheckpointer(directory).load()
        assert got_state["step"] in (2, 3), kill_at
        assert_arrays_equal(got, arrays(got_state["step"]))
        if completed:
            assert got_state["step"] == 3
        # the next save cleans up what the killed one left and prunes to keep=2
        FileCheckpointer(directory).save("D", arrays(4), state(4))
        assert hidden_entries(directory) == [], kill_at
        assert FileCheckpointer(directory).load()[1]["step"] == 4
        assert len([p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")]) == 2
        if completed:
            break
    assert completed and kill_at > 10  # every operation of a save was interrupted once


def test_resaving_a_tag_leaves_one_copy_of_it(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path, keep=3)
    path = ckpt.save("B", arrays(3), state(3))
    assert path.name == "B.2" and not (tmp_path / "B").exists()
    assert ckpt.load()[1]["step"] == 3
    assert [p.name for p in ckpt.checkpoints()] == ["B.2", "A"]


def test_a_dangling_latest_falls_back_to_the_newest_intact_checkpoint_and_says_so(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path, keep=3)
    ckpt.save("A", arrays(1), state(1))
    ckpt.save("B", arrays(2), state(2))
    ckpt.save("C", arrays(3), state(3))
    # what a kill between the two renames of earlier versions left: C moved aside, latest naming it
    os.rename(tmp_path / "C", tmp_path / f".C.old-{dead_pid()}")
    with pytest.raises(CheckpointError, match=rf"checkpoint {tmp_path / 'C'} does not exist"):
        ckpt.load()
    loaded = ckpt.load_checkpoint()
    assert loaded.path == tmp_path / "B" and loaded.state["step"] == 2
    assert_arrays_equal(loaded.arrays, arrays(2))
    assert [skip.path for skip in loaded.skipped] == [tmp_path / "C"]
    assert loaded.message == (f"checkpoint {tmp_path / 'C'} does not exist ({tmp_path / 'latest'} points to it); "
                              f"using the newest intact checkpoint {tmp_path / 'B'} instead")
    with pytest.warns(CheckpointFallbackWarning, match="using the newest intact checkpoint"):
        assert ckpt.load(fallback=True)[1]["step"] == 2
    # the next save puts the moved-aside copy back where it was (it may be the only one)
    assert ckpt.remove_leftovers() == [tmp_path / f".C.old-{dead_pid()}"]
    assert ckpt.load()[1]["step"] == 3


def test_a_corrupt_latest_falls_back_past_every_damaged_checkpoint(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path, keep=3)
    for step, tag in enumerate("ABC", start=1):
        ckpt.save(tag, arrays(step), state(step))
    data = bytearray((tmp_path / "C" / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF
    (tmp_path / "C" / "model.safetensors").write_bytes(bytes(data))
    (tmp_path / "B" / "state.json").write_text("{")
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match its checksum"):
        ckpt.load()
    loaded = ckpt.load_checkpoint()
    assert loaded.path == tmp_path / "A"
    assert "model.safetensors does not match its checksum" in loaded.skipped[0].reason
    (tmp_path / "A" / "state.json").unlink()
    with pytest.raises(CheckpointError, match=rf"no intact checkpoint in {tmp_path}: .*checksum"):
        ckpt.load_checkpoint()


def test_a_missing_latest_falls_back_only_when_asked(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path)
    (tmp_path / "latest").unlink()  # a kill between the first save's rename and its pointer
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        ckpt.load()
    loaded = ckpt.load_checkpoint()
    assert loaded.path == tmp_path / "B" and "latest is missing" in loaded.message
    with pytest.raises(CheckpointError, match=rf"no checkpoint found in {tmp_path / 'none'}"):
        FileCheckpointer(tmp_path / "none").load_checkpoint()


def test_leftovers_of_dead_processes_are_removed_and_of_live_ones_kept(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path)
    host, dead, alive = HOST, dead_pid(), os.getppid()

    def leftover(name: str, files: tuple[str, ...] = ("model.safetensors", "state.json")) -> Path:
        path = tmp_path / name
        path.mkdir()
        for file in files:
            (path / file).write_bytes(b"partial")
        return path

    gone = [leftover(f".E.tmp-{host}-{dead}"), leftover(f".E.tmp-{dead}"), leftover(f".A.del-{host}-{dead}"),
            leftover(f".B.old-{dead}")]
    (tmp_path / f".latest.tmp-{host}-{dead}").write_text("E\n")
    kept = [leftover(f".F.tmp-{host}-{alive}"),  # a live writer
            leftover(f".G.tmp-otherhost-{dead}"),  # cannot tell from here whether it is alive
            leftover(f".H.tmp-{host}-{dead}", ("notes.txt",)),  # not what a save writes: a user's
            leftover(f".I.old-{alive}")]
    ckpt.save("C", arrays(3), state(3))
    assert hidden_entries(tmp_path) == sorted(path.name for path in kept)
    assert not any(path.exists() for path in gone)
    assert ckpt.load()[1]["step"] == 3


def test_pruning_removes_only_checkpoints_this_library_wrote(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path, keep=2)
    ckpt.save("A", arrays(1), state(1))
    shutil.copytree(tmp_path / "A", tmp_path / "backup-of-A")  # the user's copy of a checkpoint
    (tmp_path / "my_notes").mkdir()
    (tmp_path / "my_notes" / "todo.txt").write_text("look at A")
    (tmp_path / "README").write_text("mine")
    (tmp_path / "evil").symlink_to(tmp_path / "my_notes")
    for step, tag in enumerate("BCDE", start=2):
        ckpt.save(tag, arrays(step), state(step))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D", "E", "README", "backup-of-A", "evil", "latest",
                                                          "my_notes"]
    assert (tmp_path / "my_notes" / "todo.txt").read_text() == "look at A"
    assert [p.name for p in ckpt.checkpoints()] == ["E", "D"]


def test_a_damaged_checkpoint_does_not_crowd_out_a_good_one_when_pruning(tmp_path: Path) -> None:
    ckpt = two_checkpoints(tmp_path)
    (tmp_path / "B" / "model.safetensors").write_bytes(b"cut")  # truncated: B cannot be resumed from
    ckpt.save("C", arrays(3), state(3))
    assert {p.name for p in ckpt.checkpoints()} == {"A", "B", "C"}  # A kept as the second good one
    shutil.rmtree(tmp_path / "C")
    assert ckpt.load_checkpoint().path == tmp_path / "A"


# ------------------------------------------------------------------ full disks, read-only, files in the way
@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """failing(directory, code, operations): those os operations raise OSError(code) for paths
    (or descriptors of files) under ``directory``, as a full or read-only disk would."""
    def under(target: object, directory: Path, follow_fd: bool = False) -> bool:
        if follow_fd and isinstance(target, int):
            try:
                target = os.readlink(f"/proc/self/fd/{target}")
            except OSError:
                return False
        return isinstance(target, (str, os.PathLike)) and \
            os.path.abspath(os.fspath(target)).startswith(str(directory.resolve()))

    def arm(directory: Path, code: int, operations: tuple[str, ...], name_part: str = "") -> None:
        for name in operations:
            real = getattr(os, name)

            def operation(*args, _real=real, _name=name, **kwargs):
                target = args[0]
                hit = under(target, directory, follow_fd=_name in ("write", "fsync"))
                if _name == "open" and not args[1] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                    hit = False
                if hit and name_part:
                    path = os.readlink(f"/proc/self/fd/{target}") if isinstance(target, int) else os.fspath(target)
                    hit = name_part in path
                if hit:
                    raise OSError(code, os.strerror(code), os.fspath(target) if not isinstance(target, int) else None)
                return _real(*args, **kwargs)
            monkeypatch.setattr(os, name, operation)
    yield arm


@pytest.mark.parametrize("operation", ["write", "fsync"])
def test_a_full_disk_is_a_one_line_error_and_keeps_the_last_good_checkpoint(
        tmp_path: Path, failing: Callable[..., None], operation: str) -> None:
    ckpt = two_checkpoints(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    failing(tmp_path, errno.ENOSPC, (operation,))
    with pytest.raises(CheckpointError) as error:
        ckpt.save("C", arrays(3), state(3))
    message = str(error.value)
    assert message == (f"cannot save checkpoint {tmp_path / 'C'}: No space left on device (ENOSPC); "
                       f"{tmp_path / 'latest'} still points to B")
    assert isinstance(error.value.__cause__, OSError)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no half-written directory
    assert ckpt.load()[1]["step"] == 2


def test_a_full_disk_while_switching_latest_leaves_the_previous_checkpoint_current(
        tmp_path: Path, failing: Callable[..., None]) -> None:
    ckpt = two_checkpoints(tmp_path)
    failing(tmp_path, errno.ENOSPC, ("write",), name_part=".latest.tmp")
    with pytest.raises(CheckpointError, match=rf"cannot update {tmp_path / 'latest'}: No space left on device"):
        ckpt.save("C", arrays(3), state(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["A", "B", "latest"]
    assert ckpt.load()[1]["step"] == 2


@pytest.mark.parametrize("code, cause", [(errno.EROFS, r"Read-only file system \(EROFS\)"),
                                         (errno.EACCES, r"Permission denied \(EACCES\)")])
def test_a_read_only_directory_is_a_one_line_error(tmp_path: Path, failing: Callable[..., None], code: int,
                                                   cause: str) -> None:
    ckpt = two_checkpoints(tmp_path)
    failing(tmp_path, code, ("mkdir", "open", "rename", "replace", "unlink", "rmdir"))
    with pytest.raises(CheckpointError, match=rf"^cannot save checkpoint {tmp_path / 'C'}: {cause}; "
                                              rf".*latest still points to B$"):
        ckpt.save("C", arrays(3), state(3))
    assert ckpt.load()[1]["step"] == 2


@pytest.mark.parametrize("where", ["directory", "parent"])
def test_a_checkpoint_directory_that_is_a_regular_file_is_a_one_line_error(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "run"
    blocker.write_text("my data")
    directory = blocker if where == "directory" else blocker / "checkpoints"
    with pytest.raises(CheckpointError, match=rf"^cannot save checkpoints in {directory}: {blocker} is a regular "
                                              r"file, not a directory$"):
        FileCheckpointer(directory).save("A", arrays(1), state(1))
    assert blocker.read_text() == "my data"
