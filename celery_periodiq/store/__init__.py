"""The only code that sends commands to the schedule's Redis (tests/test_architecture.py
checks it): give ``Store`` a method rather than reach for its client.

Owns the client (``connect``, ``cluster_client``), the Lua scripts in ``lua/`` with their
registration (``scripts``) and typed wrappers (``beat_scripts``, ``run_scripts``,
``entry_scripts``), the writes of :class:`~celery_periodiq.store.store.Store`, its reads
(``reads``, ``views``, ``pages``, ``walk``, ``summary``), the audit trails (``audit``),
checkpoints and the topology.
Open first: ``store``, then ``scripts`` and the header of one ``lua/*.lua``.
May import: ``config``, ``model``, ``protocol``, ``schedules`` and ``errors``/``clock``.
"""
