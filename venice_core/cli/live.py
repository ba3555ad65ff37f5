"""A followed rollout drawn live in a terminal (rich): what happened scrolls above, what is going on now (the steps
running or waiting, each region's ingestion) is redrawn below it."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from venice_core.controller.versions import RegionProgress
from venice_core.orchestration.airflow.run_following import describe_progress

STATE_STYLES = {"running": "cyan", "up_for_reschedule": "yellow", "awaiting_input": "magenta", "up_for_retry": "red"}


class LiveView:
    """A `FollowView` for a terminal; use it as a context manager, so the live part is gone before an error line."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console()
        self.active: dict[str, str] = {}
        self.skipped = 0
        self.regions: dict[str, RegionProgress] = {}
        self.live = Live(console=self.console, get_renderable=self._render, refresh_per_second=4, transient=True)

    def __enter__(self) -> LiveView:
        self.live.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.live.stop()

    def line(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def steps(self, active: dict[str, str], skipped: int) -> None:
        self.active, self.skipped = active, skipped

    def progress(self, regions: dict[str, RegionProgress]) -> None:
        self.regions = regions

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        for task_id, state in self.active.items():
            parts.append(Text.assemble(f"  {task_id} ", (state.replace("_", " "), STATE_STYLES.get(state, ""))))
        if self.skipped:
            parts.append(Text(f"  {self.skipped} step{'s' * (self.skipped != 1)} skipped", style="dim"))
        if self.regions:
            table = Table.grid(padding=(0, 1))
            for region, p in self.regions.items():
                done = p.total == 0  # an empty push: nothing to ingest
                bar = ProgressBar(total=1 if done else p.total, completed=1 if done else p.records, width=30)
                table.add_row(f"  {region}", bar, describe_progress(p))
            parts.append(table)
        return Group(*parts)
