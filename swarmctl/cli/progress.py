"""Progress for people: a Rich display on stderr of the step in flight, only on a terminal.

Tools report progress through `Context.progress` (a callable taking one dict per event; see
swarmctl/tools/workflow/execute.py); this is the CLI's reporter. Rich is imported at the first
event, so commands that report nothing never pay for it. stdout keeps only the envelope.
"""

from __future__ import annotations

from typing import Any

_VERBS = {"run": "running", "rollback": "undoing"}


class StepProgress:
    def __init__(self, stream: Any, color: bool = True) -> None:
        self.stream = stream
        self.color = color
        self._progress: Any = None
        self._task: Any = None
        self._phase: str | None = None
        self._label = ""  # the step in flight, as its line says

    def __call__(self, event: dict[str, Any]) -> None:
        try:
            self._show(event)
        except Exception:  # progress is a courtesy: it must never break the command
            pass

    def _show(self, event: dict[str, Any]) -> None:
        from swarmctl.cli.inert import as_markup

        # Names come from the workflow file: shown as text, never as markup or terminal controls.
        event = {k: as_markup(v) if isinstance(v, str) else v for k, v in event.items()}
        if self._progress is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream, stderr=True, no_color=not self.color),
            )
            self._progress.start()
        phase = event["phase"]
        if self._task is None or phase != self._phase:
            self._phase = phase
            title = f"{event['workflow']}: {'rollback' if phase == 'rollback' else 'run'}"
            self._task = self._progress.add_task(title, total=event["count"])
        label = self._label = f"{_VERBS.get(phase, phase)} step {event['index']} {event['step']}"
        if event["event"] == "start":
            self._progress.update(self._task, description=label, completed=event["position"] - 1)
        else:
            self._progress.update(self._task, description=f"{label}: {event['status']}", completed=event["position"])

    def close(self, interrupted: bool = False) -> None:
        """Leave the last line on the terminal; after Ctrl-C or SIGTERM, saying so (it went on
        showing the step as running, which it was not any more)."""
        if self._progress is not None:
            if interrupted and self._task is not None:
                try:
                    self._progress.update(self._task, description=f"{self._label}: interrupted")
                except Exception:  # progress is a courtesy: it must never break the command
                    pass
            self._progress.stop()
            self._progress = None
