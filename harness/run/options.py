"""The options a run kind's runner may take (pure): ``RunOptions`` and the refusal of options by a
kind that takes none (its descriptor's ``no_options``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import SpecError
from harness.inputs.spec import LoadedSpec
from harness.kinds import kind_info


@dataclass(frozen=True)
class RunOptions:
    """Command-line options a runner may take: ``resume`` (a partial/failed archive to continue) and
    ``workers`` (client worker processes: N or ``auto``); a kind that takes neither refuses them."""

    resume: Path | None = None
    workers: int | str | None = None

    @property
    def empty(self) -> bool:
        """True when no option is given."""
        return self.resume is None and self.workers is None


def check_options(loaded: LoadedSpec, options: RunOptions) -> None:
    """Refuse options the spec's kind does not take (``SpecError``, the descriptor's ``no_options``
    hint), before anything runs."""
    hint = kind_info(loaded.kind).no_options
    if hint and not options.empty:
        raise SpecError(f"{loaded.source or 'the spec'}: kind {loaded.kind} takes neither --resume nor --workers",
                        hint=hint)
