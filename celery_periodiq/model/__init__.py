"""Pure decisions, no I/O and no clock: an entry, its run policy and what to do with a tick.

Owns the options' vocabulary (``options``), an entry, its stored JSON and how one is
built from keyword options (``entry``, ``entry_json``, ``build``, ``reader``), run policy
(``policy``: tolerance, timebox, grace, limits), a claimed tick's plan (``plan``,
``due``, ``instants``), simulation (``simulate``, ``simulation``) and the partition ring.
Open first: ``plan``, then ``entry`` and ``policy``.
May import: ``protocol``, ``schedules`` and ``errors``/``clock`` only; never ``config``
or anything that talks to Redis (kombu only, to check message options).
"""
