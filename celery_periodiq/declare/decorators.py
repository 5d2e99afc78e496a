"""``@periodic``: declare a periodic task in code, with its schedule and run guards."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from celery import Celery, Task, shared_task
from celery._state import connect_on_app_finalize, get_current_app
from celery.local import PromiseProxy, Proxy

from celery_periodiq.declare.loading import stop_loading
from celery_periodiq.declare.registry import Declaration, declare
from celery_periodiq.errors import EntryError, shown
from celery_periodiq.model.build import build_entry
from celery_periodiq.model.entry import AUTO
from celery_periodiq.model.policy import DEFAULT_FAILURE_THRESHOLD
from celery_periodiq.worker.task import PeriodicTask

__all__ = ["periodic"]

logger = logging.getLogger("celery_periodiq.decorators")

F = TypeVar("F", bound=Callable[..., Any])
_ROUTING = ("queue", "priority", "routing_key", "exchange")


def periodic(
    *,
    cron: str | None = None,
    every: float | timedelta | str | None = None,
    calendar: str | None = None,
    at: datetime | str | None = None,
    name: str | None = None,
    args: list[Any] | tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    tz: str | None = None,
    tolerance: float | str = AUTO,
    timebox: float | str | None = AUTO,
    grace: float | None = None,
    overlap: str | None = None,
    catchup: str | None = None,
    catchup_window: float | None = None,
    expires: float | str | None = AUTO,
    jitter: float = 0.0,
    owner: str | None = None,
    group: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    enabled: bool = True,
    alert_after: float | str | None = AUTO,
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD,
    pause_on_failure: bool = False,
    max_runs: int | None = None,
    exclude: list[Any] | tuple[Any, ...] = (),
    queue: str | None = None,
    priority: int | None = None,
    routing_key: str | None = None,
    exchange: str | None = None,
    app: Celery | None = None,
    **task_options: Any,
) -> Callable[[Any], Any]:
    """Run a task on a schedule, guarded on the worker.

    On a plain function it creates the Celery task (like ``shared_task``, or
    ``app.task`` with ``app=``) with :class:`PeriodicTask` as base; extra
    keyword arguments are Celery task options (``task_name=`` names the task).
    Over an existing ``@app.task`` / ``@shared_task`` it keeps that task and
    gives it the same guards.

    Args:
        cron: a cron expression or macro (``"H/15 * * * *"``, ``"@daily"``, ``"@reboot"``).
        every: an interval: seconds, a ``timedelta`` or ``"@every 1h30m"``.
        calendar: a systemd calendar event (``"Mon..Fri 09:00"``).
        at: run once, at this instant (an aware datetime, or ISO 8601 with an offset).
            One already past is accepted, with a warning, and never runs: the code
            outlives the instant, and importing it must not fail then.
        name: the entry name (default: the task name); also what Jenkins ``H`` hashes.
        tz: the IANA zone the schedule is read in (default: the app's ``timezone``, as
            for a ``crontab`` in ``beat_schedule``; UTC when the app sets none).
        tolerance: seconds a run may start before ``last_run + interval`` (default 10%).
        timebox: the soft time limit (default half the interval; None disables).
        grace: seconds between the soft and the hard time limit.
        overlap: ``"skip"`` (default), ``"allow"`` or ``"buffer_one"``.
        catchup: ``"last"`` (default), ``"skip"`` or ``"all"``.
        expires: how long a published run may wait to start: ``"auto"`` (until the
            next tick is due), seconds after its tick, or None (no limit).
        alert_after: seconds without a successful run before the entry is overdue
            (``"auto"``: two intervals plus the timebox; None: never).
        failure_threshold: consecutive failed or timeboxed runs before it is failing.
        pause_on_failure: pause the entry when it becomes failing.
        group: the group whose ``periodiq_group_limits`` limit applies to its runs
            (default: its ``owner``).
        max_runs: the most ticks the beat publishes for the entry (1 to 10**9; None:
            no limit); after the last one the entry has ended.
        exclude: dates none of its ticks runs on (holidays): ``"2026-12-25"`` or
            ``date`` values, read in the entry's zone.

    Raises:
        EntryError: at decoration time, for a missing or doubled schedule, a bad
            policy value, a timebox longer than the interval, non-JSON args, ...
    """
    routing = {
        key: value
        for key, value in zip(_ROUTING, (queue, priority, routing_key, exchange), strict=True)
        if value is not None
    }
    options: dict[str, Any] = {
        "cron": cron, "every": every, "calendar": calendar, "at": at, "args": args,
        "kwargs": kwargs, "options": routing, "tz": tz, "owner": owner, "group": group,
        "tolerance": tolerance,
        "timebox": timebox, "grace": grace, "overlap": overlap, "catchup": catchup,
        "catchup_window": catchup_window, "expires": expires, "jitter": jitter,
        "start_at": start_at, "end_at": end_at, "enabled": enabled, "alert_after": alert_after,
        "failure_threshold": failure_threshold, "pause_on_failure": pause_on_failure,
        "max_runs": max_runs, "exclude": exclude,
    }  # fmt: skip # table: the options of EntryOptions, in its order, as build_entry takes them

    def decorate(target: Any) -> Any:
        try:
            return declare_task(target)
        except EntryError as error:
            stop_loading(error, sys._getframe(1))  # under `celery`: one line, not 80
            raise

    def declare_task(target: Any) -> Any:
        # Validate now, at import, not in the beat; the error names the entry, which is
        # the task's name unless name= is given (Jenkins H hashes it, so use the real one).
        label = name if name is not None else _task_label(target, task_options)
        entry = build_entry(label, "periodic.declaration", source="code", **options)
        if entry.form == "at" and datetime.fromisoformat(entry.schedule) <= datetime.now(UTC):
            logger.warning(
                "periodiq: @periodic entry %r: at=%s is already past; it will not run",
                label,
                entry.schedule,
            )
        if _is_task(target):
            if task_options:
                raise EntryError(
                    f"@periodic over an existing task takes no task options "
                    f"({sorted(task_options)}); put them on its @app.task / @shared_task"
                )
            task = target
            _guard(task, name, overlap)
        elif callable(target):
            task = _create(target, name, overlap, app, dict(task_options))
        else:
            raise EntryError(
                f"@periodic decorates a function or a Celery task, not {shown(target)}"
            )
        declare(Declaration(name=name, task=task, options=options))
        return task

    return decorate


def _task_label(target: Any, task_options: dict[str, Any]) -> str:
    """The name the decorated task has or will have, found without evaluating a proxy
    (``@app.task`` and ``@shared_task`` build their task later, when the app finalizes)."""
    if isinstance(target, Task):
        return str(target.name)
    if isinstance(target, PromiseProxy) and not target.__evaluated__():
        function, *_ = object.__getattribute__(target, "_Proxy__args") or (None,)
        given = object.__getattribute__(target, "_Proxy__kwargs").get("name")
        return str(given or _function_label(function))
    if isinstance(target, Proxy):
        try:  # a @shared_task proxy: its getter closes over the function and the name given
            found = inspect.getclosurevars(object.__getattribute__(target, "_Proxy__local"))
            given = found.nonlocals.get("name")
            return str(given or _function_label(found.nonlocals.get("fun")))
        except (AttributeError, TypeError, ValueError):
            return "the decorated task"
    if callable(target):
        return str(task_options.get("task_name") or task_options.get("name") or "") or (
            _function_label(target)
        )
    return "the decorated task"


def _function_label(function: Any) -> str:
    module, name = getattr(function, "__module__", None), getattr(function, "__name__", None)
    return f"{module}.{name}" if module and name else "the decorated task"


def _is_task(target: Any) -> bool:
    return isinstance(target, Task | Proxy) or (
        hasattr(target, "apply_async") and hasattr(target, "run")
    )


def _create(
    function: Callable[..., Any],
    name: str | None,
    overlap: str | None,
    app: Celery | None,
    task_options: dict[str, Any],
) -> Any:
    task_name = (
        task_options.pop("task_name", None)
        or task_options.pop("name", None)
        or f"{function.__module__}.{function.__name__}"
    )
    base = task_options.pop("base", PeriodicTask)
    if not (isinstance(base, type) and issubclass(base, PeriodicTask)):
        raise EntryError(f"@periodic base={shown(base)} must be PeriodicTask or a subclass of it")
    attributes = {"periodiq_entry": name or task_name, "periodiq_overlap": overlap}
    guarded = type("PeriodicTask", (base,), attributes)
    creator: Any = app.task if app is not None else shared_task
    return creator(name=task_name, base=guarded, **task_options)(function)


def _install(task: Any, name: str | None, overlap: str | None) -> None:
    """Give an evaluated task object the guards by making its class a PeriodicTask."""
    cls = type(task)
    attributes = {
        "periodiq_entry": name or task.name,
        "periodiq_overlap": overlap,
        "__module__": cls.__module__,
    }
    if issubclass(cls, PeriodicTask):
        for key, value in attributes.items():
            setattr(cls, key, value)
        return
    if cls.Request != Task.Request:  # the task's own worker request stays its own
        attributes["Request"] = cls.Request  # (the worker makes it end a drop revoked)
    task.__class__ = type(cls.__name__, (PeriodicTask, cls), attributes)


def _guard(task: Any, name: str | None, overlap: str | None) -> None:
    if isinstance(task, PromiseProxy) and not task.__evaluated__():
        # @app.task before the app is finalized: guard it when Celery builds it.
        task.__then__(lambda: _install(task._get_current_object(), name, overlap))
    elif isinstance(task, Proxy):
        # @shared_task: one task object per app, built when each app finalizes.
        def on_app(app: Celery) -> None:
            def finalized(sender: Any = None, **_: Any) -> None:
                # The proxy resolves through the current app: make it this one.
                previous = get_current_app()
                app.set_current()
                try:
                    _install(task._get_current_object(), name, overlap)
                finally:
                    previous.set_current()

            app.on_after_finalize.connect(finalized, weak=False)

        connect_on_app_finalize(on_app)
        if getattr(get_current_app(), "finalized", False):  # never finalize an app from here
            _install(task._get_current_object(), name, overlap)
    else:
        _install(task, name, overlap)
