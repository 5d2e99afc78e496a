"""The package's shape: layers that import only downwards, no import cycle, small modules.

The import graph is read from the code with ``ast``: top-level, function-level and
``TYPE_CHECKING`` imports alike, so a cycle hidden in a function is still a cycle. A new
cycle, an upward import or a module past 450 lines fails ``make test``; the README's
"Development" section has the map this test enforces.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import celery_periodiq

PACKAGE = Path(celery_periodiq.__file__).parent
NAME = "celery_periodiq"
MAX_LINES = 450
MAX_FLAT = 12

# Lowest first. A module may import its own layer and the layers below it, never above.
# ``celery_periodiq`` itself (the public names) is the top: nothing inside imports it.
LAYERS: list[tuple[str, ...]] = [
    ("_version", "errors", "clock"),
    ("schedules",),
    ("protocol",),
    ("model",),
    ("config",),
    ("store",),
    ("runtime",),
    ("worker",),
    ("declare",),
    ("beat",),
    ("ops",),
    ("api",),
    ("present",),
    ("web",),
    ("contrib",),
    ("cli",),
    ("localredis",),
]

# Where a layer's modules must not reach, beyond the layer order: the dashboard shows what
# the CLI shows through present/, and present/ renders without click.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "web": ("cli",),
    "present": ("cli", "web"),
    "contrib": ("cli",),
}


def modules() -> dict[str, Path]:
    """Every module by its dotted name relative to the package ("" is the package)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules that ``name`` imports, each as the nearest known module."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join([NAME, *here[: len(here) - node.level + 1]])
                base += f".{node.module}" if node.module else ""
            else:
                base = node.module or ""
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target != NAME and not target.startswith(f"{NAME}."):
                continue
            dotted = target.removeprefix(NAME).removeprefix(".")
            while dotted and dotted not in known:
                dotted = dotted.rpartition(".")[0]
            if dotted != name:
                yield dotted


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: set(imported(name, path, known)) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def layer_of(name: str) -> int | None:
    top = name.split(".")[0]
    for level, members in enumerate(LAYERS):
        if top in members:
            return level
    return None


def test_no_import_cycle_outside_schedules() -> None:
    found = [c for c in cycles(graph()) if not all(m.startswith("schedules") for m in c)]

    assert [sorted(c) for c in found] == []


def test_every_module_is_at_most_450_lines() -> None:
    long = {
        name: lines
        for name, path in modules().items()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }

    assert long == {}


def test_at_most_twelve_flat_modules_and_the_cli_is_a_package() -> None:
    flat = sorted(path.name for path in PACKAGE.glob("*.py"))

    assert len(flat) <= MAX_FLAT, flat
    assert (PACKAGE / "cli" / "__init__.py").is_file()


def test_every_fmt_skip_says_why() -> None:
    """The formatter lays the code out; a table that reads better by hand says so:
    ``# fmt: skip # table: one row per option``."""
    bare = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# fmt: skip" in line and "# fmt: skip # " not in line
    ]

    assert bare == []


def test_imports_go_down_the_layers() -> None:
    edges = graph()
    unplaced = sorted(name for name in edges if name and layer_of(name) is None)
    upward = sorted(
        f"{name} -> {target or 'celery_periodiq (the public names)'}"
        for name, targets in edges.items()
        for target in targets
        if name and (target == "" or (layer_of(target) or 0) > (layer_of(name) or 0))
    )

    assert unplaced == [], "modules in no layer of LAYERS"
    assert upward == []


def outside_imports(path: Path) -> set[str]:
    """The top-level names of the packages outside ours that ``path`` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found - {NAME}


def test_the_dashboard_and_the_rendering_stay_apart_from_the_cli_and_click() -> None:
    reached = sorted(
        f"{name} -> {target}"
        for name, targets in graph().items()
        for target in targets
        if target.split(".")[0] in FORBIDDEN.get(name.split(".")[0], ())
    )
    clicking = sorted(
        name
        for name, path in modules().items()
        if name.startswith("present") and "click" in outside_imports(path)
    )

    assert reached == []
    assert clicking == []


def test_the_cycle_finder_finds_a_cycle_and_the_graph_sees_function_level_imports() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []
    # schedules/base imports its package inside a function: the graph must see that too.
    assert "schedules" in graph()["schedules.base"]


def store_client_uses(source: str) -> list[int]:
    """The lines of ``source`` that reach a store's Redis client: ``store.client``,
    ``self.store.client``, ``api.store.client`` and the like."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr == "client"
        and (
            (isinstance(node.value, ast.Name) and node.value.id in ("store", "_store"))
            or (isinstance(node.value, ast.Attribute) and node.value.attr in ("store", "_store"))
        )
    )


def test_only_the_store_sends_commands_to_the_schedules_redis() -> None:
    found = {
        name: lines
        for name, path in modules().items()
        if name != "store" and not name.startswith("store.")
        if (lines := store_client_uses(path.read_text()))
    }

    assert found == {}, "the store's Redis client used outside store/ (give Store a method)"


def test_the_client_finder_finds_a_store_client_and_nothing_else() -> None:
    source = "store.client.get(k)\nself.store.client\napi.store.client\nchannel.client\n"

    assert store_client_uses(source) == [1, 2, 3]
