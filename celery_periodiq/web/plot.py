"""A small inline SVG of an entry's kept history: run durations and start delays."""

from __future__ import annotations

from collections.abc import Sequence

from celery_periodiq.present.terminal import seconds
from celery_periodiq.store.views import Event

__all__ = ["runs_svg"]

_WIDTH, _HEIGHT, _PAD = 640, 160, 28


def _series(events: Sequence[Event]) -> tuple[list[float], list[float]]:
    """Durations of finished runs and start delays of started ones, in seconds, oldest first."""
    durations, delays = [], []
    for event in reversed(events):
        if event.kind in ("succeeded", "failed", "timeboxed") and event.fields.get("duration"):
            try:
                durations.append(int(event.fields["duration"]) / 1000)
            except ValueError:
                continue
        elif event.kind == "started" and event.tick is not None:
            delays.append(max((event.at - event.tick).total_seconds(), 0.0))
    return durations, delays


def _line(values: list[float], top: float, css: str) -> str:
    if not values:
        return ""
    step = (_WIDTH - 2 * _PAD) / max(len(values) - 1, 1)
    points = " ".join(
        f"{_PAD + index * step:.1f},{_HEIGHT - _PAD - (value / top) * (_HEIGHT - 2 * _PAD):.1f}"
        for index, value in enumerate(values)
    )
    return f'<polyline class="{css}" fill="none" points="{points}"/>'


def _chart(values: list[float], css: str, title: str) -> str:
    top = max([*values, 0.001])
    return (
        f'<svg class="plot" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{title}">'
        f'<line x1="{_PAD}" y1="{_HEIGHT - _PAD}" x2="{_WIDTH - _PAD}" y2="{_HEIGHT - _PAD}" '
        f'class="axis"/>'
        f'<text x="{_PAD}" y="{_PAD - 10}" class="label">{title}, up to {seconds(top)} '
        f"({len(values)} runs)</text>{_line(values, top, css)}</svg>"
    )


def runs_svg(events: Sequence[Event]) -> str:
    """Two charts as SVG markup, run durations and start delays, each on its own scale
    (numbers only: nothing from the events is written as text), or "" when there is
    nothing to plot."""
    durations, delays = _series(events)
    charts = [
        _chart(values, css, title)
        for values, css, title in (
            (durations, "duration", "Run duration"),
            (delays, "delay", "Start delay"),
        )
        if values
    ]
    return "".join(charts)
