"""The monitor's stop popup (Burn's, on ``q``): stop at the window's end with a checkpoint, kill now
without one, or cancel. It answers the key chosen (``s``, ``k`` or ``c``) to the app, which acts."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["StopPopup"]


class StopPopup(ModalScreen[str]):
    """Three choices over the monitor; dismissed with ``"s"``, ``"k"`` or ``"c"``."""

    DEFAULT_CSS = """
    StopPopup { align: center middle; }
    StopPopup > Vertical { width: 72; height: auto; border: round $warning; padding: 0 1; background: $panel; }
    """
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("s", "choose('s')", "stop at the window's end"),
        Binding("k", "choose('k')", "kill now"),
        Binding("c", "choose('c')", "cancel"),
        Binding("escape", "choose('c')", "cancel", show=False),
        Binding("q", "choose('c')", "cancel", show=False),
    ]

    def __init__(self, last_checkpoint: str | None) -> None:
        super().__init__()
        self.last_checkpoint = last_checkpoint

    def compose(self) -> ComposeResult:
        resume_from = (f"the last one saved, {self.last_checkpoint}" if self.last_checkpoint
                       else "the start: none is saved yet")
        with Vertical() as box:
            box.border_title = "stop the run?"
            yield Static(
                "[s] stop at the end of this window, with a checkpoint\n"
                "    (maccum train --resume goes on from it)\n"
                "[k] kill now: stop after the micro-batch in progress, without a\n"
                f"    checkpoint; a resume goes on from {resume_from}\n"
                "[c] cancel: go on training", id="choices", markup=False)

    def action_choose(self, key: str) -> None:
        self.dismiss(key)
