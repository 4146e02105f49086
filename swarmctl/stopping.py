"""How `swarmctl mcp` (stdio) stops on Ctrl-C or SIGTERM: at once, whether a tool runs or the
server waits for the client's next line (mcp.serve). And `interrupts_held`: where an interrupt
must wait until what was written is answered (`call --lines`, a command's envelope)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator

from swarmctl.envelope import Terminated, terminating_signals

if TYPE_CHECKING:
    import anyio


class Stop:
    """How Ctrl-C or SIGTERM stops the stdio server at once.

    While a tool runs (on the event loop's thread, as the CLI runs it), as they stop a command:
    KeyboardInterrupt in the tool, so that its write rolls back and a workflow's command is
    killed and its step saved; the door answers the call E_INTERRUPTED (`mcp.build_server`),
    and once that answer is written (`answered`), the serving scope is cancelled. Between
    calls, the serving scope is cancelled from the event loop at once: an exception raised
    wherever the loop happened to be would break anyio's state (and asyncio's runner, left to
    itself, would only cancel the serving task, which waited for the client's next line). A
    second signal is raised at once. A signal that was ignored (a background job's SIGINT)
    stays ignored. `raise_if_stopped`, after the loop: the signal, as the CLI takes it."""

    def __init__(self) -> None:
        self.came: int | None = None
        self._calling = False
        self._answer_then_stop: Any = None  # the id of the call that was stopped, until it is answered
        self._serving: anyio.CancelScope | None = None
        self._cancel: Callable[[], None] | None = None

    @contextmanager
    def calling(self, request_id: Any) -> Iterator[None]:
        """While the tool of request `request_id` runs. An interrupt that stops it (raised by
        `on_signals`, or by the tool's own SIGTERM handler: a workflow's command) stops the
        server once that request is answered."""
        import signal

        self._calling = True
        try:
            yield
        except KeyboardInterrupt as exc:
            self.came = self.came or (signal.Signals[exc.signal_name] if isinstance(exc, Terminated) else signal.SIGINT)
            self._answer_then_stop = request_id
            raise
        finally:
            self._calling = False

    def arm(self, serving: anyio.CancelScope) -> None:
        import asyncio

        loop = asyncio.get_running_loop()

        def cancel() -> None:  # from a signal handler: the loop runs it, as asyncio's runner does
            loop.call_soon_threadsafe(serving.cancel)

        self._serving, self._cancel = serving, cancel

    def answered(self, request_id: Any) -> None:
        """The answer to `request_id` was written: if it was the stopped call's, the server
        stops now. (Not at any answer: one written before may only now be done, the loop having
        waited for the stopped tool.)"""
        if self._answer_then_stop is not None and request_id == self._answer_then_stop and self._serving is not None:
            self._serving.cancel()

    @contextmanager
    def on_signals(self) -> Iterator[None]:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def stop(signum: int, frame: Any) -> None:
            again, self.came = self.came is not None, signum
            if self._calling and not again:
                self.raise_if_stopped()  # in the tool: `calling` sees it go by
            cancelled = False
            if self._cancel is not None:
                try:
                    self._cancel()
                    cancelled = True
                except RuntimeError:  # the event loop has closed: nothing is left to cancel
                    pass
            if again or not cancelled:
                self.raise_if_stopped()

        previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, *terminating_signals())}
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:
                signal.signal(signum, stop)
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @staticmethod
    def only_interrupts(exc: BaseException) -> bool:
        """Whether `exc` is the interrupt, or the cancellation it caused, alone (anyio may wrap
        them in exception groups): anything else is a failure of its own, never hidden by the stop."""
        import asyncio

        if isinstance(exc, BaseExceptionGroup):
            return all(Stop.only_interrupts(e) for e in exc.exceptions)
        return isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))

    @staticmethod
    def stdout_failed(exc: BaseException) -> OSError | None:
        """The OSError of a write to stdout (a full disk, a closed pipe) that alone ended the
        server, out of the exception groups anyio may wrap it in; else None."""
        if isinstance(exc, BaseExceptionGroup):
            found = [Stop.stdout_failed(e) for e in exc.exceptions]
            return found[0] if found and all(found) else None
        return exc if isinstance(exc, OSError) and exc.filename is None else None

    def raise_if_stopped(self) -> None:
        import signal

        if self.came is not None and self.came != signal.SIGINT:
            raise Terminated(signal.Signals(self.came).name)
        if self.came is not None:
            raise KeyboardInterrupt


@contextmanager
def interrupts_held(deliver: bool = True) -> Iterator[None]:
    """SIGINT and SIGTERM held back within, then handled as they would have been (`deliver`) or
    not at all: between a write's commit and the last of its answer, an interrupt would leave a
    change that was made unanswered (`call --lines` delivers it after a group's envelopes; a
    command whose envelope says what it wrote has nothing left to stop, and drops it). A second
    one is handled at once (a reader that stopped reading must not keep swarmctl from being
    stopped). Python's handlers are swapped (a signal mask is a thread's own, and another
    thread may take a signal sent to the process); in the main thread only, where they run."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def handle(signum: int) -> None:
        restore()
        handler = previous[signum]
        if callable(handler):
            handler(signum, None)  # Python's for SIGINT raises KeyboardInterrupt, as the CLI's for SIGTERM does
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)

    def hold(signum: int, frame: Any) -> None:
        came.append(signum)
        if len(came) > 1:
            handle(signum)

    # An ignored one (`nohup`'s SIGHUP, a background job's SIGINT) stays ignored: held, it would
    # count as the first of two and let the next one through at once.
    previous = {signum: signal.signal(signum, hold) for signum in (signal.SIGINT, *terminating_signals())
                if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield
    finally:
        restore()
        if len(came) == 1 and deliver:
            handle(came[0])
