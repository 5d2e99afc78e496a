"""What ``doctor`` finds: a :class:`Check` per finding, and for the checks of the entries
the :class:`Scope` of what they read (every entry, or a sample)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Check", "Scope"]


@dataclass(frozen=True, slots=True)
class Scope:
    """Which entries a check of the entries read."""

    checked: int
    """How many entries were read."""
    total: int
    """How many entries there are (``checked`` when every one was read)."""
    sampled: bool
    """Whether only some were read: every one a beat quarantined and a random sample."""

    def said(self, detail: str, *, short: bool = False) -> str:
        """``detail``, followed by what was checked when it was a sample (``short``: in
        a few words, for the checks after the first)."""
        if not self.sampled:
            return detail
        if short:
            return f"{detail} (in the sample of {self.checked:,} of {self.total:,} entries)"
        return (
            f"{detail}; checked {self.checked:,} of {self.total:,} entries: every one a "
            "beat quarantined and a random sample (doctor --full checks every one)"
        )


@dataclass(frozen=True, slots=True)
class Check:
    """One finding of :meth:`Periodiq.diagnose`."""

    name: str
    """``redis``, ``sentinel`` (behind Sentinel), ``scripts``, ``beats``, ``clock``,
    ``broker``, ``entries``, ``alerts``, ``tasks`` or ``runs`` or ``indexes``."""
    status: str
    """``ok``, ``warn``, ``fail``, or ``skip`` (not checked: Redis is unreachable)."""
    detail: str
    """One sentence: what was found, and for a problem what it means."""
    scope: Scope | None = None
    """For a check of the entries, which ones it read; None for the others."""
