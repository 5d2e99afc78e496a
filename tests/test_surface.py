"""Pins of what users and Celery can see: the public API, the CLI, entry points, logger
names, the wheel's data files and the Lua bytes.

These tests import only stable public paths (``celery_periodiq``, its entry points,
``celery_periodiq.web``, ``python -m celery_periodiq.localredis``), never a module that
holds the code, so they must stay green while modules move between sub-packages.
Nothing here names a module path in its goldens. Set ``PERIODIQ_UPDATE_GOLDEN=1`` to
rewrite the files under ``tests/golden/surface/``, then read the diff as a user would.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.metadata
import importlib.util
import inspect
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from celery import Celery
from celery.beat import Scheduler as CeleryScheduler
from celery.bin.base import CLIContext
from celery.utils.imports import symbol_by_name
from click.testing import CliRunner

import celery_periodiq

GOLDEN = Path(__file__).parent / "golden" / "surface"
PACKAGE = Path(celery_periodiq.__file__).parent
TREE = PACKAGE.parent
PROG = "celery periodiq"  # how Celery names the group in usage lines
WIDTH = 80
SIMPLE = (type(None), bool, int, float, str)


def assert_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``tests/golden/surface/NAME``, or rewrite it when asked."""
    path = GOLDEN / name
    if os.environ.get("PERIODIQ_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    expected = path.read_text() if path.exists() else ""
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            text.splitlines(keepends=True),
            f"golden/surface/{name}",
            "now",
        )
    )
    assert text == expected, f"{name} changed; PERIODIQ_UPDATE_GOLDEN=1 rewrites it\n{diff}"


def subprocess_env() -> dict[str, str]:
    """The environment of a child Python that imports this same tree."""
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TREE), *([path] if path else [])]),
        "COLUMNS": str(WIDTH),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def entry_point(group: str, name: str) -> importlib.metadata.EntryPoint:
    (found,) = importlib.metadata.entry_points(group=group, name=name)
    return found


# 1. the public API


def signature(obj: Any) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(no signature)"


def value_text(value: object) -> str:
    """A class attribute's value when it is plain data, else only its type (no addresses)."""
    if isinstance(value, SIMPLE):
        return repr(value)
    if isinstance(value, tuple | frozenset) and all(isinstance(v, SIMPLE) for v in value):
        items = sorted(value, key=repr) if isinstance(value, frozenset) else value
        return f"{type(value).__name__}({', '.join(repr(v) for v in items)})"
    return f"<{type(value).__name__}>"


def member_line(owner: str, klass: type, name: str, raw: object) -> str:
    where = f"{owner}.{name}"
    if isinstance(raw, staticmethod | classmethod):
        return f"  {type(raw).__name__} {where}{signature(raw.__func__)}"
    if isinstance(raw, property):
        access = "settable " if raw.fset is not None else ""
        returns = inspect.signature(raw.fget).return_annotation if raw.fget else "?"
        return f"  {access}property {where} -> {returns}"
    if inspect.isfunction(raw):
        return f"  def {where}{signature(raw)}"
    if type(raw).__name__ == "cached_property":
        returns = inspect.signature(raw.func).return_annotation  # type: ignore[attr-defined]
        return f"  cached_property {where} -> {returns}"
    annotation = inspect.get_annotations(klass).get(name)
    typed = f": {annotation}" if annotation is not None else ""
    if inspect.ismemberdescriptor(raw):  # a field of a class with __slots__
        return f"  slot {where}{typed}"
    return f"  attr {where}{typed} = {value_text(raw)}"


def periodiq_members(cls: type) -> list[str]:
    """Public members that periodiq's own classes in ``cls``'s MRO define (first one wins)."""
    seen: dict[str, str] = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("celery_periodiq"):
            continue
        for name, raw in vars(klass).items():
            if not name.startswith("_") and name not in seen:
                seen[name] = member_line(cls.__name__, klass, name, raw)
    return [seen[name] for name in sorted(seen)]


def class_name(cls: type) -> str:
    """periodiq's and Python's own classes by name alone; others with their module."""
    if cls.__module__.startswith("celery_periodiq") or cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def bases_of(cls: type) -> str:
    return ", ".join(class_name(base) for base in cls.__bases__)


def periodiq_exceptions() -> list[type[BaseException]]:
    """Every public exception periodiq defines under its root, and those it exports."""
    root = celery_periodiq.PeriodiqError
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [root]
    while pending:
        cls = pending.pop()
        if cls.__module__.startswith("celery_periodiq") and not cls.__name__.startswith("_"):
            found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    for name in celery_periodiq.__all__:
        obj = getattr(celery_periodiq, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            found[name] = obj
    return [found[name] for name in sorted(found)]


def surface_text() -> str:
    exported = sorted(celery_periodiq.__all__)
    lines = [f"__all__ {name}" for name in exported]
    for name in exported:
        obj = getattr(celery_periodiq, name)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue  # below, with every exception
            lines.append(f"class {name}({bases_of(obj)}) {signature(obj)}")
            lines.extend(periodiq_members(obj))
        elif callable(obj):
            lines.append(f"def {name}{signature(obj)}")
        else:
            lines.append(f"value {name}: {type(obj).__name__}")
    for cls in periodiq_exceptions():
        mro = " > ".join(class_name(klass) for klass in cls.__mro__)
        lines.append(f"exception {cls.__name__}({bases_of(cls)}) mro: {mro}")
        lines.extend(periodiq_members(cls))
    return "\n".join(lines) + "\n"


def test_public_api_matches_the_golden_file() -> None:
    # The CLI and the web dashboard import more of the package; their exceptions count too.
    entry_point("celery.commands", "periodiq").load()
    if importlib.util.find_spec("starlette") is not None:
        import celery_periodiq.web  # noqa: F401

    text = surface_text()

    assert "0x" not in text, "an address leaked into the surface text"
    assert str(TREE) not in text
    assert_golden("api.txt", text)


# 2. the CLI's help


def commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """``()`` for the group itself, then the path of every command and subcommand."""
    yield path
    context = click.Context(group)
    for name in sorted(group.list_commands(context)):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


def help_file(path: tuple[str, ...]) -> str:
    return "help-" + "-".join(("periodiq", *path)) + ".txt"


def test_every_command_help_matches_its_golden_file() -> None:
    group = entry_point("celery.commands", "periodiq").load()
    app = Celery("surface", set_as_current=False)
    paths = list(commands(group))
    wrong: list[str] = []

    for path in paths:
        result = CliRunner().invoke(
            group,
            [*path, "--help"],
            prog_name=PROG,
            obj=CLIContext(app=app, no_color=True, workdir=None),
            env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"},
            terminal_width=WIDTH,
            catch_exceptions=False,
        )
        assert result.exit_code == 0, (path, result.output)
        assert result.stdout.startswith(f"Usage: {' '.join((PROG, *path))} ")
        try:
            assert_golden(help_file(path), result.stdout)
        except AssertionError as error:
            wrong.append(str(error))
    app.close()

    assert not wrong, "\n".join(wrong)
    goldens = {file.name for file in GOLDEN.glob("help-*.txt")}
    assert goldens == {help_file(path) for path in paths}, "a command was added or removed"
    assert len(paths) >= 20  # the group and its 19 commands


# 3. entry points and the module's command line


def test_the_beat_scheduler_entry_point_loads_a_celery_scheduler() -> None:
    scheduler = entry_point("celery.beat_schedulers", "periodiq").load()

    assert issubclass(scheduler, CeleryScheduler)
    assert scheduler is celery_periodiq.Scheduler


def test_the_celery_command_entry_point_loads_a_click_group() -> None:
    command = entry_point("celery.commands", "periodiq").load()

    assert isinstance(command, click.Group)
    assert command.name == "periodiq"


def test_the_scheduler_is_reachable_by_its_documented_name() -> None:
    assert symbol_by_name("celery_periodiq:Scheduler") is celery_periodiq.Scheduler


def test_python_m_localredis_prints_its_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "celery_periodiq.localredis", "--help"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m celery_periodiq.localredis")
    assert "--port" in result.stdout
    assert "--dir" in result.stdout


# 4. logger names

LOGGERS = """
import importlib.metadata, logging, sys
import celery_periodiq
(command,) = importlib.metadata.entry_points(group="celery.commands", name="periodiq")
command.load()
import celery_periodiq.web
for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
    if isinstance(logger, logging.Logger) and name.split(".")[0] == "celery_periodiq":
        print(name)
"""


def test_logger_names_match_the_golden_file() -> None:
    pytest.importorskip("starlette", reason="celery_periodiq.web needs the web extra")
    # A fresh interpreter: other tests (caplog, the CLI's --verbose) add loggers here.
    result = subprocess.run(
        [sys.executable, "-c", LOGGERS],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=True,
    )
    names = result.stdout.split()

    assert {
        "celery_periodiq.dispatch",
        "celery_periodiq.scheduler",
        "celery_periodiq.task",
        "celery_periodiq.alerts",
    } <= set(names)
    assert names == sorted(names)
    assert_golden("loggers.txt", "\n".join(names) + "\n")


# 5. the wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert (TREE / "pyproject.toml").is_file()
    pytest.importorskip("hatchling", reason="building the wheel needs the dev extra")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", str(out), str(TREE)],
        env=subprocess_env(),
        timeout=120,
        check=True,
    )  # fmt: skip
    (built,) = out.glob("*.whl")
    return built


def data_files() -> set[str]:
    """Every file of the package that is not Python, relative to the package root."""
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".py", ".pyc"}
    }


def test_the_wheel_holds_every_lua_script_and_py_typed(wheel: Path) -> None:
    scripts = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.lua")}

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())

    assert len(scripts) >= 11
    missing = {f"{PACKAGE.name}/{name}" for name in scripts | {"py.typed"}} - names
    assert not missing
    assert not {f"{PACKAGE.name}/{name}" for name in data_files()} - names  # templates too


def test_the_wheel_declares_both_celery_entry_points(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = archive.read(metadata).decode()
    found = {
        (group, name): importlib.metadata.EntryPoint(name, value, group)
        for group, name, value in parse_entry_points(text)
    }

    assert issubclass(found["celery.beat_schedulers", "periodiq"].load(), CeleryScheduler)
    assert isinstance(found["celery.commands", "periodiq"].load(), click.Group)


def test_the_wheel_carries_the_mit_license_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        headers = archive.read(metadata).decode().partition("\n\n")[0].splitlines()
        (license_file,) = (n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        text = archive.read(license_file).decode()

    assert "License-Expression: MIT" in headers
    assert "License-File: LICENSE" in headers
    assert text == (TREE / "LICENSE").read_text()
    assert text.startswith("MIT License\n")


def parse_entry_points(text: str) -> Iterator[tuple[str, str, str]]:
    group = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1]
        elif "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            yield group, name, value


# 6. the Lua bytes


def test_lua_script_hashes_match_the_golden_file() -> None:
    scripts = sorted(PACKAGE.rglob("*.lua"), key=lambda path: path.name)
    names = [path.name for path in scripts]

    assert len(names) == len(set(names)), "two scripts share a file name"
    text = "".join(
        f"{path.name} {hashlib.sha1(path.read_bytes()).hexdigest()}\n" for path in scripts
    )
    assert_golden("lua-sha1.txt", text)
