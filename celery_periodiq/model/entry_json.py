"""An entry's stored JSON: which fields are written and how, and the cut templates that
write the JSON of entries alike (equal but for name and bounds) without encoding each.

It works on an entry's field values (its ``__dict__``):
:class:`~celery_periodiq.model.entry.Entry` builds one :class:`JsonLayout` from its
fields and the values it leaves out, and asks it for its JSON.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from celery_periodiq.errors import EntryError, shown

__all__ = ["INSTANTS", "NUMBERS", "JsonLayout", "filled", "instants"]

NUMBERS = ("tolerance", "timebox", "grace", "catchup_window", "expires", "jitter", "alert_after")
"""Fields written as floats when they are numbers (10 and 10.0 are one definition)."""
INSTANTS = ("start_at", "end_at")
"""Fields written as ISO 8601 instants in UTC."""

_KEEP = object()
_ENCODE = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_quoted = json.encoder.encode_basestring_ascii  # a string as _ENCODE writes it
# what template() puts where the name and the bounds go
_MARKS = {key: f"\x00periodiq:{key}\x00" for key in ("name", "start_at", "end_at")}


class JsonLayout:
    """How the fields ``names`` are written; those in ``omitted`` are left out when they
    hold that value (reading fills them back in)."""

    def __init__(self, names: tuple[str, ...], omitted: dict[str, object]) -> None:
        # the fields as to_json() sees them: written always; left out at their omitted
        # value; numbers (as floats); args and the instants apart
        special = frozenset({*NUMBERS, *INSTANTS, "args"})
        self.names = names
        self._omitted_args = omitted["args"]
        self._always = tuple(key for key in names if key not in omitted and key not in special)
        self._plain_omitted = tuple(
            (key, omitted[key]) for key in names if key in omitted and key not in special
        )
        self._numbers = tuple((key, omitted.get(key, _KEEP)) for key in NUMBERS)

    def as_dict(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A JSON-ready dict of every field (datetimes as ISO strings), the caller's to
        change."""
        data = {name: fields[name] for name in self.names}
        # copies, however deep, so that the dict is the caller's to change
        data["args"] = copy.deepcopy(list(fields["args"])) if fields["args"] else []
        data["kwargs"] = copy.deepcopy(fields["kwargs"]) if fields["kwargs"] else {}
        data["options"] = dict(fields["options"])
        for key in NUMBERS:
            value = data[key]
            if isinstance(value, int | float) and not isinstance(value, bool):
                data[key] = float(value)  # 10 and 10.0 are one definition
        for key in INSTANTS:
            value = data[key]
            data[key] = None if value is None else value.astimezone(UTC).isoformat()
        return data

    def written(self, fields: dict[str, Any]) -> dict[str, Any]:
        """What :meth:`as_dict` gives, less the omitted fields, without its copies."""
        data: dict[str, Any] = {key: fields[key] for key in self._always}
        for key, omitted in self._plain_omitted:
            value = fields[key]
            if omitted == value:
                continue
            data[key] = value
        for key, omitted in self._numbers:
            value = fields[key]
            if omitted is not _KEEP and omitted == value:
                continue
            data[key] = float(value) if value.__class__ is int else value  # 10 is 10.0
        if fields["args"] != self._omitted_args:
            data["args"] = list(fields["args"])
        for key in INSTANTS:
            value = fields[key]
            if value is not None:
                data[key] = value.astimezone(UTC).isoformat()
        return data

    def encode(self, fields: dict[str, Any]) -> str:
        """Canonical JSON: sorted keys, no spaces, the omitted fields left out."""
        return _ENCODE(self.written(fields))

    def template(self, fields: dict[str, Any], start: bool, end: bool) -> list[str] | None:
        """The JSON of ``fields`` cut where the name and the bounds go (``start``/``end``:
        whether the copies have them), or None if it cannot be cut (a marker found
        elsewhere in it)."""
        data = self.written(fields)
        data["name"] = _MARKS["name"]
        for key, present in (("start_at", start), ("end_at", end)):
            data.pop(key, None)
            if present:
                data[key] = _MARKS[key]
        text = _ENCODE(data)
        marks = [
            _quoted(_MARKS[key])
            for key in ("end_at", "name", "start_at")
            if key == "name" or (start if key == "start_at" else end)
        ]
        if any(text.count(mark) != 1 for mark in marks):
            return None
        pieces = []
        for mark in marks:
            before, _, text = text.partition(mark)
            pieces.append(before)
        pieces.append(text)
        return pieces


def filled(pieces: list[str], name: str, start: datetime | None, end: datetime | None) -> str:
    """A template of :meth:`JsonLayout.template` with a name and bounds put in."""
    # end_at < name < start_at: the order of sorted keys
    values = [] if end is None else [end.astimezone(UTC).isoformat()]
    values.append(name)
    if start is not None:
        values.append(start.astimezone(UTC).isoformat())
    text = [pieces[0]]
    for value, piece in zip(values, pieces[1:], strict=True):
        text += (_quoted(value), piece)
    return "".join(text)


def instants(data: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The ``start_at`` and ``end_at`` of stored data, parsed.

    Raises:
        EntryError: one is not an ISO 8601 instant with an offset.
    """
    found: list[datetime | None] = []
    for key in INSTANTS:
        raw = data.get(key)
        parsed = None
        if raw is not None:
            try:
                parsed = datetime.fromisoformat(raw)
            except (TypeError, ValueError):
                parsed = None
            if parsed is None or parsed.tzinfo is None:
                raise EntryError(
                    f"entry {shown(str(data.get('name')))}: {key}={shown(raw)} is invalid "
                    "(allowed: an ISO 8601 instant with offset)"
                )
        found.append(parsed)
    return found[0], found[1]
