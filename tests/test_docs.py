"""Every runnable example of the documentation runs, against a private Redis.

The pages are README.md and every ``docs/**/*.md``, read as the site shows them: a
``--8<-- "FILE:SECTION"`` line is replaced by that section of FILE (between its
``--8<-- [start:SECTION]`` and ``--8<-- [end:SECTION]`` lines), as pymdownx.snippets does.

Which code blocks run, the convention every page follows:

- A ```` ```python ```` block is runnable. A page's blocks run in order, in one
  namespace, in a fresh directory that holds the tutorial's ``proj.py``, with
  ``REDIS_URL`` naming a private Redis; so a page starts with its own imports
  (``from proj import app``), and what one page does never leaks into another.
- A ```` ```python ```` block whose first line is ``# NAME.py`` is a file: it is written
  to NAME.py in that directory, not run (the tutorial's ``proj.py``).
- Illustrative code takes another tag and is not run here: ``pycon`` (a session with
  its output), ``sh`` and ``console`` (shell; the tutorial's ``sh`` blocks are run by
  tests/test_docs_tutorial.py), ``yaml`` (parsed: it must be valid), ``text``, or none.
  Any other tag fails, so a block cannot drop out of the tests by a typo (``py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TAGS = {"python", "pycon", "sh", "console", "yaml", "text", ""}
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::([a-z][-_0-9a-z]*))?"\s*$')


def pages() -> list[Path]:
    """README.md and every page of the site."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def section(path: Path, name: str | None) -> str:
    """A file whole, or the lines of one of its snippet sections."""
    text = path.read_text()
    if name is None:
        return text
    start, end = f"--8<-- [start:{name}]", f"--8<-- [end:{name}]"
    lines = text.splitlines()
    begin = next(n for n, line in enumerate(lines) if start in line)
    stop = next(n for n, line in enumerate(lines) if end in line)
    return "\n".join(line for line in lines[begin + 1 : stop] if "--8<-- [" not in line)


def rendered(page: Path) -> str:
    """A page's Markdown with its snippet includes replaced by what they include."""
    out = []
    for line in page.read_text().splitlines():
        found = SNIPPET.match(line)
        out.append(section(ROOT / found[1], found[2]) if found else line)
    return "\n".join(out) + "\n"


def blocks(text: str) -> list[tuple[str, str]]:
    """Every fenced code block of a page: (tag, code dedented), in order."""
    found: list[tuple[str, str]] = []
    tag: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        fence = line.strip().startswith("```")
        if tag is None and fence:
            tag, body = line.strip()[3:].strip(), []
        elif tag is not None and line.strip() == "```":
            found.append((tag, textwrap.dedent("\n".join(body)) + "\n"))
            tag = None
        elif tag is not None:
            body.append(line)
    assert tag is None, "a code block is not closed"
    return found


def tutorial_file(name: str) -> str:
    """The tutorial's ``# NAME.py`` block."""
    for tag, code in blocks(rendered(DOCS / "tutorial.md")):
        if tag == "python" and code.startswith(f"# {name}\n"):
            return code
    raise AssertionError(f"the tutorial has no {name}")


def runnable(page: Path) -> list[str]:
    return [code for tag, code in blocks(rendered(page)) if tag == "python"]


RUNNER = """
import json, sys
namespace = {"__name__": "docs"}
for number, code in enumerate(json.load(sys.stdin), 1):
    first = code.splitlines()[0]
    if first.startswith("# ") and first.endswith(".py"):
        open(first[2:], "w").write(code)
        continue
    try:
        exec(compile(code, f"{sys.argv[1]} python block {number}", "exec"), namespace)
    except BaseException:
        print(f"{sys.argv[1]} python block {number} failed:\\n{code}", file=sys.stderr)
        raise
print("blocks run:", number)
"""

WITH_EXAMPLES = [page for page in pages() if runnable(page)]


def test_every_code_block_has_a_known_tag() -> None:
    for page in pages():
        for tag, _ in blocks(rendered(page)):
            where = page.relative_to(ROOT)
            assert tag in TAGS, f"{where}: a ```{tag} block is neither run nor allowed"


def test_the_docs_have_python_examples_for_every_feature() -> None:
    text = "\n".join(code for page in WITH_EXAMPLES for code in runnable(page))
    for feature in ["@periodic", "periodiq(app)", "parse_schedule", "checkpoint", "beat_schedule"]:
        assert feature in text, feature
    assert len(WITH_EXAMPLES) >= 10


def test_every_yaml_block_parses() -> None:
    documents = [
        list(yaml.safe_load_all(code))
        for page in pages()
        for tag, code in blocks(rendered(page))
        if tag == "yaml"
    ]
    assert documents, "no yaml block found"
    assert all(isinstance(doc, dict) and "kind" in doc for docs in documents for doc in docs)


def test_a_snippet_include_is_read_as_the_site_shows_it() -> None:
    tutorial = rendered(DOCS / "tutorial.md")
    assert "--8<--" not in tutorial
    assert "from proj import app" in tutorial
    assert tutorial_file("proj.py") in rendered(ROOT / "README.md")


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_python_block_of_the_page_runs(page: Path, redis_url: str, tmp_path: Path) -> None:
    (tmp_path / "proj.py").write_text(tutorial_file("proj.py"))
    path = os.pathsep.join([str(tmp_path), str(ROOT)])
    env = {**os.environ, "REDIS_URL": redis_url, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(page.relative_to(ROOT))],
        input=json.dumps(runnable(page)), env=env, cwd=tmp_path,
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "blocks run:" in done.stdout


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link
