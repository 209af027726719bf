"""The registry of evidence rules (pure): which rule functions exist, the rule ids each emits and the run
kinds each applies to.

Contract:

- ``@rule(*ids, kinds=...)`` registers the function it decorates and returns it unchanged (same object,
  same type): called directly, a rule judges whatever archive it is given; only :func:`applicable`
  (``harness.evidence.rules.check``) filters by kind.
- ``kinds`` is :data:`ALL` (every archive, whatever its kind, including one whose kind is unknown) or a
  non-empty tuple of kind names (:data:`KIND_PROTOCOLS`). An unknown kind, an empty tuple, no id, or an
  id that another rule already registered raises ``ValueError`` when the family module is imported.
- The registry keeps registration order: the order in which ``harness.evidence.rules`` imports the
  family modules (a family imported by another one registers first), then definition order. Findings
  do not depend on it: ``check`` sorts them, and no two rules emit the same id.
- :func:`archive_kind` is the kind a rule's declaration is matched against: the run block's ``kind``
  when it is a known kind, else the kind of its ``protocol_class`` (older archives and hand-built data
  carry no kind), else None, which only :data:`ALL` rules accept.

The kind <-> protocol class pairs come from the kind descriptor (``harness.kinds``, base layer).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar

from harness.evidence.findings import ArchiveData, Finding
from harness.kinds import KINDS, kind_of_run

KindName = str
"""A run kind (``RunBlock.kind``): a key of the kind descriptor, ``harness.kinds.KINDS``."""

KIND_PROTOCOLS: Final[Mapping[KindName, str]] = MappingProxyType({k.name: k.protocol_class for k in KINDS.values()})
"""Every run kind and its protocol class, from the kind descriptor (one protocol class per kind)."""

ROUND_PROTOCOLS: Final = ("rate-sweep", "sla-search")
"""Protocol classes whose measured units are open-loop rounds (a sweep round; an SLA-search probe's round)."""
REPLAY_PROTOCOL: Final = "trace-replay"
"""The protocol class whose one measured unit is the replay's window."""


class AllKinds(enum.Enum):
    """The type of :data:`ALL`."""

    ALL = "all"


ALL: Final = AllKinds.ALL
"""A rule that applies to every archive, whatever its kind."""

Kinds = tuple[KindName, ...] | Literal[AllKinds.ALL]
RuleFn = Callable[[ArchiveData], list[Finding]]
_F = TypeVar("_F", bound=Callable[[ArchiveData], list[Finding]])


@dataclass(frozen=True)
class Rule:
    """One registered rule: its function, the rule ids its findings carry and the kinds it applies to."""

    fn: RuleFn
    ids: tuple[str, ...]
    kinds: Kinds

    @property
    def name(self) -> str:
        """The rule function's name (``rule_...``)."""
        return getattr(self.fn, "__name__", repr(self.fn))

    @property
    def kind_names(self) -> tuple[KindName, ...]:
        """The known kinds it applies to (every one of them for :data:`ALL`)."""
        return tuple(KIND_PROTOCOLS) if self.kinds is ALL else self.kinds

    def applies_to(self, kind: str | None) -> bool:
        """Whether it judges an archive of ``kind`` (:func:`archive_kind`; None: unknown)."""
        return self.kinds is ALL or kind in self.kinds


_REGISTRY: list[Rule] = []


def rule(*ids: str, kinds: Kinds) -> Callable[[_F], _F]:
    """Register the decorated rule function as emitting ``ids`` and applying to ``kinds`` (module
    docstring); the function is returned unchanged."""
    if not ids:
        raise ValueError("a rule declares at least one rule id")
    if kinds is not ALL:
        unknown = [k for k in kinds if k not in KIND_PROTOCOLS]
        if not kinds or unknown:
            raise ValueError(f"rule {ids[0]}: kinds must be ALL or known kinds, not {kinds!r}")
    taken = {i for r in _REGISTRY for i in r.ids} & set(ids)
    if taken or len(set(ids)) != len(ids):
        raise ValueError(f"rule ids registered twice: {sorted(taken) or list(ids)}")

    def register(fn: _F) -> _F:
        _REGISTRY.append(Rule(fn, tuple(ids), kinds))
        return fn

    return register


def registered() -> tuple[Rule, ...]:
    """Every registered rule, in registration order."""
    return tuple(_REGISTRY)


def archive_kind(run: Mapping[str, Any]) -> KindName | None:
    """The kind of an archive's run block (module docstring): ``kind``, else its protocol class's kind."""
    info = kind_of_run(run.get("kind"), run.get("protocol_class"))
    return info.name if info is not None else None


def applicable(rules: tuple[Rule, ...], d: ArchiveData) -> tuple[Rule, ...]:
    """The rules of ``rules`` that apply to archive ``d``'s kind, in their order."""
    kind = archive_kind(d.run)
    return tuple(r for r in rules if r.applies_to(kind))
