"""Claimed entries' definitions, read once per entry and version.

A claim carries its entry's definition as stored (JSON); reading it (parsing and
validating) cost a beat more per tick than anything but planning and the message. A
:class:`Definitions` keeps each entry read, by name and version, for as long as the
definition claimed is the very text it was read from: a text compared, not hashed, so
a hit costs a comparison of two strings of equal length at most, and a definition
changed without a new version (written outside periodiq) is read afresh. Its memory is
bounded by entries and by bytes (the texts it keeps, and an estimate of each entry's).
"""

from __future__ import annotations

from celery_periodiq.model.entry import Entry
from celery_periodiq.model.reader import EntryReader

__all__ = ["Definitions"]

# Beyond either bound, the oldest half of what is kept is dropped.
_MOST_ENTRIES = 200_000
_MOST_BYTES = 64 * 1024 * 1024
_ENTRY_BYTES = 1024
"""What an entry read costs besides its text (measured: about 700 bytes for a plain one),
counted with the texts against ``_MOST_BYTES``: about 50,000 entries of 300-byte
definitions are kept."""


class Definitions:
    """Entries read from definitions, kept by entry name and version."""

    def __init__(self, most: int = _MOST_ENTRIES, most_bytes: int = _MOST_BYTES) -> None:
        self._reader = EntryReader()
        self._kept: dict[tuple[str, int], tuple[str, Entry]] = {}
        self._bytes = 0
        self._most, self._most_bytes = most, most_bytes

    def __len__(self) -> int:
        return len(self._kept)

    def entry(self, name: str, version: int, definition: str) -> Entry:
        """The entry ``definition`` (its stored JSON) holds, the one of ``name`` at ``version``.

        Raises:
            EntryError: not JSON, or not a valid entry (nothing is kept of it).
        """
        key = (name, version)
        found = self._kept.get(key)
        if found is not None and found[0] == definition:
            return found[1]
        entry = self._reader.read_named(definition, name)
        if found is not None:
            del self._kept[key]
            self._bytes -= len(found[0]) + _ENTRY_BYTES
        size = len(definition) + _ENTRY_BYTES
        if len(self._kept) >= self._most or self._bytes + size > self._most_bytes:
            self._drop_oldest_half()
        self._kept[key] = (definition, entry)
        self._bytes += size
        return entry

    def _drop_oldest_half(self) -> None:
        kept = self._kept
        for key in list(kept)[: max(len(kept) // 2, 1)]:
            self._bytes -= len(kept.pop(key)[0]) + _ENTRY_BYTES
