"""The engine against an independent brute-force reference, over random specs,
zones (Berlin, New York, Lord Howe's 30-minute shift, ...) and instants near DST changes.

Each property asks for the next three fires from a random instant, so every
example also checks fires that follow a fire (inside folds and gaps).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_periodiq import parse_schedule
from tests import strategies as specs
from tests.reference import reference_next_after

EXAMPLES = int(__import__("os").environ.get("PERIODIQ_PROPERTY_EXAMPLES", "500"))
FIRES = 3
HORIZON = timedelta(days=366 * 12)
"""How far reference_next_after looks for a next fire (its default): the engine looks
further, so a fire past it is the engine's alone."""


def engine_fires(spec: str, zone: str, key: str | None, start: datetime) -> list[datetime]:
    schedule = parse_schedule(spec, tz=zone, key=key)
    return [fire.astimezone(UTC) for fire in schedule.upcoming(start, FIRES)]


def reference_fires(spec: str, zone: str, key: str | None, start: datetime) -> list[datetime]:
    fires: list[datetime] = []
    current = start
    while len(fires) < FIRES:
        fire = reference_next_after(spec, current, tz=zone, key=key)
        if fire is None:
            break
        fires.append(fire.astimezone(UTC))
        current = fire
    return fires


@st.composite
def cases(
    draw: st.DrawFn, form: st.SearchStrategy[tuple[str, str | None]]
) -> tuple[str, str | None, str, datetime]:
    spec, key = draw(form)
    zone = draw(specs.zones())
    start = draw(specs.instants(zone))
    return spec, key, zone, start


def keyless(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str | None]]:
    return strategy.map(lambda spec: (spec, None))


FORMS = {
    "cron5": specs.cron5_specs(),
    "cron6": specs.cron6_specs(),
    "cron7": specs.cron7_specs(),
    "hashed": specs.hashed_specs(),
    "macros": specs.macro_specs(),
    "calendar": keyless(specs.calendar_specs()),
    "interval": keyless(specs.interval_specs()),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_next_fires_match_the_brute_force_reference(form: str) -> None:
    @settings(max_examples=EXAMPLES)
    @given(cases(FORMS[form]))
    def check(case: tuple[str, str | None, str, datetime]) -> None:
        spec, key, zone, start = case
        engine, reference = (
            engine_fires(spec, zone, key, start),
            reference_fires(spec, zone, key, start),
        )
        told = f"{spec!r} tz={zone} key={key!r} from {start.isoformat()}"
        assert engine[: len(reference)] == reference, told
        if len(engine) > len(reference):  # the reference gave up: it looks HORIZON ahead
            after = reference[-1] if reference else start
            assert engine[len(reference)] - after > HORIZON, told

    check()
