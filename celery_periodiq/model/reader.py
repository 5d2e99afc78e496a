"""Reading many stored entries: :meth:`Entry.from_json` once per kind of definition."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from typing import Any

from celery_periodiq.errors import EntryError
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.entry_json import instants

__all__ = ["EntryReader"]

# Stored values entries can be read alike from: compared with their type (1 and 1.0).
_ALIKE_JSON = frozenset({str, int, float, bool, type(None)})
_IDENTITY = frozenset({"name", "start_at", "end_at"})
_MODELS = 1024


class EntryReader:
    """:meth:`Entry.from_json` for many definitions, faster for those alike: equal but
    for name, ``start_at`` and ``end_at`` (and holding no lists or objects). The first
    of each kind is read and validated in full; the others are copies of it
    (:meth:`Entry.alike`) with their own name and bounds, which are checked each time."""

    def __init__(self) -> None:
        self._models: dict[tuple[Any, ...], Entry] = {}
        self._texts: dict[str, Entry] = {}
        """Definitions read alike, without their name, to their entry (see :meth:`read_named`)."""

    def read_named(self, text: str, name: str) -> Entry:
        """:meth:`read` of the definition of the entry ``name``, faster for definitions
        that differ from one read before only in their name: their text without its one
        ``"name":...`` is looked up, not parsed (a name written otherwise, or found more
        than once, is read in full).

        Raises:
            EntryError: as :meth:`read`.
        """
        field = '"name":' + encode_basestring_ascii(name)
        if text.count(field) != 1:
            return self.read(text)
        rest = text.replace(field, "", 1)
        model = self._texts.get(rest)
        if model is not None:
            return model.alike(name, model.start_at, model.end_at)
        entry, alike = self._read(text)
        if alike and entry.name == name:
            if len(self._texts) >= _MODELS:
                self._texts.clear()
            self._texts[rest] = entry
        return entry

    def read(self, text: str | bytes) -> Entry:
        """Parse and validate stored JSON.

        Raises:
            EntryError: not JSON, or not a valid entry (as :meth:`Entry.from_json`).
        """
        return self._read(text)[0]

    def _read(self, text: str | bytes) -> tuple[Entry, bool]:
        """The entry, and whether entries alike could be copied from it."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise EntryError(f"entry data is not JSON: {error}") from None
        shape = None
        if isinstance(data, dict) and "name" in data:
            plain = {key: value for key, value in data.items() if key not in _IDENTITY}
            kinds = tuple(map(type, plain.values()))
            if _ALIKE_JSON.issuperset(kinds):
                shape = (tuple(plain.items()), kinds)
                model = self._models.get(shape)
                if model is not None:
                    return model.alike(data["name"], *instants(data)), True
        entry = Entry.from_dict(data)
        if shape is not None:
            if len(self._models) >= _MODELS:
                self._models.clear()
            self._models[shape] = entry
        return entry, shape is not None
