"""The check-in settings (``periodiq_checkins``, ``periodiq_checkin_url``,
``periodiq_checkin_urls``) read and checked: which monitors are told of each run, and
where a ping goes (:mod:`celery_periodiq.config` reads them; the worker's check-ins use
them).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celery_periodiq.errors import ConfigurationError

__all__ = ["CHECKIN_KINDS", "checkin_url", "checkin_urls", "checkins"]

CHECKIN_KINDS = ("sentry", "ping")
"""What ``periodiq_checkins`` may name."""


def _bad(name: str, value: object, allowed: str) -> ConfigurationError:
    return ConfigurationError(f"setting {name}={value!r} is invalid (allowed: {allowed})")


def checkins(value: Any, has_url: bool) -> tuple[str, ...]:
    """The monitors named, in order, with "ping" added when a ping URL is set."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _bad("periodiq_checkins", value, "a list such as ['sentry'] or ['sentry', 'ping']")
    unknown = [kind for kind in value if kind not in CHECKIN_KINDS]
    if unknown:
        raise _bad("periodiq_checkins", value, "a list of " + ", ".join(CHECKIN_KINDS))
    kinds = list(dict.fromkeys(value))
    if "ping" in kinds and not has_url:
        raise ConfigurationError(
            "setting periodiq_checkins names 'ping' but no ping URL is set: set "
            "periodiq_checkin_url (e.g. 'https://hc-ping.com/KEY/{entry}') or "
            "periodiq_checkin_urls ({'entry-name': 'https://...'})"
        )
    if has_url and "ping" not in kinds:
        kinds.append("ping")
    return tuple(kinds)


def checkin_url(name: str, value: Any) -> str | None:
    """A ping URL (template): http(s) with a host; ``{entry}`` and ``{state}`` its only
    placeholders."""
    if value is None:
        return None
    allowed = "an http:// or https:// URL; placeholders {entry} and {state} only"
    if not isinstance(value, str):
        raise _bad(name, value, allowed)
    try:
        filled = value.format(entry="e", state="run")
    except (KeyError, IndexError, ValueError):
        raise _bad(name, value, allowed) from None
    parsed = urlsplit(filled)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise _bad(name, value, allowed)
    return value


def checkin_urls(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise _bad("periodiq_checkin_urls", value, "a dict of entry name -> ping URL")
    urls: dict[str, str] = {}
    for entry, url in value.items():
        if not isinstance(entry, str) or not entry:
            raise _bad("periodiq_checkin_urls", value, "a dict of entry name -> ping URL")
        urls[entry] = checkin_url(f"periodiq_checkin_urls[{entry!r}]", url) or ""
        if not urls[entry]:
            raise _bad(f"periodiq_checkin_urls[{entry!r}]", url, "an http:// or https:// URL")
    return urls
