"""How `swarmctl mcp` (stdio) stops on Ctrl-C or SIGTERM: at once, whether a tool runs or the
server waits for the client's next line (mcp.serve)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from swarmctl.envelope import Terminated

if TYPE_CHECKING:
    import anyio


class Stop:
    """How Ctrl-C or SIGTERM stops the stdio server at once. While a tool runs (on the event
    loop's thread, as the CLI runs it), as they stop a command: KeyboardInterrupt in the tool,
    so its write rolls back and a workflow's command is killed and its step saved. Between
    calls, by cancelling the serving scope from the event loop: an exception raised wherever
    the loop happened to be would break anyio's state (asyncio's runner, left to itself, would
    only cancel the serving task, and that waited for the client's next line). A second signal
    is raised at once. A signal that was ignored (a background job's SIGINT) stays ignored."""

    def __init__(self) -> None:
        self.came: int | None = None
        self._calling = False
        self._cancel: Callable[[], None] | None = None

    @contextmanager
    def calling(self) -> Iterator[None]:
        self._calling = True
        try:
            yield
        finally:
            self._calling = False

    def arm(self, serving: anyio.CancelScope) -> None:
        import asyncio

        loop = asyncio.get_running_loop()

        def cancel() -> None:  # from a signal handler: the loop runs it, as asyncio's runner does
            loop.call_soon_threadsafe(serving.cancel)

        self._cancel = cancel

    @contextmanager
    def on_signals(self) -> Iterator[None]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, frame: Any) -> None:
            again, self.came = self.came is not None, signum
            cancelled = False
            if self._cancel is not None:
                try:
                    self._cancel()
                    cancelled = True
                except RuntimeError:  # the event loop has closed: nothing is left to cancel
                    pass
            if again or self._calling or not cancelled:
                self.raise_if_stopped()

        previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, stop)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def raise_if_stopped(self) -> None:
        import signal

        if self.came == signal.SIGTERM:
            raise Terminated()
        if self.came is not None:
            raise KeyboardInterrupt
