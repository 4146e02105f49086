"""Running a tool: the one path both doors take from a request to an envelope."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from swarmctl.context import Context
from swarmctl.envelope import Meta, SwarmError, failure, internal_error, success
from swarmctl.spec import Tool, plain
from swarmctl.store import os_failure, translate
from swarmctl.store.errors import corrupt as store_corrupt


def run(tool: Tool, request: Any, ctx: Context) -> dict[str, Any]:
    """Run `tool` on a validated request and return its envelope. Never raises."""
    started = time.perf_counter()
    ctx.readonly = not tool.mutates and tool.needs_store
    try:
        try:
            result = plain(tool.run(ctx, request))
            error = None
        except sqlite3.Error as exc:
            raise translate(exc, ctx._store.path if ctx._store else None) from exc
        except ValueError as exc:
            # Text in the store that is not UTF-8, or a JSON column that is not JSON: damage.
            if ctx._store is None or not isinstance(exc, (UnicodeDecodeError, json.JSONDecodeError)):
                raise
            raise store_corrupt(f"the store holds a value it cannot read: {exc}", ctx._store.path) from exc
        except OSError as exc:
            typed = os_failure(exc, ctx._store.path if ctx._store else None)
            if typed is None:
                raise
            raise typed from exc
    except SwarmError as exc:
        error = exc
    except Exception as exc:  # a bug: say so, with an id to find it by
        error = internal_error(exc)
    finally:
        ctx.close()
    meta = Meta(
        repo=ctx.repo_path,
        elapsed_ms=int((time.perf_counter() - started) * 1000),
        resolved=ctx.resolved,
        auth=ctx.auth,
    )
    return failure(tool.name, error, meta) if error else success(tool.name, result, meta)


def run_json(tool: Tool, arguments: Any, ctx: Context) -> dict[str, Any]:
    """Run `tool` on JSON arguments (MCP, `swarmctl call`): validated by the request type."""
    started = time.perf_counter()
    from swarmctl import schemas

    try:
        request = schemas.validate_request(tool, arguments)
    except SwarmError as exc:
        meta = Meta(elapsed_ms=int((time.perf_counter() - started) * 1000), auth=ctx.auth)
        return failure(tool.name, exc, meta)
    return run(tool, request, ctx)
