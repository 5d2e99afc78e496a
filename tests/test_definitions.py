"""The beat's definitions cache: an entry is read once per name, version and text."""

from __future__ import annotations

import pytest

from celery_periodiq.beat.definitions import Definitions
from celery_periodiq.errors import EntryError
from celery_periodiq.model.build import build_entry


def definition(name: str, every: float = 60) -> str:
    return build_entry(name, "tasks.sweep", every=every).to_json()


def test_a_definition_claimed_again_at_its_version_is_the_entry_read_before() -> None:
    definitions = Definitions()
    first = definitions.entry("sweep", 1, definition("sweep"))
    again = definitions.entry("sweep", 1, definition("sweep"))  # equal text, another string
    assert again is first
    assert first.name == "sweep"


def test_a_definition_changed_without_a_new_version_is_read_afresh() -> None:
    definitions = Definitions()
    first = definitions.entry("sweep", 1, definition("sweep", every=60))
    changed = definitions.entry("sweep", 1, definition("sweep", every=120))
    assert changed.schedule != first.schedule
    assert changed.schedule == build_entry("sweep", "tasks.sweep", every=120).schedule
    assert len(definitions) == 1


def test_another_version_is_another_entry() -> None:
    definitions = Definitions()
    old = definitions.entry("sweep", 1, definition("sweep", every=60))
    new = definitions.entry("sweep", 2, definition("sweep", every=120))
    assert old.schedule != new.schedule
    assert definitions.entry("sweep", 1, definition("sweep", every=60)) is old


def test_past_its_bound_the_oldest_half_is_dropped() -> None:
    definitions = Definitions(most=4)
    read = [definitions.entry(f"e{i}", 1, definition(f"e{i}")) for i in range(5)]
    assert len(definitions) == 3  # four kept, two dropped, the fifth added
    assert definitions.entry("e4", 1, definition("e4")) is read[4]
    assert definitions.entry("e0", 1, definition("e0")) is not read[0]


def test_past_its_bytes_the_oldest_half_is_dropped() -> None:
    size = len(definition("e0")) + 1024  # its text, and about what its entry costs
    definitions = Definitions(most_bytes=3 * size)
    read = [definitions.entry(f"e{i}", 1, definition(f"e{i}")) for i in range(4)]
    assert len(definitions) == 3  # the fourth would pass the bytes: the oldest one dropped
    assert definitions.entry("e1", 1, definition("e1")) is read[1]
    assert definitions.entry("e0", 1, definition("e0")) is not read[0]


def test_an_unreadable_definition_raises_and_is_not_kept() -> None:
    definitions = Definitions()
    with pytest.raises(EntryError):
        definitions.entry("bad", 1, "{not json")
    assert len(definitions) == 0
