"""The old version of the app in a rolling deploy (see ``deploy_common``): it declares
``acc.x`` (with the argument "old") and ``acc.old`` in ``beat_schedule``; the new
version defines ``acc.x`` otherwise, drops ``acc.old`` and adds ``acc.y``."""

from __future__ import annotations

from deploy_common import make_app

app = make_app(
    {
        "acc.x": {"task": "record", "schedule": 1.0, "args": ["old"]},
        "acc.old": {"task": "record", "schedule": 1.0, "args": ["old"]},
    }
)
