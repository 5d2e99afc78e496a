"""Declarations in code: ``@periodic`` and the entries of ``app.conf.beat_schedule``.

Owns the decorator and the task it makes or guards (``decorators``), the entries an app
declares (``registry``), and the one clear line for a bad ``@periodic`` met while
Celery's command line imports the app's modules (``loading``). It writes nothing to
Redis: the beat reconciles what is declared.
Open first: ``decorators``.
May import: ``worker`` (the task base class), ``config``, ``model``, ``schedules`` and
the layers below; never ``store`` or ``beat``.
"""
