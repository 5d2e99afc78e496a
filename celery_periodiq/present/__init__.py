"""What the two faces show, shared by the CLI and the web: pure functions of what the API
returned and of "now".

Owns the ``--json`` shapes (``shapes``), the text of each command (``text``, ``events``,
``cluster``, ``simulation``), their building blocks (``terminal``: colour, time phrases,
tables) and the entry form shared by the dashboard and the Django admin (``entry_form``).
Open first: ``shapes``, then ``text``.
May import: ``api`` and the layers below it (records from ``ops``, ``store``, ``model``,
``schedules``); never ``cli``, ``web`` or click (tests/test_architecture.py).
"""
