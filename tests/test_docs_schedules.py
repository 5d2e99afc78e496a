"""The table of schedule forms in docs/schedules.md is true: engine and reference both agree."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from celery_periodiq import parse_schedule
from tests.reference import reference_next_after

PAGE = Path(__file__).resolve().parent.parent / "docs" / "schedules.md"
START = datetime(2026, 1, 1, tzinfo=UTC)


def table_rows() -> list[tuple[str, dict[str, str], list[str]]]:
    text = PAGE.read_text()
    table = text.split("<!-- schedule-examples -->")[1].split("<!-- /schedule-examples -->")[0]
    rows = []
    for line in table.strip().splitlines()[2:]:
        _, _form, spec, options, fires, _ = (cell.strip() for cell in line.split("|"))
        parsed = dict(re.findall(r'(\w+)="([^"]*)"', options))
        rows.append((spec.strip("`"), parsed, [fire.strip() for fire in fires.split(",")]))
    return rows


def as_text(fire: datetime) -> str:
    return fire.isoformat().replace("+00:00", "Z")


def test_table_covers_every_form() -> None:
    specs = [spec for spec, _, _ in table_rows()]
    assert len(specs) >= 30
    for mark in ["L", "W", "#", "?", "H", "@every", "~", ".."]:
        assert any(mark in spec for spec in specs), mark


@pytest.mark.parametrize(("spec", "options", "fires"), table_rows())
def test_table_fires_are_what_the_engine_computes(
    spec: str, options: dict[str, str], fires: list[str]
) -> None:
    schedule = parse_schedule(spec, **options)  # type: ignore[arg-type]
    assert [as_text(fire) for fire in schedule.upcoming(START, 3)] == fires


@pytest.mark.parametrize(("spec", "options", "fires"), table_rows())
def test_table_fires_are_what_the_reference_computes(
    spec: str, options: dict[str, str], fires: list[str]
) -> None:
    found = []
    current = START
    for _ in range(3):
        fire = reference_next_after(spec, current, **options)  # type: ignore[arg-type]
        assert fire is not None
        found.append(
            fire.astimezone(datetime.fromisoformat(fires[0].replace("Z", "+00:00")).tzinfo)
        )
        current = fire
    assert [datetime.fromisoformat(f.replace("Z", "+00:00")) for f in fires] == found
