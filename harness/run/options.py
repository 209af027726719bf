"""The options a run kind's runner may take (pure): ``RunOptions``, the refusal of options by a
kind that takes none (its descriptor's ``no_options``), and the resume command a run prints."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
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


WORKSPACE_ENV = "DSV4H_WORKSPACE"


def resume_command(spec: Path | str | None, archive: str, workspace: Path,
                   env: Mapping[str, str] | None = None) -> str:
    """The command that continues ``archive`` as printed for the user to paste: ``dsv4h campaign run
    SPEC --resume ARCHIVE -w WORKSPACE``, every argument shell-quoted. ``-w`` is left out only when the
    command would pick the same workspace without it: ``$DSV4H_WORKSPACE`` unset (``env``, default
    ``os.environ``) and the workspace the current directory."""
    env = os.environ if env is None else env
    cmd = f"dsv4h campaign run {shlex.quote(str(spec or 'SPEC'))} --resume {shlex.quote(archive)}"
    if env.get(WORKSPACE_ENV) is None and _same_dir(workspace, Path.cwd()):
        return cmd
    return f"{cmd} -w {shlex.quote(str(workspace))}"


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:  # a path that cannot be resolved is not the current directory
        return False
