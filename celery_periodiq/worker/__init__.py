"""The worker side: what runs around a periodic task's body on a Celery worker.

``task`` holds :class:`PeriodicTask`, whose guard (begin.lua before the body, finish.lua
after it) a newcomer reads first; ``begin`` sends a run's begin until Redis and its
replicas have it, for ``task`` and for ``plain`` (the duplicate check that plain tasks
run by an entry get as the worker starts: ``startup``, which also stops a worker whose
settings are invalid); ``checkins`` and ``monitors`` tell Sentry Crons and ping monitors
of each run; ``task_modules`` imports the app's task modules as a worker does at start,
for the processes that list or look up its tasks without being one (the CLI, the API,
the dashboard, the admin). It may import ``runtime``, ``store`` and the layers below.
"""
