"""The normaliser of recorded outputs: the one place that knows what differs between runs.

The reference pages' examples (swarmctl/gen/examples.py) and the golden snapshots of the tests
(tests/golden.py) are both normalised here, so that they change only when the output does.

What differs from run to run is replaced, as in the reference pages: the temporary directory a
run used by [tmp], changeset ids (full, or the short form names.short_id prints) by [c1], [c2],
... in order of first appearance, a shorter prefix of a changeset id seen in the transcript (as
a user types one: `ref set main 3f9a1c`) by its id's placeholder and its length ([c1:6]), times
by [at] (as tables show them, in local time: [local time]), elapsed_ms by "[elapsed_ms]", the version by [version], workflow ids by [w1], [w2],
..., blast-radius preview ids by [p1], [p2], ..., a command's duration_ms by "[duration_ms]",
process ids by [pid] and op hashes (the op log's hash chain: an op's `hash`) by [hash]. Other
run-dependent ids get their own placeholders here, and only here.
"""

from __future__ import annotations

import re
from pathlib import Path

from swarmctl import version
from swarmctl.names import ID_HEX_LEN, MIN_PREFIX_LEN, SHORT_ID_LEN

# Changeset ids: full, short (as names.short_id prints them), and any shorter prefix a user types.
_ALONE = r"(?<![0-9a-zA-Z]){}(?![0-9a-zA-Z])"
_HEX_ID = re.compile(_ALONE.format(f"[0-9a-f]{{{SHORT_ID_LEN}}}(?:[0-9a-f]{{{ID_HEX_LEN - SHORT_ID_LEN}}})?"))
_FULL_ID = re.compile(_ALONE.format(f"[0-9a-f]{{{ID_HEX_LEN}}}"))
_HEX_WORD = re.compile(_ALONE.format(f"[0-9a-f]{{{MIN_PREFIX_LEN},{ID_HEX_LEN - 1}}}"))
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_TABLE_TIME = re.compile(r"(?<![\dT:-])\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?![\d.:])")  # tables, in local time
_ELAPSED = re.compile(r'("elapsed_ms":\s*)\d+')
_CORRELATION = re.compile(r"correlation id [0-9a-f]{12}|(\"correlation_id\":\s*\")[0-9a-f]{12}")
# Workflows: ids (wf- and 8 base32 characters) and blast-radius fingerprints (pv- and 16 hex
# digits) number in order of first appearance; a command's run time and a process id vary.
_WORKFLOW_ID = re.compile(r"\bwf-[a-z2-7]{8}\b")
_PREVIEW_ID = re.compile(r"\bpv-[0-9a-f]{16}\b")
_DURATION = re.compile(r'("duration_ms":\s*)\d+')
# A bearer token's value (`token create`): swt_ and 43 URL-safe base64 characters.
_TOKEN = re.compile(r"\bswt_[A-Za-z0-9_-]{43}")
# The host a workflow's owner runs on (swarmctl/hosts.py): derived from the machine.
_HOST = re.compile(r'("host":\s*")[^"]*(?=")')
_PID = re.compile(r'("pid":\s*)\d+|\b(pid )\d+')
# An op's link in the hash chain: it hashes the op's time, so it differs on every run.
_OP_HASH = re.compile(r'("hash":\s*")[0-9a-f]{64}(?=")')


class Normalizer:
    """Replace what differs between runs. One per transcript: ids number from [c1] again."""

    def __init__(self, tmp: Path | str | None = None) -> None:
        self.tmp = [str(tmp), str(Path(tmp).resolve())] if tmp is not None else []
        self.ids: dict[str, str] = {}
        self.workflows: dict[str, str] = {}
        self.previews: dict[str, str] = {}
        self.full_ids: set[str] = set()
        self.short_ids: set[str] = set()

    def _id(self, match: re.Match) -> str:
        return self._placeholder(match.group()[:SHORT_ID_LEN])

    def _placeholder(self, key: str) -> str:
        if key not in self.ids:
            self.ids[key] = f"[c{len(self.ids) + 1}]"
        return self.ids[key]

    @staticmethod
    def _numbered(seen: dict[str, str], letter: str):
        def placeholder(match: re.Match) -> str:
            if match.group() not in seen:
                seen[match.group()] = f"[{letter}{len(seen) + 1}]"
            return seen[match.group()]

        return placeholder

    def _prefix(self, match: re.Match) -> str:
        word = match.group()
        if len(word) == SHORT_ID_LEN:
            return word  # a short id: _HEX_ID's
        owners = {full[:SHORT_ID_LEN] for full in self.full_ids if full.startswith(word)}
        owners |= {short for short in self.short_ids if short.startswith(word)}  # a table cuts one: `3f9a1c…`
        if len(owners) != 1:
            return word  # not a prefix of one id seen: leave it
        return self._placeholder(owners.pop())[:-1] + f":{len(word)}]"

    def __call__(self, text: str) -> str:
        for tmp in sorted(set(self.tmp), key=len, reverse=True):
            text = text.replace(tmp, "[tmp]")
        text = _OP_HASH.sub(r"\1[hash]", text)
        text = _CORRELATION.sub(lambda m: (m.group(1) + "[id]") if m.group(1) else "correlation id [id]", text)
        text = _WORKFLOW_ID.sub(self._numbered(self.workflows, "w"), text)
        text = _PREVIEW_ID.sub(self._numbered(self.previews, "p"), text)
        text = _TOKEN.sub("swt_[token]", text)
        text = _HOST.sub(r"\1[host]", text)
        # Times, durations and pids first: their digits must not be taken for id prefixes.
        text = _TIME.sub("[at]", text)
        text = _TABLE_TIME.sub("[local time]", text)
        text = _ELAPSED.sub(r'\1"[elapsed_ms]"', text)
        text = _DURATION.sub(r'\1"[duration_ms]"', text)
        text = _PID.sub(lambda m: (m.group(1) + '"[pid]"') if m.group(1) else m.group(2) + "[pid]", text)
        self.full_ids.update(_FULL_ID.findall(text))
        self.short_ids.update(found[:SHORT_ID_LEN] for found in _HEX_ID.findall(text))
        text = _HEX_WORD.sub(self._prefix, text)
        text = _HEX_ID.sub(self._id, text)
        text = text.replace(version(), "[version]")
        return text
