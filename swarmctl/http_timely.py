"""A request to `swarmctl mcp --http` must arrive whole in time.

uvicorn waits for a request's head and body as long as the client likes: a client that opens
connections and sends a header line now and then (slowloris), or nothing at all, held each one
for ever, and enough of them leave the server no descriptor for anyone else. Here each request
must arrive whole (head and body) within SWARMCTL_HTTP_READ_TIMEOUT seconds of the connection
or of the response before it on the same connection; else the connection is closed. The time a
call then takes to answer is not limited, nor is a stream's (the SSE GET, whose request is
whole at once).

Imported only by `swarmctl mcp --http` (mcp_http.serve), with uvicorn.
"""

from __future__ import annotations

from typing import Any

from swarmctl import limits

DEFAULT_READ_TIMEOUT_S = 10.0


def read_timeout_s() -> float:
    """SWARMCTL_HTTP_READ_TIMEOUT (default 10 s); a bad value is E_INVALID_ARG at start-up."""
    return limits.seconds("SWARMCTL_HTTP_READ_TIMEOUT", DEFAULT_READ_TIMEOUT_S, 0.1, 3600, "0.1 to 3600")


def timely_h11(timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request is not whole `timeout_s` after
    it was opened or after its last response was sent."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimelyH11(H11Protocol):
        _late: Any = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request on this connection gets the same time

        def connection_lost(self, exc: Exception | None) -> None:
            if self._late is not None:
                self._late.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._late is not None:
                self._late.cancel()
            self._late = self.loop.call_later(timeout_s, self._too_late)

        def _too_late(self) -> None:
            self._late = None
            # IDLE: no whole head yet; SEND_BODY: the body is still coming. (DONE: the request is
            # whole and being answered, however long that takes.)
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                self.transport.close()

    return TimelyH11


__all__ = ["DEFAULT_READ_TIMEOUT_S", "read_timeout_s", "timely_h11"]
