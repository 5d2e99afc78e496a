"""What beats, workers and the Lua scripts agree on, as names and records with no logic.

Owns every Redis key name, built from one prefix with its hash tags (``keys``), what a
run's message carries and the one rule for its task id (``headers``), and the typed
records the scripts take and return (``records``: ``Settlement``, ``Admission``,
``RunStart``, ...), and the audit trail's context and records (``audit``).
Open first: ``keys``.
May import: ``schedules`` and ``errors``/``clock``; today it imports nothing of the
package, and only the standard library.
"""
