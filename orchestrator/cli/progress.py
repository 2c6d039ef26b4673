"""``orch run``'s live display for many hosts: the fleet summary of :class:`orchestrator.progress.FleetTracker`
(one line per group, the slowest and the failing hosts by name), redrawn in place on stderr; per-host bars
(``render.RunProgress``) stay for small runs and ``--verbose``."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from orchestrator.cli.render import err_console, visible
from orchestrator.progress import FleetTracker


class FleetProgress:
    """Implements runner.Observer. ``group_of``: selected host -> inventory group; ``console``: where to draw
    (default stderr; tests pass a fixed-width terminal); draws nothing when disabled (``--json``). Lines longer
    than the terminal are cut with an ellipsis, never wrapped."""

    def __init__(self, group_of: dict[str, str], *, enabled: bool = True, console: Console | None = None) -> None:
        self.enabled = enabled
        self.tracker = FleetTracker(dict(group_of))
        self._live = Live(
            get_renderable=self.renderable,
            console=console or err_console(),
            refresh_per_second=2,
            transient=True,  # cleared before the result summary is printed (stdout)
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def renderable(self) -> Group:
        return Group(
            *(Text(visible(ln), no_wrap=True, overflow="ellipsis") for ln in self.tracker.lines(time.monotonic()))
        )

    def __enter__(self) -> FleetProgress:
        if self.enabled:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._live.__exit__(None, None, None)

    def host_state(self, host: str, state: str, detail: str = "") -> None:
        self.tracker.host_state(host, state, detail, time.monotonic())

    def case_progress(self, host: str, done: int, total: int | None, case: dict[str, Any] | None) -> None:
        self.tracker.case_progress(host, done, total, time.monotonic())
