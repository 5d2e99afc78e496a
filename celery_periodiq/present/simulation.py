"""The text of ``celery periodiq simulate``: a pure function of the
:class:`~celery_periodiq.model.simulate.Simulation`.

The span, then per entry its fires and drops in tick order, then the totals and what
the simulation assumes. Ticks are shown in UTC, and also on the entry's zone when it
has another.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo

from celery_periodiq.model.simulation import EntrySimulation, Fire, Simulation
from celery_periodiq.present.shapes import ASSUMES
from celery_periodiq.present.terminal import Column, Row, Style, table, when
from celery_periodiq.schedules.zones import zone

__all__ = ["simulation_text"]

_NOTES = {"reboot": "@reboot: the beats start", "shutdown": "@shutdown: the beats stop"}


_WORDS = {
    "missed": "missed",
    "skipped_overlap": "skipped (overlap)",
    "skipped_window": "skipped (window)",
    "deferred": "deferred (window)",
    "excluded": "skipped (excluded date)",
}


def _utc(instant: datetime) -> str:
    local = instant.astimezone(UTC)
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{local.microsecond // 1000:03d}" if local.microsecond else "")


def _late(fire: Fire) -> str:
    """How much later than its tick a fire is sent: ``+4.478s``."""
    seconds = (fire.sent - fire.tick).total_seconds()
    return f"+{seconds:.3f}".rstrip("0").rstrip(".") + "s"


def _fire_note(fire: Fire) -> tuple[str, str | None]:
    if fire.kind in _NOTES:
        return _NOTES[fire.kind], "info"
    stands = f", stands for {fire.stands_for}" if fire.stands_for > 1 else ""
    if fire.kind == "caught_up":
        sent = fire.sent.astimezone(UTC)
        shown = sent.strftime(
            "%H:%M:%S" if sent.date() == fire.tick.astimezone(UTC).date() else "%m-%d %H:%M:%S"
        )
        return f"caught up {shown} UTC{stands}", "warn"
    return ("" if fire.sent == fire.tick else f"sent {_late(fire)} (jitter)") + stands, None


def _rows(item: EntrySimulation, zone_: tzinfo) -> list[tuple[datetime, Row]]:
    local = item.tz != "UTC"
    rows: list[tuple[datetime, Row]] = []

    def cells(tick: datetime, note: tuple[str, str | None]) -> list[tuple[str, str | None]]:
        shown = [(when(tick, zone_, precise=True), None)] if local else []
        return [*shown, (_utc(tick), None), note]

    for fire in item.fires:
        rows.append((fire.tick, Row(cells(fire.tick, _fire_note(fire)))))
    for dropped in item.dropped:
        word = _WORDS.get(dropped.reason, dropped.reason)
        for tick in dropped.ticks:
            rows.append((tick, Row(cells(tick, (word, "warn")))))
        rest = dropped.count - len(dropped.ticks)  # older than the listed ones
        if rest:
            note = word if rest == 1 else f"{word}, and {rest - 1:,} more after it, unlisted"
            rows.append((dropped.first, Row(cells(dropped.first, (note, "warn")))))
    rows.sort(key=lambda pair: pair[0])
    return rows


def _totals(fires: int, caught_up: int, missed: int, exact: bool = True) -> str:
    noun = "fire" if fires == 1 else "fires"
    text = f"{'at least ' if not exact else ''}{fires:,} {noun}"
    if caught_up:
        text += f" ({caught_up:,} caught up)"
    return text + (f", {missed:,} missed" if missed else "")


def _entry_lines(item: EntrySimulation, style: Style, width: int) -> list[str]:
    head = f"{style(item.name, 'head')}  {style(item.state, item.state)}"
    if item.schedule is not None:
        head += f"  {item.schedule}" + ("" if item.tz == "UTC" else f" ({item.tz})")
    lines = [head]
    if item.reason is not None and not item.fires:
        return [*lines, style(f"  nothing fires: {item.reason}", "dim"), ""]
    if item.reason is not None:
        lines.append(style(f"  {item.reason}", "dim"))
    zone_ = zone(item.tz)
    columns = [Column(f"TICK ({item.tz})")] if item.tz != "UTC" else []
    columns += [Column("TICK (UTC)"), Column("NOTE", shrink=8, overflow=True)]
    rows = [row for _, row in _rows(item, zone_)]
    lines += ["  " + line for line in table(columns, rows, width - 2, style)]
    if item.more:
        floor = "" if item.more_exact else "at least "
        lines.append(f"  … and {floor}{item.more:,} more fires, not listed (--limit)")
    counts = _totals(item.fire_count, item.caught_up_count, item.missed_count, item.more_exact)
    return [*lines, style(f"  {counts}", "dim"), ""]


def simulation_text(simulation: Simulation, style: Style, width: int) -> str:
    """The span, then per entry (soonest first fire first) its fires and drops in tick
    order, then the totals and what the simulation assumes."""
    origin = "stored next tick" if simulation.from_stored else "definition"
    lines = [
        f"{style('from', 'dim')}  {_utc(simulation.start)} UTC  (each entry from its {origin})",
        f"{style('to', 'dim')}    {_utc(simulation.end)} UTC",
    ]
    if simulation.down is not None:
        gone, back = simulation.down
        lines.append(
            f"{style('down', 'dim')}  {_utc(gone)} UTC .. {_utc(back)} UTC: ticks due then "
            "are decided when the beats come back"
        )
    lines.append("")
    entries: Sequence[EntrySimulation] = simulation.entries
    if not entries:
        return "\n".join([*lines, "No entries."])
    for item in entries:
        lines += _entry_lines(item, style, width)
    idle = [item for item in entries if item.fire_count == 0 and item.missed_count == 0]
    noun = "entry" if len(entries) == 1 else "entries"
    total = _totals(
        simulation.fire_count, simulation.caught_up_count, simulation.missed_count, simulation.exact
    )
    summary = f"{len(entries)} {noun}: {total}"
    if idle:
        summary += f"; {len(idle)} {'entry fires' if len(idle) == 1 else 'entries fire'} nothing"
    lines.append(style(summary, "head"))
    lines.append(style(f"Assumes {ASSUMES}.", "dim"))
    return "\n".join(lines)
