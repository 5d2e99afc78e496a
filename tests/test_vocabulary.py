"""Every place that spells out an entry's options agrees with the one vocabulary,
:class:`~celery_periodiq.model.options.EntryOptions`: the same names, types and defaults.

The public signatures (``@periodic``, ``Periodiq.add``/``update``/``add_many``, the CLI's
``add``/``update``) list their options one by one, for ``help()``, IDEs and ``--help``;
these tests fail when one of them gains, loses or changes an option the vocabulary does
not. What a signature has besides the vocabulary is listed here, with why.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields
from typing import Any

import click
import pytest

from celery_periodiq import Periodiq, periodic
from celery_periodiq.cli import entry_options as cli_options
from celery_periodiq.cli import periodiq as cli_group
from celery_periodiq.declare import registry
from celery_periodiq.model.build import EntryBuilder, build_entry, changed_entry
from celery_periodiq.model.entry import Entry
from celery_periodiq.model.options import (
    DEFAULTS,
    NAMES,
    SCHEDULE_OPTIONS,
    UPDATABLE,
    EntryOptions,
)
from celery_periodiq.model.policy import DEFAULT_CATCHUP, DEFAULT_OVERLAP
from celery_periodiq.ops import bulk

TYPES = {option.name: option.type for option in fields(EntryOptions)}
VOCABULARY = set(NAMES)

# What each signature takes besides the vocabulary's options, and what it leaves out.
BUILD_EXTRA = {"source", "defaults"}  # who declares the entry; the app's default policies
ADD_EXTRA = {"schedule"}  # a Celery schedule object instead of cron=/every=/...
WRITER = {"actor"}  # who writes, as the audit trail records it: no option of the entry
PERIODIC_EXTRA = {
    "name",  # the entry name, the task's by default (add takes it as an argument)
    "app",  # the app to create the task in
    # the routing keys of options=, given one by one
    "queue",
    "priority",
    "routing_key",
    "exchange",
}
PERIODIC_WITHOUT = {"options"}  # the message options are the routing keywords above
CLI_EXTRA = {"queue", "priority"}  # the options= a command line can set
CLI_WITHOUT = {"options"}  # routing_key, exchange, serializer, compression: API only


# Ratchet of drifts found: each is a difference to remove, never to add to.
def keyword_options(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The keyword-only parameters of ``function``."""
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def drifts(function: Callable[..., Any], extra: set[str]) -> Iterator[str]:
    """Each way ``function``'s keyword options differ from the vocabulary's: a type or a
    default (where it has one of its own)."""
    for name, parameter in keyword_options(function).items():
        if name in extra or name not in VOCABULARY:
            continue
        if parameter.annotation != TYPES[name]:
            yield f"{name}: {parameter.annotation} is not {TYPES[name]}"
        if parameter.default != DEFAULTS[name] or type(parameter.default) is not type(
            DEFAULTS[name]
        ):
            yield f"{name}={parameter.default!r}, not {DEFAULTS[name]!r}"


def test_every_option_has_a_type_and_a_default() -> None:
    missing = [option.name for option in fields(EntryOptions) if option.default is MISSING]

    assert missing == []
    assert set(SCHEDULE_OPTIONS) <= VOCABULARY
    assert {"task", *NAMES} == UPDATABLE


def test_build_entry_takes_the_vocabulary() -> None:
    taken = keyword_options(build_entry)

    assert set(taken) == VOCABULARY | BUILD_EXTRA
    assert list(drifts(build_entry, BUILD_EXTRA)) == []


def test_periodic_takes_the_vocabulary() -> None:
    taken = keyword_options(periodic)

    assert set(taken) == (VOCABULARY - PERIODIC_WITHOUT) | PERIODIC_EXTRA
    assert list(drifts(periodic, PERIODIC_EXTRA)) == []


def declared_body() -> None:
    """A task body."""


def test_a_periodic_declaration_holds_every_option() -> None:
    saved = list(registry._DECLARED)
    try:
        periodic(every=60, name="vocabulary.check")(declared_body)
        declared = registry._DECLARED[-1]
    finally:
        registry._DECLARED[:] = saved

    assert set(declared.options) == VOCABULARY


def test_periodiq_add_takes_the_vocabulary() -> None:
    taken = keyword_options(Periodiq.add)

    assert set(taken) == VOCABULARY | ADD_EXTRA | WRITER
    assert list(drifts(Periodiq.add, ADD_EXTRA)) == []


def test_periodiq_update_accepts_every_option_and_the_task() -> None:
    entry = build_entry("vocabulary.update", "proj.tasks.report", every=60)
    plain = UPDATABLE - set(SCHEDULE_OPTIONS)
    defaults = {name: DEFAULTS[name] for name in plain if name != "task"}

    updated = changed_entry(entry, {**defaults, "task": "proj.tasks.other", "every": 30})

    assert updated.task == "proj.tasks.other"
    assert updated.schedule == "@every 30s"
    assert (set(keyword_options(Periodiq.add)) - ADD_EXTRA - WRITER) | {"task"} == UPDATABLE


def test_periodiq_add_many_takes_the_options_of_add() -> None:
    # add_many builds each entry with EntryBuilder: build_entry's options, less the
    # source and the defaults the builder gives
    builder_fixed = set(inspect.signature(EntryBuilder).parameters)
    taken = set(keyword_options(build_entry)) - builder_fixed

    assert builder_fixed == BUILD_EXTRA
    assert set(keyword_options(Periodiq.add)) - taken == {"schedule", *WRITER}  # converted first
    assert set(keyword_options(Periodiq.add)) - WRITER == set(bulk.TAKEN)


def cli_options_of(command: str) -> dict[str, click.Parameter]:
    found = cli_group.commands[command]
    return {str(param.name): param for param in found.params if isinstance(param, click.Option)}


@pytest.mark.parametrize(("command", "extra"), [("add", set()), ("update", {"task", "force"})])
def test_the_cli_add_and_update_take_the_vocabulary(command: str, extra: set[str]) -> None:
    taken = cli_options_of(command)
    entry_options = set(taken) - extra

    assert entry_options == (VOCABULARY - CLI_WITHOUT) | CLI_EXTRA
    # only the options typed on the command line are passed on (the API's defaults apply)
    assert (VOCABULARY - CLI_WITHOUT) | CLI_EXTRA | {"task"} == cli_options._ENTRY_KEYS


def test_the_cli_help_names_the_vocabulary_defaults() -> None:
    taken = cli_options_of("add")

    assert DEFAULTS["tz"] is None  # the app's zone, resolved when the entry is written
    assert "(default: the app's timezone, else UTC)" in str(taken["tz"].help)
    assert f"({DEFAULTS['failure_threshold']})" in str(taken["failure_threshold"].help)


def test_entry_fields_are_the_options_resolved() -> None:
    # one schedule and its form for the four schedule options; the entry's identity
    stored = {item.name: item for item in fields(Entry)}
    resolved = {"name", "task", "schedule", "form", "source"}

    assert set(stored) == (VOCABULARY - set(SCHEDULE_OPTIONS)) | resolved
    # None and () are stored as empty lists and dicts; overlap and catchup None as the
    # default policies, tz None as the zone of an app without a timezone
    empties: dict[str, object] = {"args": [], "kwargs": {}, "options": {}, "exclude": []}
    policies = {"overlap": DEFAULT_OVERLAP, "catchup": DEFAULT_CATCHUP, "tz": "UTC"}
    for name in VOCABULARY - set(SCHEDULE_OPTIONS):
        item = stored[name]
        default = item.default if item.default_factory is MISSING else item.default_factory()
        expected = empties.get(name, policies.get(name, DEFAULTS[name]))
        assert (name, default) == (name, expected)
