"""The beat: :class:`~celery_periodiq.beat.scheduler.Scheduler`, Celery's scheduler hooks
over a schedule in Redis, every beat active.

Owns a beat's passes (claim due ticks, publish, settle: ``dispatch``, ``settle``,
``ledger``, ``partitions``), its heartbeat and link to the broker (``heartbeat``,
``broker_link``, ``outage``), reconciling declared entries (``reconcile``), alerts, the
messages (``publish``, ``redis_publish``), staged release (``staging``) and tick-level
tracing (``tick_tracing``).
Open first: ``scheduler``, then ``dispatch`` for one pass.
May import: ``declare``, ``worker`` and every layer below (``store``, ``model``,
``protocol``, ...); the schedule's Redis only through ``store``, the broker through
kombu (and redis-py for a Redis broker). ``ops`` and the package root import it.
"""
