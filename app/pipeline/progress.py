"""Progress of a pipeline run, in steps a user can follow: a run names its steps before it starts
(`plan`: archive's "find new history", "write Parquet" ...), so the count of steps is known up
front and never changes; a step that turns out not to be needed is passed over with a reason
(`skip`), never dropped from the count. A step may say how many rows it handled.

On a terminal, one live line per run: the run, `step k/N` and the step's name, a bar of the steps
done, the rows of the step and the run's rows per second, and the time since the run began. In
any case, one line per step as it ends (or is skipped): its rows, its time and its rows per
second. Spark's own stages and tasks are not shown: Spark adds stages as a job goes, so a count
of them grows and a bar of them moves backwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bars

if TYPE_CHECKING:
    from pyspark import SparkContext


@dataclass
class Step:
    """A step while it runs; its body sets `rows` once it knows how many it handled."""

    name: str
    rows: int | None = None


@dataclass
class _Run:
    title: str
    steps: list[str]
    task: TaskID
    next: int = 0  # index of the next step to run
    rows: int = 0  # rows of the finished steps that counted rows
    rows_seconds: float = 0.0  # and their time

    def head(self, step: str = "") -> str:
        """What goes before the running step's name: `<title> [step ]k/N: `, or nothing for a
        step run on its own (outside a plan)."""
        if self.steps == [self.title]:
            return ""
        return f"{self.title} {step}{self.next}/{len(self.steps)}" + (": " if step else " ")


class Progress:
    """Steps of runs, on `console`: a live line on a terminal (or in `bars`, a rich Progress
    someone else shows), one line per finished step in any case."""

    def __init__(self, console: Console | None = None, *, bars: Bars | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._own = bars is None
        self.bars = bars or Bars(
            TextColumn("{task.fields[head]}{task.description:<34}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[rows]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=quiet or not self.console.is_terminal,
        )
        self.context: SparkContext | None = None
        self._run: _Run | None = None

    def __enter__(self) -> Progress:
        if self._own:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_run()
        if self._own:
            self.bars.stop()

    def attach(self, context: SparkContext) -> None:
        """Name the Spark jobs of each step after it (in Spark's UI and logs)."""
        self.context = context

    def note(self, text: str) -> None:
        """One line of output (not shown when quiet)."""
        if not self.quiet:
            self.console.print(text, markup=False, highlight=False)

    def plan(self, title: str, steps: Sequence[str]) -> None:
        """Begin a run of `title` made of `steps`, in this order: the step count shown from now on."""
        if len(set(steps)) != len(steps) or not steps:
            raise ValueError(f"a run's steps are distinct and at least one: {steps}")
        self._end_run()
        head = "" if list(steps) == [title] else f"{title} step 1/{len(steps)}: "
        task = self.bars.add_task(steps[0], total=len(steps), head=head, rows="")
        self._run = _Run(title, list(steps), task)

    def skip(self, name: str, why: str) -> None:
        """Pass over the planned step `name`: it is not needed (`why`)."""
        run = self._advance(name)
        self.bars.update(run.task, description=f"{name}: skipped", head=run.head("step "))
        self.note(f"{run.head()}{name}: skipped, {why}")
        self._show(run, run.next)

    @contextmanager
    def step(self, name: str, rows: int | None = None) -> Iterator[Step]:
        """Run the body as the planned step `name` (a step outside any plan is a run of one
        step). The body may set the yielded Step's `rows`."""
        if self._run is None or name not in self._run.steps:
            self.plan(name, [name])
        run = self._advance(name)
        self.bars.update(run.task, description=name, head=run.head("step "))
        self._show(run, run.next - 1, rows)
        if self.context is not None:
            self.context.setJobGroup(f"pqs-{run.title}-{run.next}", f"{run.title}: {name}")
        current = Step(name, rows)
        started = time.perf_counter()
        yield current
        seconds = time.perf_counter() - started
        line = f"{run.head()}{name}: "
        if current.rows is None:
            line += f"{seconds:.1f} s"
        else:
            run.rows += current.rows
            run.rows_seconds += seconds
            line += f"{current.rows:,} rows in {seconds:.1f} s ({rate(current.rows, seconds)})"
        self.note(line)
        self._show(run, run.next)

    def _advance(self, name: str) -> _Run:
        run = self._run
        if run is None or name not in run.steps[run.next :]:
            raise ValueError(f"step {name!r} is not one of the steps still to come: {run and run.steps[run.next :]}")
        run.next = run.steps.index(name) + 1
        return run

    def _show(self, run: _Run, completed: int, rows: int | None = None) -> None:
        """The live line: `completed` steps, the rows of the running step if known, the run's rate."""
        parts = [f"{rows:,} rows"] if rows is not None else []
        if run.rows:
            parts.append(rate(run.rows, run.rows_seconds))
        self.bars.update(run.task, completed=completed, rows=", ".join(parts))
        self.bars.refresh()  # every change is drawn, however short the step

    def _end_run(self) -> None:
        if self._run is not None:
            self.bars.remove_task(self._run.task)
        self._run = None


def rate(rows: int, seconds: float) -> str:
    """Rows per second, for people."""
    return f"{rows / seconds:,.0f} rows/s" if seconds > 0 else "- rows/s"


def quiet_progress() -> Progress:
    """A Progress that shows nothing (tests)."""
    return Progress(Console(quiet=True), quiet=True)
