"""The beat's log of what a pass sent."""

from __future__ import annotations

import logging

from celery_periodiq.model.plan import Tick, tick_text, to_ms

__all__ = ["log_sent"]

logger = logging.getLogger("celery_periodiq.dispatch")
# A pass that sends more ticks than this logs each at DEBUG and one summary at INFO.
_LOG_EACH = 10


def log_sent(sent: list[tuple[str, Tick]]) -> None:
    """One INFO line per tick sent, or, for a pass that sent many, DEBUG lines and one
    INFO summary, so a beat with many entries does not flood its log."""
    if not sent:
        return
    each = logging.INFO if len(sent) <= _LOG_EACH else logging.DEBUG
    if logger.isEnabledFor(each):
        for name, tick in sent:
            logger.log(
                each,
                "periodiq: entry %r tick %s sent as %s (stands for %d)",
                name,
                tick_text(to_ms(tick.nominal)),
                tick.task_id,
                tick.missed,
            )
    if each == logging.DEBUG:
        logger.info(
            "periodiq: sent %d ticks of %d entries (ticks %s to %s)",
            len(sent),
            len({name for name, _ in sent}),
            tick_text(to_ms(min(tick.nominal for _, tick in sent))),
            tick_text(to_ms(max(tick.nominal for _, tick in sent))),
        )
