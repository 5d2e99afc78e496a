"""The new version of the app in a rolling deploy (see ``deploy_common``): ``acc.x``
with the argument "new" in ``beat_schedule``, ``acc.y`` declared in code with
``@periodic``; ``acc.old`` of the old version is gone."""

from __future__ import annotations

from typing import Any

from deploy_common import make_app, save

from celery_periodiq import periodic

app = make_app({"acc.x": {"task": "record", "schedule": 1.0, "args": ["new"]}})


@periodic(every=1, name="acc.y", app=app, bind=True, task_name="acc.y")
def acc_y(self: Any) -> None:
    """A task only the new code has."""
    save(self.request, [])
