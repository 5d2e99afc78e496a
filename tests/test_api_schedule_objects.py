"""``add``/``update`` take Celery schedule objects as ``schedule=``: crontab, schedule,
solar, timedelta, and celery_periodiq's own ``Schedule``; anything else, or a
schedule given twice, is refused and nothing is written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from celery import Celery
from celery.schedules import crontab, solar
from celery.schedules import schedule as every

from celery_periodiq import Periodiq, parse_schedule, periodiq
from celery_periodiq.errors import EntryError


@pytest.fixture
def api(redis_url: str, broker_url: str) -> Iterator[Periodiq]:
    app = Celery("objects", broker=broker_url, set_as_current=False)
    app.conf.periodiq_redis_url = redis_url
    app.conf.timezone = "Europe/Berlin"
    api = periodiq(app)
    yield api
    api.store.client.close()


@pytest.mark.parametrize(
    ("value", "spec", "form", "tz"),
    [
        (crontab(minute="*/15", hour="9-17", day_of_week="mon-fri"),
         "*/15 9-17 * * mon-fri", "cron", "Europe/Berlin"),
        # the app's zone, as for any entry naming none (an interval or the sun ignore it)
        (every(timedelta(seconds=30)), "@every 30s", "every", "Europe/Berlin"),
        (timedelta(minutes=5), "@every 5m", "every", "Europe/Berlin"),
        (90, "@every 1m30s", "every", "Europe/Berlin"),
        (solar("sunrise", 52.52, 13.40), "@solar sunrise 52.52 13.4", "cron", "Europe/Berlin"),
        (parse_schedule("Mon..Fri 09:00", tz="Asia/Tokyo"), "Mon..Fri 09:00", "calendar",
         "Asia/Tokyo"),
    ],
)  # fmt: skip
def test_add_takes_a_schedule_object(
    api: Periodiq, value: object, spec: str, form: str, tz: str
) -> None:
    entry = api.add("converted", "proj.t", schedule=value).entry

    assert entry is not None
    assert (entry.schedule, entry.form, entry.tz) == (spec, form, tz)
    assert api.get("converted").next_run is not None


def test_update_takes_a_schedule_object(api: Periodiq) -> None:
    api.add("changing", "proj.t", every=60)

    entry = api.update("changing", schedule=crontab(hour=3, minute=0)).entry

    assert entry is not None
    assert (entry.schedule, entry.form, entry.tz) == ("0 3 * * *", "cron", "Europe/Berlin")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"schedule": crontab(), "every": 60}, "give schedule= or one of cron="),
        ({"schedule": "every day"}, "schedule 'every day' is not supported"),
        ({"schedule": object()}, "is not supported (allowed: celery_periodiq schedules, crontab"),
    ],
)
def test_a_bad_schedule_object_is_refused_and_nothing_is_written(
    api: Periodiq, options: dict[str, object], words: str
) -> None:
    with pytest.raises(EntryError) as caught:
        api.add("bad", "proj.t", **options)  # type: ignore[arg-type]

    assert words in str(caught.value)
    assert api.count() == 0
