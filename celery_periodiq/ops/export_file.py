"""The export file's two layouts, each written as its records are read and read back
into one document (:mod:`celery_periodiq.ops.transfer` says what a document holds):

- ``json``: the document, laid out as ``json.dumps(document, indent=2)`` lays it out,
  written record by record;
- ``jsonl``: JSON Lines, a header line ``{"format": ..., "version": ..., "exported_at":
  ...}``, then one record a line, then a closing line ``{"count": N}``; a file without
  its closing line (an export cut short) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from celery_periodiq.errors import EntryError, shown

__all__ = ["LAYOUTS", "read_export", "write_export"]

LAYOUTS = ("json", "jsonl")


def write_export(
    out: TextIO, header: dict[str, Any], records: Iterable[dict[str, Any]], layout: str
) -> int:
    """Write ``header`` and ``records`` to ``out`` in ``layout`` as they come (one record
    in memory at a time); returns how many records were written."""
    if layout not in LAYOUTS:
        raise EntryError(f"layout={shown(layout)} is invalid (allowed: {', '.join(LAYOUTS)})")
    count = 0
    chunks = _json(header, records) if layout == "json" else _jsonl(header, records)
    for chunk, records_so_far in chunks:
        out.write(chunk)
        count = records_so_far
    return count


def _json(header: dict[str, Any], records: Iterable[dict[str, Any]]) -> Iterator[tuple[str, int]]:
    head = json.dumps(header, indent=2, ensure_ascii=False)
    yield head.removesuffix("\n}") + ',\n  "entries": [', 0
    count = 0
    for record in records:
        text = json.dumps(record, indent=2, ensure_ascii=False).replace("\n", "\n    ")
        count += 1
        yield ("," if count > 1 else "") + "\n    " + text, count
    yield ("\n  ]" if count else "]") + "\n}\n", count


def _jsonl(header: dict[str, Any], records: Iterable[dict[str, Any]]) -> Iterator[tuple[str, int]]:
    yield json.dumps(header, ensure_ascii=False) + "\n", 0
    count = 0
    for record in records:
        count += 1
        yield json.dumps(record, ensure_ascii=False) + "\n", count
    yield json.dumps({"count": count}) + "\n", count


def read_export(file: TextIO) -> Any:
    """The document in ``file``, written in either layout: JSON Lines when its first line
    is a header on its own (an object with a ``format`` and no ``entries``), else one
    JSON value (checked by the import, not here).

    Raises:
        EntryError: the file is not JSON, or a JSON Lines file has a line that is not
            JSON, no closing line, or a closing line that does not match; the message
            starts with what is wrong (the caller names the file).
    """
    first = file.readline()
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if isinstance(header, dict) and "format" in header and "entries" not in header:
        return {**header, "entries": _lines(file)}
    try:
        return json.loads(first + file.read())
    except ValueError as error:
        raise EntryError(f"is not JSON: {error}") from None


def _lines(file: TextIO) -> list[Any]:
    """The records of a JSON Lines export after its header (line 1), up to its closing
    line ``{"count": N}``."""
    records: list[Any] = []
    closed: int | None = None
    for number, line in enumerate(file, start=2):
        if not line.strip():
            continue
        if closed is not None:
            raise EntryError(f"line {number} comes after the closing line (line {closed})")
        try:
            record = json.loads(line)
        except ValueError as error:
            raise EntryError(f"line {number} is not JSON: {error}") from None
        if isinstance(record, dict) and set(record) == {"count"}:
            if type(record["count"]) is not int or record["count"] != len(records):
                raise EntryError(
                    f"line {number} says {shown(record['count'])} entries, but "
                    f"{len(records)} came before it"
                )
            closed = number
            continue
        records.append(record)
    if closed is None:
        raise EntryError(
            f"ends after {len(records)} entries without its closing line "
            f'{{"count": {len(records)}}}: was the export cut short?'
        )
    return records
