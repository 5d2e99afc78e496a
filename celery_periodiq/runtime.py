"""One Celery app's schedule at run time: the app, its settings and the one Store that
the runtime API, the worker's guard and the operations share (``runtime_of(app)``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis
from celery import Celery

from celery_periodiq.config import Settings, redacted
from celery_periodiq.errors import StoreRefusedError, StoreUnavailableError
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import wrong_type

__all__ = ["Runtime", "runtime_of"]

_ATTRIBUTE = "_periodiq_runtime"


class Runtime:
    """An app, its ``periodiq_*`` settings and the Store of its schedule.

    Raises:
        ConfigurationError: a ``periodiq_*`` setting is invalid.
    """

    def __init__(
        self, app: Celery, store: Store | None = None, settings: Settings | None = None
    ) -> None:
        self.app = app
        self.settings = settings if settings is not None else Settings.from_app(app)
        self.store = store if store is not None else Store(self.settings)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Redis errors as our errors; the schedule's layout checked on first use."""
        with _redis_errors(self.settings.redis_url):
            self.store.ensure_layout()
            yield


def runtime_of(app: Celery, settings: Settings | None = None) -> Runtime:
    """``app``'s :class:`Runtime`, created on first use (one per app).

    Args:
        settings: the app's settings, read just now: when they are no longer those its
            Runtime was made with (the app's configuration changed since), a Runtime of
            their own is returned instead, not kept.

    Raises:
        ConfigurationError: a ``periodiq_*`` setting is invalid.
    """
    # Kept on the app itself, so the runtime lives and dies with it.
    runtime: Runtime | None = vars(app).get(_ATTRIBUTE)
    if runtime is None:
        runtime = Runtime(app, settings=settings)
        vars(app)[_ATTRIBUTE] = runtime
    elif settings is not None and settings != runtime.settings:
        return Runtime(app, settings=settings)
    return runtime


@contextlib.contextmanager
def _redis_errors(url: str) -> Iterator[None]:
    try:
        yield
    except redis.ResponseError as error:
        hint = " (a key periodiq uses holds data written by something else)"
        raise StoreRefusedError(
            f"Redis at {redacted(url)} refused a command: {error}"
            + (hint if wrong_type(error) else "")
        ) from error
    except redis.RedisError as error:
        raise StoreUnavailableError(f"Redis at {redacted(url)} is unreachable: {error}") from error
