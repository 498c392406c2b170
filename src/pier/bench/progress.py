"""The live display while a benchmark runs: one bar per run with its requests, errors and output tokens/s."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from pier.bench.request_record import RequestRecord


class RunProgress:
    """Counts one run's finished requests into its bar."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task
        self.started = time.perf_counter()
        self.done = 0
        self.errors = 0
        self.tokens = 0

    def observe(self, record: RequestRecord) -> None:
        self.done += 1
        if record.ok:
            self.tokens += record.output_tokens
        else:
            self.errors += 1
        elapsed = time.perf_counter() - self.started
        rate = self.tokens / elapsed if elapsed > 0 else 0.0
        self.progress.update(self.task, advance=1, errors=self.errors, rate=rate)

    def close(self) -> None:
        """A run that stopped at its deadline, or without a request count, shows as complete."""
        self.progress.update(self.task, total=self.done, completed=self.done)


class LiveProgress:
    def __init__(self, console: Console, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[errors]} errors"),
            TextColumn("{task.fields[rate]:.1f} out tok/s"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
        )

    def run(self, description: str, total: int | None) -> RunProgress:
        return RunProgress(self.progress, self.progress.add_task(description, total=total, errors=0, rate=0.0))

    def __enter__(self) -> LiveProgress:
        self.progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.progress.stop()
