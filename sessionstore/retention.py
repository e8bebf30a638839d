"""Retention policies: which sessions leave a store, tried dry, then applied.

A `Policy` is a value: an action (``"expire"``, an erase; or ``"retire"``,
into an archive through `sessionstore.archive.retire`, then an erase) and
filters that combine as AND. `plan` says what would go, with sizes and
reasons, writing nothing; `apply` plans afresh and acts, one `erase` per
session, each leaving its `Erasure` record as any erase does.

Fork families (sessions linked through ``parent_session``) go whole or stay
whole: a family with one member the policy does not choose stays, all of
it, and a family that goes goes forks first. A run is safe from cron: a
rerun after a kill finishes the job (what was erased is gone, the rest is
chosen again); a session another run erased first is counted
``already_gone``, never erased twice. docs/retention.md has the rules.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from sessionstore.archive import retire
from sessionstore.archive.choosing import age, children_first, idle_since, verdict
from sessionstore.archive.report import parent_cycles
from sessionstore.errors import (
    ConfigurationError,
    CorruptSessionError,
    SessionConflictError,
    SessionNotFoundError,
)
from sessionstore.store import SessionStore, SessionSummary
from sessionstore.timestamps import Timestamp, age_in_words, given_instant

__all__ = [
    "Action",
    "Going",
    "Left",
    "Plan",
    "Policy",
    "RetentionReport",
    "apply",
    "plan",
]

Action = Literal["expire", "retire"]
"""What a policy does to a session it chooses: erase it, or archive it, then erase it."""

_ACTIONS = ("expire", "retire")


@dataclass(frozen=True)
class Policy:
    """Which sessions leave the store, and how.

    Every filter given must choose a session (AND); at least one is needed,
    so that no policy takes everything by accident.

    Attributes:
        action: ``"expire"`` (erase) or ``"retire"`` (archive into ``to``,
            checked byte for byte, then erase).
        to: the archive directory of ``"retire"`` (only then).
        idle_for: only sessions whose last entry (their creation, when they
            have none) is at least this old, as `retire` measures it.
        created_before: only sessions whose ``created_at`` is strictly
            earlier: an aware `datetime`, a `Timestamp`, an RFC 3339 string
            with its offset, or a date alone (its midnight UTC): `given_instant`.
        owner: only sessions whose header names this owner.
        tags: only sessions that carry every one of these tags.
        keep_newest: never the newest N sessions of each owner (by
            ``created_at``, then id; the sessions without an owner are one
            group), whatever the other filters say.
        reason: what each erasure of ``"expire"`` records (default: "expired
            by policy: " and `describe`). ``"retire"`` records "retired to"
            and the archive, as `retire` does.

    Raises:
        ConfigurationError: an action not named above, ``to`` missing for
            ``"retire"`` or given for ``"expire"``, no filter, a naive
            datetime or a time that is not one, a negative ``idle_for``, a
            ``keep_newest`` below 1, ``tags`` given as one string, an empty
            ``owner``, an empty ``reason`` or one given to ``"retire"``.
    """

    action: Action = "expire"
    to: str | os.PathLike[str] | None = None
    idle_for: timedelta | None = None
    created_before: datetime | str | Timestamp | None = None
    owner: str | None = None
    tags: Sequence[str] = ()
    keep_newest: int | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.action not in _ACTIONS:
            raise ConfigurationError(f"action= is 'expire' or 'retire', not {self.action!r}")
        if (self.action == "retire") != (self.to is not None):
            wanted = "retire needs to=, the archive" if self.to is None else "only retire takes to="
            raise ConfigurationError(f"{wanted} (action={self.action!r})")
        if isinstance(self.tags, str):  # a str is a sequence of one-letter tags
            raise ConfigurationError(f"tags= takes a list of tags, not the string {self.tags!r}")
        object.__setattr__(self, "tags", tuple(self.tags))
        if any(not isinstance(tag, str) or not tag for tag in self.tags):
            raise ConfigurationError(f"tags= takes non-empty strings, not {self.tags!r}")
        if self.owner is not None and (not isinstance(self.owner, str) or not self.owner):
            # An empty owner names no session's owner: it would choose nothing, silently.
            raise ConfigurationError(f"owner= takes a non-empty string, not {self.owner!r}")
        if self.keep_newest is not None and (
            isinstance(self.keep_newest, bool)
            or not isinstance(self.keep_newest, int)
            or self.keep_newest < 1
        ):
            raise ConfigurationError(
                f"keep_newest= takes a whole number of 1 or more, not {self.keep_newest!r}"
            )
        if self.reason is not None:
            if self.action == "retire":
                raise ConfigurationError("reason= is for expire: retire records its archive")
            if not isinstance(self.reason, str) or not self.reason.strip():
                raise ConfigurationError(f"reason= must say why, not {self.reason!r}")
        self.cutoff()  # a time that is none, refused here
        if self.idle_for is not None:
            idle_since(self.idle_for)
        if not self.filters():
            raise ConfigurationError(
                "a policy needs a filter (idle_for=, created_before=, owner=, tags= or "
                "keep_newest=): it never takes everything"
            )

    def cutoff(self) -> Timestamp | None:
        """``created_before`` as an instant."""
        if self.created_before is None:
            return None
        return given_instant(self.created_before, "created_before=")

    def filters(self) -> list[str]:
        """The filters given, in words: ``idle 90d``, ``owner alice``..."""
        words = []
        if self.idle_for is not None:
            words.append(f"idle {age_in_words(self.idle_for)}")
        cutoff = self.cutoff()
        if cutoff is not None:
            words.append(f"created before {cutoff}")
        if self.owner is not None:
            words.append(f"owner {self.owner}")
        words.extend(f"tag {tag}" for tag in self.tags)
        if self.keep_newest is not None:
            words.append(f"keeping the newest {self.keep_newest} per owner")
        return words

    def describe(self) -> str:
        """The policy in words, as the default ``reason`` records it."""
        return ", ".join(self.filters())

    def erasure_reason(self) -> str:
        """What each erasure of ``"expire"`` records."""
        return self.reason or f"expired by policy: {self.describe()}"


@dataclass(frozen=True)
class Going:
    """A session a plan chose, and its size.

    Attributes:
        session_id: the session.
        owner: its header's owner.
        created_at: its header's ``created_at``.
        last_activity: the time its idle age is measured from: its last
            entry's ``timestamp``, else its ``created_at``.
        entries: how many entries it holds.
        bytes: its size as `SessionStore.raw_blocks` gives it.
        digest: BLAKE2b-256 of those bytes: ``"expire"`` erases only while
            the session still has them (one written to since stays).
        family: the first id (sorted) of its fork family.
        reason: why it was chosen, in words.
    """

    session_id: str
    owner: str | None
    created_at: str
    last_activity: str
    entries: int
    bytes: int
    digest: str
    family: str
    reason: str


@dataclass(frozen=True)
class Left:
    """A session a filter chose but the policy leaves, and why.

    Attributes:
        session_id: the session.
        reason: why it stays, in a sentence.
        fault: True when something is wrong (its data does not read back,
            the store or the archive refused it); False when it stays by
            rule (its family stays, it is among the newest kept, its age
            cannot be told, it was written to since it was planned).
    """

    session_id: str
    reason: str
    fault: bool = False

    def __str__(self) -> str:
        return f"{self.session_id}: {self.reason}"


@dataclass
class Plan:
    """What a policy would do to a store now.

    Attributes:
        policy: the policy.
        going: the sessions that would go, each family's forks before the
            sessions they came from.
        left: the sessions chosen by a filter but left, and why.
        held: how many sessions the store holds.
    """

    policy: Policy
    going: list[Going] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    held: int = 0

    @property
    def bytes(self) -> int:
        """The size of the sessions that would go."""
        return sum(going.bytes for going in self.going)

    @property
    def entries(self) -> int:
        """The entries of the sessions that would go."""
        return sum(going.entries for going in self.going)


@dataclass
class RetentionReport:
    """What an `apply` did.

    Attributes:
        plan: the plan it acted on.
        gone: the sessions this run erased (retired: archived, then erased).
        already_gone: the sessions planned that another run (or writer)
            erased first: not erased twice, not a fault.
        left: the plan's sessions left, and those this run could not take,
            and why.
        confirmed: False when ``confirm`` said no: nothing was done.
        archive: the archive's absolute path, for ``"retire"``.
    """

    plan: Plan
    gone: list[Going] = field(default_factory=list)
    already_gone: list[str] = field(default_factory=list)
    left: list[Left] = field(default_factory=list)
    confirmed: bool = True
    archive: str | None = None

    @property
    def bytes(self) -> int:
        """The size of the sessions this run erased."""
        return sum(going.bytes for going in self.gone)

    @property
    def ok(self) -> bool:
        """Whether nothing was left for a fault."""
        return not any(left.fault for left in self.left)


# ------------------------------------------------------------------ planning


def _families(summaries: list[SessionSummary]) -> dict[str, str]:
    """Each session's family: the first id (sorted) among the sessions linked
    to it through ``parent_session``, both ways. A link on a cycle (which no
    fork makes) joins no family, as `retire` has it."""
    in_store = {summary.meta.id for summary in summaries}
    links = {s.meta.id: s.meta.parent_session for s in summaries if s.meta.parent_session}
    on_cycle = parent_cycles({child: parent for child, parent in links.items() if parent})
    root = {session_id: session_id for session_id in in_store}

    def find(session_id: str) -> str:
        while root[session_id] != session_id:
            root[session_id] = root[root[session_id]]
            session_id = root[session_id]
        return session_id

    for child, parent in links.items():
        if parent in in_store and child not in on_cycle:
            a, b = find(child), find(parent)
            root[max(a, b)] = min(a, b)
    return {session_id: find(session_id) for session_id in in_store}


def _kept_newest(summaries: list[SessionSummary], keep: int) -> dict[str, str]:
    """The sessions among the newest ``keep`` of their owner, each with why;
    and those whose ``created_at`` is no time, which cannot be ranked: kept too."""
    groups: dict[str | None, list[tuple[Timestamp, str]]] = {}
    kept: dict[str, str] = {}
    for summary in summaries:
        created = age(summary.meta.created_at, "created_at")
        if isinstance(created, str):
            kept[summary.meta.id] = created  # it may be among the newest: never taken blind
        else:
            groups.setdefault(summary.meta.owner, []).append((created, summary.meta.id))
    for owner, sessions in groups.items():
        whose = "sessions without an owner" if owner is None else f"{owner}'s sessions"
        for _, session_id in sorted(sessions, reverse=True)[:keep]:
            kept[session_id] = f"among the newest {keep} of {whose}; kept"
    return kept


def _chosen(
    policy: Policy,
    summary: SessionSummary,
    cutoff: Timestamp | None,
    idle_from: Timestamp | None,
) -> bool | str:
    """True when every filter but ``keep_newest`` chooses the session, False
    when one does not, else why it cannot be told (`verdict`'s words)."""
    meta = summary.meta
    if policy.owner is not None and meta.owner != policy.owner:
        return False
    if not set(policy.tags) <= set(meta.tags):
        return False
    return verdict(summary, cutoff, idle_from, None)


def _why(policy: Policy, summary: SessionSummary, last: str) -> str:
    """Why a session was chosen, in words."""
    words = []
    if policy.idle_for is not None:
        since = age(last, "last activity")
        if not isinstance(since, str):
            try:
                idle = Timestamp.now().to_datetime() - since.to_datetime()
            except ValueError:  # before the year 1 in UTC, which no datetime holds
                words.append(f"idle since {since}")
            else:
                # Whole days (else hours): a column of reasons reads at a glance.
                whole = (
                    timedelta(days=idle.days)
                    if idle.days
                    else timedelta(hours=idle.seconds // 3600)
                )
                words.append(f"idle {age_in_words(whole)}")
    if policy.created_before is not None:
        words.append(f"created {summary.meta.created_at}")
    if policy.owner is not None:
        words.append(f"owner {policy.owner}")
    words.extend(f"tag {tag}" for tag in policy.tags)
    if policy.keep_newest is not None:
        words.append(f"not among the newest {policy.keep_newest}")
    return ", ".join(words)


async def _measured(store: SessionStore, session_id: str) -> tuple[int, str]:
    """The size and BLAKE2b-256 of a session's bytes, as `raw_blocks` gives them."""
    digest = hashlib.blake2b(digest_size=32)
    size = 0
    async for block in store.raw_blocks(session_id):
        digest.update(block)
        size += len(block)
    return size, digest.hexdigest()


async def plan(store: SessionStore, policy: Policy) -> Plan:
    """What ``policy`` would do to ``store`` now, writing nothing.

    Reads every session's summary, and the bytes of each session chosen
    (to give its size and digest).

    Args:
        store: a store with `Capability.SUMMARIES` and `Capability.ERASURE`.
        policy: the policy.

    Returns:
        The plan: the sessions that would go, forks first, and those a
        filter chose but the policy leaves, with why.

    Raises:
        CapabilityError: the store does not list or erase sessions.
        StorageError: the store could not be read.
    """
    cutoff = policy.cutoff()
    idle_from = idle_since(policy.idle_for) if policy.idle_for is not None else None
    summaries = await store.summaries(order="created", limit=None)
    result = Plan(policy=policy, held=len(summaries))
    family = _families(summaries)
    kept = _kept_newest(summaries, policy.keep_newest) if policy.keep_newest else {}

    chosen: dict[str, SessionSummary] = {}
    staying: dict[str, list[str]] = {}  # family -> its members not chosen
    for summary in summaries:
        session_id = summary.meta.id
        choice = _chosen(policy, summary, cutoff, idle_from)
        if choice is True and session_id in kept:
            result.left.append(Left(session_id, kept[session_id]))
            choice = False
        elif choice is not True and choice is not False:
            result.left.append(Left(session_id, choice, summary.fault is not None))
            choice = False
        if choice:
            chosen[session_id] = summary
        else:
            staying.setdefault(family[session_id], []).append(session_id)

    members: dict[str, list[str]] = {}
    for session_id in chosen:
        members.setdefault(family[session_id], []).append(session_id)
    children: dict[str, list[str]] = {}
    for session_id, summary in chosen.items():
        parent = summary.meta.parent_session
        if parent in chosen and family[parent] == family[session_id]:
            children.setdefault(parent, []).append(session_id)

    for root in sorted(members):
        stay = staying.get(root)
        if stay:
            shown = ", ".join(sorted(stay)[:3]) + (", ..." if len(stay) > 3 else "")
            why = f"its fork family stays: {shown} not chosen; left whole"
            result.left.extend(Left(session_id, why) for session_id in sorted(members[root]))
            continue
        measured: list[Going] = []
        faults: list[Left] = []
        for session_id in children_first(set(members[root]), children):
            summary = chosen[session_id]
            try:
                size, digest = await _measured(store, session_id)
            except SessionNotFoundError:
                continue  # erased since it was listed: nothing of it to plan
            except CorruptSessionError as exc:
                why = f"its stored data does not read back ({exc}); left"
                faults.append(Left(session_id, why, True))
                continue
            last = summary.last_timestamp if summary.entries else None
            last = last or summary.meta.created_at
            measured.append(
                Going(
                    session_id=session_id,
                    owner=summary.meta.owner,
                    created_at=summary.meta.created_at,
                    last_activity=last,
                    entries=summary.entries,
                    bytes=size,
                    digest=digest,
                    family=root,
                    reason=_why(policy, summary, last),
                )
            )
        if faults:
            why = f"its fork family stays: {faults[0].session_id} does not read back; left whole"
            result.left.extend(faults)
            result.left.extend(Left(going.session_id, why) for going in measured)
        else:
            result.going.extend(measured)
    return result


# ------------------------------------------------------------------ applying


Progress = Callable[[int, int], None]
Confirm = Callable[[Plan], Awaitable[bool]]


async def apply(
    store: SessionStore,
    policy: Policy,
    *,
    confirm: Confirm | None = None,
    progress: Progress | None = None,
) -> RetentionReport:
    """Plan ``policy`` afresh, then take the sessions it chose out of ``store``.

    Every act is one `SessionStore.erase`, with its `Erasure` record; a
    family goes forks first, and once one of its sessions stays (written to
    since the plan, or refused), the rest of that family stays too. A
    session erased by another run meanwhile is counted in
    ``already_gone``. Run it again after a kill: it finishes the job.

    Args:
        store: a store with `Capability.SUMMARIES` and `Capability.ERASURE`.
        policy: the policy.
        confirm: called as ``await confirm(plan)`` before anything is
            written; when it returns False nothing is done (the report says
            ``confirmed=False``).
        progress: called as ``progress(done, total)`` after each session
            (for ``"retire"``: after each one exported, then each checked).

    Returns:
        The report; check `RetentionReport.ok`.

    Raises:
        CapabilityError: the store does not list or erase sessions.
        StorageError: the store (or the archive) could not be read or
            written; what was erased before it is gone, the rest stays.
    """
    planned = await plan(store, policy)
    report = RetentionReport(plan=planned, left=list(planned.left))
    if not planned.going:
        return report
    if confirm is not None and not await confirm(planned):
        report.confirmed = False
        return report
    if policy.action == "retire":
        await _retire(store, policy, planned, report, progress)
    else:
        await _expire(store, policy, planned, report, progress)
    return report


async def _expire(
    store: SessionStore,
    policy: Policy,
    planned: Plan,
    report: RetentionReport,
    progress: Progress | None,
) -> None:
    reason = policy.erasure_reason()
    stayed: dict[str, str] = {}  # family -> the member that stayed
    for done, going in enumerate(planned.going, 1):
        if going.family in stayed:
            why = f"its fork {stayed[going.family]} stays; left"
            report.left.append(Left(going.session_id, why))
        else:
            try:
                await store.erase(going.session_id, reason=reason, digest=going.digest)
                report.gone.append(going)
            except SessionNotFoundError:
                report.already_gone.append(going.session_id)
            except SessionConflictError as exc:
                stayed[going.family] = going.session_id
                why = f"written to since planned ({exc}); left"
                report.left.append(Left(going.session_id, why))
            except CorruptSessionError as exc:
                stayed[going.family] = going.session_id
                why = f"its stored data does not read back ({exc}); left"
                report.left.append(Left(going.session_id, why, True))
        if progress is not None:
            progress(done, len(planned.going))


async def _retire(
    store: SessionStore,
    policy: Policy,
    planned: Plan,
    report: RetentionReport,
    progress: Progress | None,
) -> None:
    assert policy.to is not None
    by_id = {going.session_id: going for going in planned.going}
    retired = await retire(store, policy.to, sessions=list(by_id), progress=progress)
    report.archive = retired.archive
    report.gone.extend(by_id[session_id] for session_id in retired.retired)
    if not retired.skipped:
        return
    # A session planned that is no longer in the store was taken by another
    # run (to this archive or elsewhere): gone, not a fault of this one.
    still = {summary.meta.id for summary in await store.summaries(limit=None)}
    for issue in retired.skipped:
        if issue.session_id not in still:
            report.already_gone.append(issue.session_id)
        else:
            report.left.append(Left(issue.session_id, issue.reason, issue.fault))
