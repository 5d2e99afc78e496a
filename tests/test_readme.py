"""Every ```python block of the README runs, in order, against a private Redis."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

RUNNER = """
import re, sys, textwrap
text = open(sys.argv[1]).read()
namespace = {"__name__": "readme"}
for number, block in enumerate(re.findall(r"```python\\n(.*?)```", text, re.S), 1):
    try:
        # a block inside a list item is indented like the item
        exec(compile(textwrap.dedent(block), f"README python block {number}", "exec"), namespace)
    except Exception:
        print(f"README python block {number} failed:\\n{block}", file=sys.stderr)
        raise
print("blocks run:", number)
"""


def test_readme_has_python_examples_for_every_feature() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    text = "\n".join(blocks)
    for feature in ["@periodic", "periodiq(app)", "parse_schedule", "checkpoint", "beat_schedule"]:
        assert feature in text, feature


def test_every_python_block_of_the_readme_runs(redis_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "REDIS_URL": redis_url}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(README)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "blocks run:" in done.stdout
