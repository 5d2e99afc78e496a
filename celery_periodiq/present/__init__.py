"""What the two faces show, shared by the CLI and the web: the ``--json`` shapes
(``shapes``), the text of each command (``text``, ``events``, ``cluster``,
``simulation``) and its building blocks (``terminal``: colour, time phrases, tables).

Pure functions of what the API returned and of "now"; nothing here imports click or
the CLI.
"""
