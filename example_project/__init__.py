"""The example project: a small Celery app that uses every celery_periodiq feature.

``celery -A example_project ...`` finds :data:`app` here. Importing the
package imports every task module, so each ``@periodic`` declaration is
validated at import and known to the beat.

========================  =====================================
module                    what it shows
========================  =====================================
reports.py                ``H/15``, ``H(0-29)/10``, a weekday
                          restart, overlap skip without timebox
sensors.py                seconds-first cron, ``catchup="skip"``,
                          ``@periodic`` over an ``@app.task``
billing.py                fixed day and time in a named zone
inbox.py                  tolerance, timebox, checkpoint resume
housekeeping.py           an entry in ``beat_schedule``
channels.py               runtime entries with an owner,
                          deleted by owner
========================  =====================================

``PERIODIQ_DEMO=1`` switches every schedule to seconds (see settings.py);
``example_project/demo.py`` is what ``make demo`` runs.
"""

from __future__ import annotations

# The task modules are imported for their declarations: their @periodic
# entries, and the tasks that beat_schedule and the runtime entries name.
from example_project import billing, housekeeping, inbox, reports, sensors
from example_project.main import app

__all__ = ["app", "billing", "housekeeping", "inbox", "reports", "sensors"]
