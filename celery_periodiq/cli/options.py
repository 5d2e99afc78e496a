"""Plumbing of ``celery periodiq``: exit codes, one-line errors, option types, the
options several commands share, and running a command against the app's API.

The options of ``add``/``update`` are in :mod:`celery_periodiq.cli.entry_options`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import redis
from celery import Celery
from celery.bin.base import CeleryCommand
from kombu.exceptions import OperationalError

from celery_periodiq.api import Periodiq, acting, periodiq
from celery_periodiq.errors import (
    BrokerUnavailableError,
    EntryExistsError,
    EntryNotFoundError,
    PeriodiqError,
    ScheduleError,
    StoreRefusedError,
    StoreUnavailableError,
)
from celery_periodiq.present.shapes import dumps
from celery_periodiq.schedules.interval import parse_duration
from celery_periodiq.schedules.zones import zone

__all__ = [
    "EXIT_CODES",
    "EXIT_EXISTS",
    "EXIT_NOT_FOUND",
    "EXIT_PROBLEM",
    "EXIT_REFUSED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CliError",
    "Command",
    "Group",
    "Instant",
    "JsonValue",
    "Maybe",
    "ParamType",
    "Seconds",
    "api_of",
    "aware",
    "confirm",
    "fail",
    "handled",
    "json_option",
    "now_option",
    "print_json",
]

EXIT_PROBLEM, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_EXISTS, EXIT_REFUSED = (
    1,
    2,
    3,
    4,
    5,
    6,
)
EXIT_CODES = """\b
Exit codes:
  0  success
  1  doctor found a problem, or a confirmation was declined
  2  bad usage or input: option, schedule, JSON, time, time zone, setting,
     an entry that is quarantined, or a declared entry changed without --force
  3  no entry with that name (or no entry with that owner)
  4  Redis or the broker is unreachable
  5  an entry with that name already exists
  6  Redis refused a command (a key holds data periodiq did not write, no
     permission, out of memory)"""

F = TypeVar("F", bound=Callable[..., Any])

# Celery 5.3+ allows click 8.1: ParamType is generic only from click 8.4, and "no
# arguments, so here is the help" is a usage error only from click 8.2.
if TYPE_CHECKING:
    ParamType = click.ParamType[Any]
else:
    ParamType = click.ParamType
_HELP_ERRORS = tuple(
    kind for kind in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if kind is not None
)


class CliError(click.ClickException):
    """A user-facing failure: one line on stderr, and a documented exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(" ".join(message.split()))
        # click declares exit_code per class; this one class carries every code.
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        click.echo(f"Error: {self.format_message()}", err=True)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop with a one-line error (bad usage unless ``code`` says otherwise)."""
    raise CliError(message, code)


def _one_line(error: click.UsageError, ctx: click.Context) -> CliError:
    path = (error.ctx or ctx).command_path
    return CliError(f"{error.format_message()} (see: {path} --help)", EXIT_USAGE)


class Command(CeleryCommand):
    """A periodiq command: usage errors fit on one line, and --help lists the exit codes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES)
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            if isinstance(error, _HELP_ERRORS):
                raise
            raise _one_line(error, ctx) from None

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Options in their help groups, as Celery's commands; click lists the arguments."""
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if not isinstance(param, click.Argument) and record is not None:
                group = getattr(param, "help_group", None) or "Options"
                sections.setdefault(str(group), []).append(record)
        for title, rows in sections.items():
            with formatter.section(title):
                formatter.write_dl(rows)


class Group(click.Group):
    """The ``periodiq`` group: an unknown command is a one-line error too."""

    command_class = Command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as error:
            raise _one_line(error, ctx) from None


def confirm(question: str, yes: bool) -> None:
    """Ask on stderr (skipped by ``--yes``); anything but yes stops with exit code 1."""
    if yes:
        return
    try:
        agreed = click.confirm(question, default=False, err=True)
    except click.Abort:  # end of input, or Ctrl-C
        agreed = False
    if not agreed:
        fail("not confirmed, nothing deleted (--yes skips the question)", EXIT_PROBLEM)


# option types


class Seconds(ParamType):
    """Seconds as a number (``30``, ``2.5``) or a duration (``30s``, ``1h30m``), or a word."""

    name = "seconds"

    def __init__(self, **words: Any) -> None:
        self.words = words

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "|".join(["SECONDS", *self.words])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip().lower()
        if text in self.words:
            return self.words[text]
        try:
            number = float(text)
        except ValueError:
            try:
                return parse_duration(text, text).total_seconds()
            except ScheduleError:
                pass
        else:
            if math.isfinite(number):
                return number
        words = "".join(f" or {word!r}" for word in self.words)
        self.fail(
            f"{value!r} is not seconds (30, 2.5) or a duration (30s, 1h30m){words}", param, ctx
        )
        return None  # not reached: fail() raises


class JsonValue(ParamType):
    """A JSON array or object given on the command line."""

    def __init__(self, kind: type, example: str) -> None:
        self.kind = kind
        self.example = example
        self.noun = "array" if kind is list else "object"
        self.name = f"json {self.noun}"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            self.fail(
                f"not valid JSON ({error.msg} at column {error.colno}); "
                f"expected a JSON {self.noun} such as {self.example}",
                param,
                ctx,
            )
        if not isinstance(parsed, self.kind):
            self.fail(
                f"expected a JSON {self.noun} such as {self.example}, got {value!r}", param, ctx
            )
        return parsed


class Instant(ParamType):
    """An ISO 8601 date-time (naive when written without an offset), or a word."""

    name = "iso"

    def __init__(self, **words: Any) -> None:
        self.words = words

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        if value.strip().lower() in self.words:
            return self.words[value.strip().lower()]
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO 8601 date-time "
                "(such as 2026-01-01T09:00 or 2026-01-01T09:00:00+01:00)",
                param,
                ctx,
            )


class Maybe(ParamType):
    """``base``, or one of a few words (``none`` clears a setting in ``update``)."""

    def __init__(self, base: ParamType, **words: Any) -> None:
        self.base = base
        self.words = words
        self.name = base.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() in self.words:
            return self.words[value.strip().lower()]
        return self.base.convert(value, param, ctx)


def aware(value: datetime | None, tz: str) -> datetime | None:
    """``value``, read on the wall clock of ``tz`` when it has no offset."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=zone(tz))


# shared options


def json_option(function: F) -> F:
    """``--json``: print the command's documented JSON shape instead of text."""
    return click.option(
        "--json", "as_json", is_flag=True, help="Print JSON instead (its shape is described above)."
    )(function)


def now_option(function: F) -> F:
    """``--now ISO``: a fixed "now", for reproducible output."""
    return click.option(
        "--now",
        "at",
        type=Instant(),
        metavar="ISO",
        help="Show times relative to this instant instead of the Redis clock "
        "(reproducible output); without an offset it is UTC.",
    )(function)


# running a command


class _Warnings(logging.Handler):
    """Print what the API logs at WARNING during a command as ``Warning: ...`` lines."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().removeprefix("periodiq: ")
        click.echo(f"Warning: {message}", err=True)


def handled(function: F) -> F:
    """Turn the API's exceptions into one-line errors with their exit codes, and its
    logged warnings into ``Warning:`` lines on stderr."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        warnings = _Warnings(logging.WARNING)
        package = logging.getLogger("celery_periodiq")
        package.addHandler(warnings)
        propagate, package.propagate = package.propagate, False
        try:
            return function(*args, **kwargs)
        except click.ClickException:
            raise
        except EntryNotFoundError as error:
            raise CliError(str(error), EXIT_NOT_FOUND) from None
        except EntryExistsError as error:
            raise CliError(str(error), EXIT_EXISTS) from None
        except (StoreUnavailableError, BrokerUnavailableError) as error:
            raise CliError(str(error), EXIT_UNAVAILABLE) from None
        except StoreRefusedError as error:
            raise CliError(str(error), EXIT_REFUSED) from None
        except redis.ResponseError as error:
            raise CliError(f"Redis refused a command: {error}", EXIT_REFUSED) from None
        except redis.RedisError as error:
            raise CliError(f"Redis is unreachable: {error}", EXIT_UNAVAILABLE) from None
        except OperationalError as error:
            raise CliError(f"the broker is unreachable: {error}", EXIT_UNAVAILABLE) from None
        except PeriodiqError as error:
            raise CliError(str(error), EXIT_USAGE) from None
        finally:
            package.removeHandler(warnings)
            package.propagate = propagate

    return run  # type: ignore[return-value]


def api_of(ctx: click.Context) -> Periodiq:
    """The runtime API of the app Celery loaded for ``-A``."""
    app = getattr(ctx.obj, "app", None)
    if not isinstance(app, Celery):
        fail("run this as: celery -A PROJ periodiq ...")
    return acting(periodiq(app), "cli")  # its writes recorded as the CLI's, by user@host


def print_json(value: Any) -> None:
    """Print a command's JSON."""
    click.echo(dumps(value), nl=False)
