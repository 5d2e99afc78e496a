"""Each Lua script's KEYS, as its wrapper declares them, match its header.

A script's header (``store/lua/NAME.lua``) documents its KEYS: ``KEYS[n] role type ...``
for each fixed key, and ``KEYS[n..] <count> per tick|entry ...`` in prose for the keys
repeated per item, with the keys after them. The wrappers declare each script's KEYS
once, by role (:class:`~celery_periodiq.store.scripts.ScriptKeys`), and build the key
list from that declaration; these tests hold the two together, and check that the
wrappers really send what they declare (a recording client, no Redis).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pytest

from celery_periodiq.protocol.keys import Keys
from celery_periodiq.protocol.records import RunEnd, RunStart, Settlement
from celery_periodiq.store import beat_scripts, entry_scripts, run_scripts
from celery_periodiq.store.scripts import SCRIPT_NAMES, ScriptKeys
from celery_periodiq.store.store import Scripts

LUA = resources.files("celery_periodiq.store.lua")
COUNTS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


@dataclass
class Header:
    """What a script's header says of its KEYS."""

    fixed: dict[int, str]
    """Each fixed key's role, by its number (1-based)."""
    repeated_from: int | None = None
    """The number of the first repeated key (``KEYS[n..]``), if any."""
    per_item: int = 0
    prose: str = ""
    """What the header says of the repeated keys and those after them."""


def header(name: str) -> Header:
    """The KEYS documented in the leading comment of ``lua/NAME.lua``."""
    lines = []
    for line in LUA.joinpath(f"{name}.lua").read_text().splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:])
    found = Header({})
    describing = False
    for line in lines:
        fixed = re.match(r"\s*KEYS\[(\d+)\]\s+(\w+)", line)
        repeated = re.match(r"\s*KEYS\[(\d+)\.\.\]\s+(.*)", line)
        if fixed:
            found.fixed[int(fixed[1])] = fixed[2]
        if repeated:
            found.repeated_from = int(repeated[1])
            count = re.match(r"(\w+) per (?:tick|entry)", repeated[2])
            assert count, f"{name}.lua: KEYS[{repeated[1]}..] does not say how many per item"
            found.per_item = COUNTS[count[1]]
            found.prose = repeated[2]
            describing = True
        elif describing and line.strip() and not re.match(r"\s*(KEYS|ARGV)\[", line):
            found.prose += " " + line.strip()
        else:
            describing = False
    return found


def declared() -> dict[str, list[ScriptKeys]]:
    """Every ScriptKeys the wrapper modules declare, by script."""
    found: dict[str, list[ScriptKeys]] = {}
    for module in (beat_scripts, run_scripts, entry_scripts):
        for value in vars(module).values():
            if isinstance(value, ScriptKeys):
                found.setdefault(value.script, []).append(value)
    return found


def roles(names: tuple[str, ...]) -> list[str]:
    """The key roles without the argument a method is given: ``history:name`` -> ``history``."""
    return [name.partition(":")[0] for name in names]


def in_order(words: list[str], text: str) -> bool:
    """Whether each of ``words`` occurs in ``text``, one after the other."""
    position = 0
    for word in words:
        found = re.search(rf"\b{word}\b", text[position:])
        if found is None:
            return False
        position += found.end()
    return True


def contract_problems(keys: ScriptKeys, documented: Header) -> list[str]:
    """How a declaration differs from a header (nothing when they agree)."""
    problems = []
    numbers = sorted(documented.fixed)
    first_repeated = documented.repeated_from or len(numbers) + 1
    head = [documented.fixed[n] for n in numbers if n < first_repeated]
    if head != roles(keys.head):
        problems.append(f"KEYS {roles(keys.head)} declared, {head} in the header")
    if numbers[: len(head)] != list(range(1, len(head) + 1)):
        problems.append(f"the header's fixed KEYS are not numbered 1..n: {numbers}")
    if documented.repeated_from is None:
        after = [documented.fixed[n] for n in numbers[len(head) :]]
        if keys.each or keys.tail or after:
            problems.append(f"repeated {keys.each} / {keys.tail} declared, {after} documented")
        return problems
    if documented.repeated_from != len(keys.head) + 1:
        problems.append(f"the header repeats keys from KEYS[{documented.repeated_from}..]")
    if documented.per_item != len(keys.each):
        problems.append(
            f"{len(keys.each)} keys per item declared, {documented.per_item} documented"
        )
    if not in_order(roles(keys.each) + roles(keys.tail), documented.prose):
        problems.append(
            f"{keys.each} then {keys.tail} not in the header's order: {documented.prose}"
        )
    return problems


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_each_script_declares_its_keys_once_as_its_header_documents_them(name: str) -> None:
    declarations = declared().get(name, [])

    assert len(declarations) == 1, f"{name}: declared {len(declarations)} times"
    assert contract_problems(declarations[0], header(name)) == []


def test_every_declaration_is_of_a_script_and_every_script_is_listed() -> None:
    files = {path.name[:-4] for path in LUA.iterdir() if path.name.endswith(".lua")}

    assert set(declared()) == set(SCRIPT_NAMES) == files - {"_common"}


def test_a_declaration_that_swaps_or_drops_a_key_breaks_the_contract() -> None:
    claim = declared()["claim"][0]
    swapped = ScriptKeys("claim", (claim.head[1], claim.head[0], *claim.head[2:]))
    ack = declared()["ack"][0]
    short = ScriptKeys("ack", ack.head, each=ack.each[:1], tail=ack.tail)
    late = ScriptKeys("ack", ack.head, each=ack.each, tail=ack.tail[::-1])

    assert contract_problems(swapped, header("claim")) != []
    assert contract_problems(short, header("ack")) != []
    assert contract_problems(late, header("ack")) != []


REPLIES: dict[str, Any] = {
    "claim": [1000, -1, -1, 0, ""],
    "ack": [1, 0],
    "put": ["created"],
    "remove": ["a"],
    "pause": "ok",
    "beat": [1000, 0, 1, "[]"],
    "declare": 1000,
    "record": 1,
    "begin": ["started", 1000, -1, ""],
    "finish": 1,
    "index": [0],
    "release": 0,
    "alerts": [],
    "window": 1,
}
"""What each script answers the recording client (enough for its wrapper to decode)."""


class Recording:
    """A client that records each script call (no Redis) and answers as the script would."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def register_script(self, source: str) -> Any:
        name = next(name for name in SCRIPT_NAMES if source.endswith(_body(name)))

        def call(keys: list[str], args: list[Any], client: Any = None) -> Any:
            self.calls.append((name, keys))
            return REPLIES[name]

        return call


def _body(name: str) -> str:
    return LUA.joinpath(f"{name}.lua").read_text()


def test_the_wrappers_send_the_keys_their_headers_document() -> None:
    client = Recording()
    keys = Keys("t", 4)
    part = keys.of("a")
    scripts = Scripts(client, keys)
    item = ("a", "d", None, "runtime", None, None, False, None, None, None, "{}")
    start = RunStart("id", None, 0, "skip", 1000, 0, "h", 10)

    scripts.claim(part, "b", 10, 1000)
    scripts.ack(part, "b", 10, [Settlement("x", "a", 1)])
    scripts.put(part, "add", [item])
    scripts.remove(part, {"a": None})
    scripts.pause("a", "")
    scripts.resume("a", None, None)
    scripts.heartbeat("b", "alive", 1000, {})
    scripts.declare("digest", "{}")
    scripts.record("a", "triggered", "id", None, "", 10)
    scripts.begin("a", start)
    scripts.finish("a", RunEnd("id", None, "succeeded", "", 1, "h", 10))
    scripts.index(part)
    scripts.release("b", [part])
    scripts.take_alerts([part], 10, 1000)
    scripts.window("add", "w", "{}")

    for name, sent in client.calls:  # one item each: one tick, one entry
        documented = header(name)
        expected = len(documented.fixed) + documented.per_item + len(declared()[name][0].tail)
        assert len(sent) == expected, f"{name}: {len(sent)} keys sent, {expected} documented"
        tags = {key[: key.index("}") + 1] for key in sent}
        assert len(tags) == 1, f"{name}: keys of several hash tags: {sent}"
    assert {name for name, _ in client.calls} == set(SCRIPT_NAMES)
