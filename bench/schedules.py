"""next_after() throughput per schedule form, against bare croniter in the same run.

    .venv/bin/python bench/schedules.py [--seconds 0.5]

For each form it prints our next_after() calls per second, bare
croniter.get_next() calls per second on the same expression (where croniter
cannot parse the form, on the expression our engine hands it), and the
ratio (how many times slower we are). Targets: plain 5-field cron within
1.5x, every form within 10x.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime

from croniter import croniter

from celery_periodiq import parse_schedule
from celery_periodiq.schedules import FieldSchedule
from celery_periodiq.schedules.engine import croniter_expression

START = datetime(2026, 1, 1, tzinfo=UTC)

FORMS: list[tuple[str, str, dict[str, str]]] = [
    ("cron 5 fields", "*/15 * * * *", {}),
    ("cron 5 fields, Europe/Berlin", "*/15 * * * *", {"tz": "Europe/Berlin"}),
    ("cron fixed hour, America/New_York", "30 2 * * *", {"tz": "America/New_York"}),
    ("cron 6 fields (seconds first)", "*/30 * * * * *", {}),
    ("cron 7 fields (year)", "0 0 12 * * ? 2026-2099", {}),
    ("cron L", "0 0 L * *", {}),
    ("cron LW", "0 0 LW * *", {}),
    ("cron d#k", "0 0 * * 5#3", {}),
    ("cron dL", "0 0 * * 5L", {}),
    ("cron day fields, either matches", "0 0 13 * 5", {}),
    ("cron day fields, both match (*/2)", "0 0 */2 * 1", {}),
    ("cron Jenkins H", "H/15 * * * *", {"key": "make-report"}),
    ("macro @daily", "@daily", {}),
    ("calendar Mon..Fri 09:00", "Mon..Fri *-*-* 09:00:00", {}),
    ("calendar *:0/15, Europe/Berlin", "*:0/15", {"tz": "Europe/Berlin"}),
    ("interval @every 1h30m", "@every 1h30m", {}),
]


def rate(step: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``step``, best of three timed rounds."""
    best = 0.0
    for _ in range(3):
        calls = 0
        began = time.perf_counter()
        deadline = began + seconds / 3
        while True:
            for _ in range(100):
                step()
            calls += 100
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls / (now - began))
    return best


def baseline_expression(spec: str, options: dict[str, str]) -> str | None:
    schedule = parse_schedule(spec, **options)  # type: ignore[arg-type]
    if not isinstance(schedule, FieldSchedule):
        return None
    try:
        croniter(spec, START, second_at_beginning=True)
        return spec
    except Exception:  # any refusal means croniter cannot take the form
        expression, _ = croniter_expression(schedule.fields)
        return expression


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.6, help="time per measurement")
    args = parser.parse_args()

    print(f"{'form':38} {'ours/s':>10} {'croniter/s':>11} {'ratio':>6}  croniter expression")
    for label, spec, options in FORMS:
        schedule = parse_schedule(spec, **options)  # type: ignore[arg-type]
        cursor = [START]

        def ours(schedule: object = schedule, cursor: list[datetime] = cursor) -> None:
            fire = schedule.next_after(cursor[0])  # type: ignore[attr-defined]
            cursor[0] = START if fire is None else fire  # a schedule that ended starts over

        our_rate = rate(ours, args.seconds)
        expression = baseline_expression(spec, options)
        if expression is None:
            print(
                f"{label:38} {our_rate:10.0f} {'-':>11} {'-':>6}  (croniter has no interval form)"
            )
            continue
        seconds_first = len(expression.split()) > 5
        bare = croniter(expression, START.replace(tzinfo=None), second_at_beginning=seconds_first)

        def theirs(bare: croniter = bare) -> None:
            bare.get_next(datetime)

        their_rate = rate(theirs, args.seconds)
        ratio = their_rate / our_rate
        print(f"{label:38} {our_rate:10.0f} {their_rate:11.0f} {ratio:5.2f}x  {expression}")


if __name__ == "__main__":
    main()
