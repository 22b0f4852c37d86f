"""Progress of a pipeline run. Each step is a Spark job group; while it runs, a thread polls
Spark's status tracker for the step's tasks (done / total over all its stages) and shows them as
a bar on a terminal. Every step also ends with one line: what it did and how long it took."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bars

if TYPE_CHECKING:
    from pyspark import SparkContext

POLL_SECONDS = 0.25


class Progress:
    """Steps of a run, on `console`: live bars when it is a terminal (or into `bars`, a rich
    Progress someone else shows), one line per finished step in any case."""

    def __init__(self, console: Console | None = None, *, bars: Bars | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._own = bars is None
        self.bars = bars or Bars(
            TextColumn("{task.description:<40}"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("tasks"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=quiet or not self.console.is_terminal,
        )
        self.context: SparkContext | None = None

    def __enter__(self) -> Progress:
        if self._own:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._own:
            self.bars.stop()

    def attach(self, context: SparkContext) -> None:
        """Poll this Spark context's status tracker during steps."""
        self.context = context

    def note(self, text: str) -> None:
        """One line of output (not shown when quiet)."""
        if not self.quiet:
            self.console.print(text, markup=False, highlight=False)

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """Run the body as one step: its Spark jobs are polled for a live bar."""
        started = time.perf_counter()
        task = self.bars.add_task(description, total=None)
        group = f"pqs-{uuid.uuid4().hex[:8]}"
        stop = threading.Event()
        poller = None
        if self.context is not None:
            self.context.setJobGroup(group, description)
            poller = threading.Thread(target=self._poll, args=(group, task, stop), daemon=True)
            poller.start()
        try:
            yield
        finally:
            stop.set()
            if poller is not None:
                poller.join()
            self.bars.remove_task(task)
        self.note(f"{description}: {time.perf_counter() - started:.1f} s")

    def _poll(self, group: str, task: TaskID, stop: threading.Event) -> None:
        assert self.context is not None
        tracker = self.context.statusTracker()
        while not stop.wait(POLL_SECONDS):
            total = done = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        total += stage.numTasks
                        done += stage.numCompletedTasks
            if total:
                self.bars.update(task, total=total, completed=done)


def quiet_progress() -> Progress:
    """A Progress that shows nothing (tests)."""
    return Progress(Console(quiet=True), quiet=True)
