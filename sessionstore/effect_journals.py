"""Effects across every journal of a store (docs/effects.md): what a worker
asks for before serving, and what an operator prunes. Plain functions over
the public protocol (`SessionStore.journals`, `SessionJournal.effects`), so
every backend, and a store written by anyone, has them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sessionstore.effect_options import forget_cutoff
from sessionstore.timestamps import Timestamp

if TYPE_CHECKING:
    from sessionstore.effect_lines import EffectState
    from sessionstore.models import Effect
    from sessionstore.store import SessionStore

__all__ = ["JournalEffect", "effects_in_doubt", "forget_effects"]


@dataclass(frozen=True)
class JournalEffect:
    """An effect, and the journal it belongs to (`effects_in_doubt`).

    Attributes:
        journal: the journal's name (``store.journal(journal).effects`` settles it).
        effect: where it stands.
    """

    journal: str
    effect: EffectState


async def effects_in_doubt(store: SessionStore) -> list[JournalEffect]:
    """Every effect in doubt or dead-lettered, of every journal of ``store``,
    by journal name, then in the order started: what a worker asks for before
    it serves (each needs a check, a run said idempotent, or an operator),
    and what ``sessionstore effects`` lists.

    It reads every effect of every journal (`EffectLog.in_doubt`); nothing
    is written.
    """
    found: list[JournalEffect] = []
    for name in sorted(await store.journals()):
        found += [JournalEffect(name, s) for s in await store.journal(name).effects.in_doubt()]
    return found


async def forget_effects(
    store: SessionStore,
    before: str | datetime | Timestamp,
    *,
    reason: str,
    by: str | None = None,
) -> dict[str, list[Effect]]:
    """`EffectLog.forget` on every journal of ``store``: the effects finished
    before ``before`` forgotten, each recorded; a forgotten key's next run
    runs the effect afresh.

    Returns:
        The lines recorded, per journal (journals with none left out).

    Raises:
        ConfigurationError: as `EffectLog.forget`, before any journal is touched.
    """
    cutoff = forget_cutoff(before, reason)
    forgotten: dict[str, list[Effect]] = {}
    for name in sorted(await store.journals()):
        lines = await store.journal(name).effects.forget(cutoff, reason=reason, by=by)
        if lines:
            forgotten[name] = lines
    return forgotten
