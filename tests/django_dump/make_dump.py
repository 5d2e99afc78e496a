"""Write a real ``manage.py dumpdata django_celery_beat`` dump.

A throwaway Django project is configured in code (sqlite in a temporary directory),
migrated, filled through django-celery-beat's own models (every schedule kind, and
every PeriodicTask field the importer reads), then dumped with ``dumpdata``. Run it
as a subprocess (Django's settings are process-wide)::

    python tests/django_dump/make_dump.py OUT.json [--naive]

``--naive`` dumps with ``USE_TZ=False`` and ``TIME_ZONE="America/New_York"``: the
datetimes are then naive wall times in that zone.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

NAIVE_ZONE = "America/New_York"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--naive", action="store_true", help="USE_TZ=False")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        dump = make_dump(Path(directory) / "db.sqlite3", naive=arguments.naive)
    arguments.out.write_text(dump)


def make_dump(database: Path, *, naive: bool) -> str:
    import django
    from django.conf import settings

    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(database)}},
        INSTALLED_APPS=["django_celery_beat"],
        USE_TZ=not naive,
        TIME_ZONE=NAIVE_ZONE if naive else "UTC",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    fill(naive=naive)
    out = io.StringIO()
    call_command("dumpdata", "django_celery_beat", indent=2, stdout=out)
    return out.getvalue()


def fill(*, naive: bool) -> None:
    """One PeriodicTask per schedule kind and per field the importer maps."""
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    def instant(text: str) -> datetime:
        # The same wall time in both variants: UTC-aware, or naive in TIME_ZONE.
        value = datetime.fromisoformat(text)
        return value.astimezone(ZoneInfo(NAIVE_ZONE)).replace(tzinfo=None) if naive else value

    paris = CrontabSchedule.objects.create(
        minute="30", hour="8", day_of_week="mon-fri", timezone=ZoneInfo("Europe/Paris")
    )
    both_days = CrontabSchedule.objects.create(
        minute="0", hour="12", day_of_month="1-7", day_of_week="1",
        timezone=ZoneInfo("America/New_York"),
    )  # fmt: skip
    wrapping = CrontabSchedule.objects.create(
        minute="*/20", hour="22-2", day_of_week="*", timezone=ZoneInfo("UTC")
    )
    every_10s = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.SECONDS)
    every_2d = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.DAYS)
    sunrise = SolarSchedule.objects.create(event="sunrise", latitude="52.52", longitude="13.405")
    clocked = ClockedSchedule.objects.create(clocked_time=instant("2031-05-04T10:00:00+00:00"))

    PeriodicTask.objects.create(
        name="paris-report", task="proj.report", crontab=paris,
        args='[1, "two"]', kwargs='{"verbose": true}', queue="reports", priority=7,
        expire_seconds=600, description="the morning report",
    )  # fmt: skip
    PeriodicTask.objects.create(
        name="first-monday", task="proj.monthly", crontab=both_days,
        exchange="reports", routing_key="monthly",
        start_time=instant("2030-01-01T00:00:00+00:00"),
        expires=instant("2032-01-01T00:00:00+00:00"),
    )  # fmt: skip
    PeriodicTask.objects.create(name="night-watch", task="proj.watch", crontab=wrapping)
    PeriodicTask.objects.create(
        name="poll", task="proj.poll", interval=every_10s, headers='{"x-trace": "on"}',
        last_run_at=instant("2030-03-01T12:00:05.250000+00:00"),
    )  # fmt: skip
    PeriodicTask.objects.create(
        name="cleanup-once", task="proj.cleanup", interval=every_2d, one_off=True,
        start_time=instant("2030-06-01T06:00:00+00:00"),
    )  # fmt: skip
    PeriodicTask.objects.create(name="sunrise", task="proj.lights", solar=sunrise, enabled=False)
    PeriodicTask.objects.create(
        name="launch", task="proj.launch", clocked=clocked, one_off=True, kwargs='{"go": 1}'
    )
    PeriodicTask.objects.create(
        name="celery.backend_cleanup", task="celery.backend_cleanup",
        crontab=CrontabSchedule.objects.create(minute="0", hour="4", timezone=ZoneInfo("UTC")),
        expire_seconds=12 * 3600,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
