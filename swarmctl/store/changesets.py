"""Changeset and blob ids: BLAKE3-256 over a domain-separated canonical encoding.

The domain string is BLAKE3's key-derivation context, so a changeset id can never equal a blob
id, nor the hash of anything else, even for the same bytes. The canonical encoding is JSON with
sorted keys, no spaces and UTF-8 text: the same changeset always hashes to the same id.
"""

from __future__ import annotations

import json
from typing import Any

CHANGESET_DOMAIN = "swarmops:changeset:v1"
BLOB_DOMAIN = "swarmops:blob:v1"


def _hash(domain: str, data: bytes) -> str:
    from blake3 import blake3  # imported here: only changeset creation needs it

    return blake3(data, derive_key_context=domain).hexdigest()


def blob_id(content: bytes) -> str:
    return _hash(BLOB_DOMAIN, content)


def canonical(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def changeset_id(
    *,
    message: str,
    parents: list[str],
    actor: str,
    at: str,
    metadata: dict[str, str],
    files: dict[str, str],
) -> str:
    """The id of a changeset; `files` maps each path to its blob id."""
    return _hash(
        CHANGESET_DOMAIN,
        canonical(
            {
                "message": message,
                "parents": parents,
                "actor": actor,
                "at": at,
                "metadata": metadata,
                "files": files,
            }
        ),
    )
