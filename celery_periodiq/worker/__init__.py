"""The worker side: what runs around a periodic task's body on a Celery worker.

Owns :class:`~celery_periodiq.worker.task.PeriodicTask` and its guard (``task``: begin.lua
before the body, finish.lua after it); ``begin``, which sends a run's begin until Redis
and its replicas have it; ``plain``, the duplicate check of plain tasks run by an entry,
installed as the worker starts (``startup``, which also stops a worker whose settings are
invalid); ``dropped``, which ends a run either guard drops revoked, for Celery's monitors
and result backend; check-ins to Sentry Crons and ping monitors (``checkins``,
``monitors``); ``run_tracing``, the guard's verdict in the tick's OpenTelemetry trace
(``periodiq_tracing``); and ``task_modules``, which imports the app's task modules as a worker does
at start, for the processes that list or look up its tasks without being one (CLI, API,
dashboard, admin).
Open first: ``task``.
May import: ``runtime``, ``store`` and the layers below; never ``beat`` or ``declare``.
"""
