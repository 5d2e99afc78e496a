"""``Periodiq.simulate``: read the stored entries and simulate each with the beat's own
planning code (:mod:`celery_periodiq.model.simulate`); nothing is written. Paused,
disabled, ended and quarantined entries are listed with why nothing of them fires.
"""

from __future__ import annotations

from datetime import datetime

from celery_periodiq.errors import EntryError, EntryNotFoundError, SimulationError, shown
from celery_periodiq.model.plan import from_ms
from celery_periodiq.model.simulate import check_range, simulate_entry
from celery_periodiq.model.simulation import MOST_LIMIT, MOST_LISTED, EntrySimulation, Simulation
from celery_periodiq.model.simulation import Settings as PlanSettings
from celery_periodiq.model.windows import Window
from celery_periodiq.ops.steer import check_name, check_owner, not_found, some_names
from celery_periodiq.ops.windows import list_windows, windows_of
from celery_periodiq.runtime import Runtime
from celery_periodiq.store.store import Store
from celery_periodiq.store.views import StoredEntry

__all__ = ["simulate"]


def simulate(
    runtime: Runtime,
    *,
    start: datetime | None,
    end: datetime | None,
    down: tuple[datetime, datetime] | None,
    owner: str | None,
    names: list[str] | None,
    limit: int,
) -> Simulation:
    """What the beats would publish from ``start`` to ``end``; the arguments and errors
    are those of :meth:`Periodiq.simulate <celery_periodiq.api.Periodiq.simulate>`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MOST_LIMIT:
        raise SimulationError(
            f"limit={shown(limit)} is invalid (allowed: a whole number from 0 to {MOST_LIMIT})"
        )
    if owner is not None:
        check_owner(owner)
    if names is not None:
        if not isinstance(names, list | tuple) or not names:
            raise EntryError(f"names={shown(names)} is invalid (allowed: a non-empty list)")
        names = list(dict.fromkeys(check_name(name) for name in names))
    if start is not None:
        check_range(start, end, down)  # bad input fails before Redis is asked
    with runtime.guard():
        now = from_ms(runtime.store.now_ms())
        begin, finish, window = check_range(
            now if start is None else start, end, down, now=start is None
        )
        stored = _chosen(runtime.store, owner, names)
        windows = tuple(list_windows(runtime.store))
    settings = runtime.settings
    plan = PlanSettings(settings.key_prefix, settings.catchup_cap, settings.default_grace)
    simulated, listed = [], 0
    for item in sorted(stored, key=lambda item: item.name):
        room = min(limit, MOST_LISTED - listed)
        result = _simulated(item, begin, finish, window, plan, start is None, room, windows)
        listed += len(result.fires)
        simulated.append(result)
    far = datetime.max.replace(tzinfo=now.tzinfo)
    simulated.sort(key=lambda item: (item.fires[0].sent if item.fires else far, item.name))
    return Simulation(begin, finish, window, start is None, limit, tuple(simulated))


def _chosen(store: Store, owner: str | None, names: list[str] | None) -> list[StoredEntry]:
    """The entries a simulation covers: ``names`` (every one must exist), those of
    ``owner``, or all."""
    if names is None:
        return store.load(None if owner is None else store.owned_by(owner))
    stored = store.load(names)
    missing = sorted(set(names) - {item.name for item in stored})
    if len(missing) == 1:
        raise not_found(store, missing[0])
    if missing:
        raise EntryNotFoundError(f"no entries named {some_names(missing)}")
    if owner is not None:
        stored = [item for item in stored if item.entry and item.entry.owner == owner]
    return stored


def _simulated(
    item: StoredEntry,
    start: datetime,
    end: datetime,
    down: tuple[datetime, datetime] | None,
    settings: PlanSettings,
    from_stored: bool,
    limit: int,
    windows: tuple[Window, ...] = (),
) -> EntrySimulation:
    """One stored entry's simulation, or why nothing of it fires."""
    entry, state = item.entry, item.status
    if entry is None or item.invalid:
        tz = "UTC" if entry is None else entry.tz
        schedule = None if entry is None else entry.schedule
        return EntrySimulation(
            item.name, state, tz, schedule, "none", f"quarantined: {item.invalid}"
        )
    idle = None
    if item.paused:
        note = f" (note: {item.note})" if item.note else ""
        # a timed pause's end is not simulated yet: what follows it is not shown
        ends = "resumed" if item.paused_until is None else item.paused_until.isoformat()
        idle = f"paused until {ends}{note}"
    elif not entry.enabled:
        idle = "disabled: it never fires"
    elif from_stored and state == "ended":
        idle = "ended: it has no next tick"
    if idle is not None:
        return EntrySimulation(item.name, state, entry.tz, entry.schedule, "none", idle)
    first = None
    stored_next = item.state.get("next", "")
    if from_stored and stored_next.isdigit():
        nominal = from_ms(int(stored_next))
        first = (nominal, item.due or nominal)
    return simulate_entry(
        entry,
        state=state,
        start=start,
        end=end,
        down=down,
        settings=settings,
        first=first,
        limit=limit,
        runs=item.runs,
        windows=windows_of(windows, entry),
    )
