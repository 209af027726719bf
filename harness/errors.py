"""The one exception family of dsv4h.

Every error carries a message (what was found) and a hint (what to do next).
Only ``harness.cli`` turns these into exit codes; library code raises, never prints or exits.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError", "CorpusError", "DsvError", "EvidenceError", "IdentityMismatch", "LedgerError", "MeasurementError",
    "OracleError", "OwnershipError", "PatchError", "RunInterrupted", "ServerUnreachable", "ServiceDied", "ServiceError",
    "SlurmError", "SpecError",
]


class DsvError(Exception):
    """Base of every error dsv4h raises on purpose.

    ``exit_code`` is the process exit status the CLI uses; ``hint`` is one sentence telling the
    user what to do next.
    """

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SpecError(DsvError):
    """A campaign, profile, workload or config file is malformed (names file, field and fix)."""

    exit_code = 2


class CorpusError(DsvError):
    """A corpus is missing, malformed or changed since its manifest."""

    exit_code = 3


class ServiceError(DsvError):
    """A service could not be reached, started, verified or stopped."""

    exit_code = 4


class ServerUnreachable(ServiceError):
    """Nothing answers at the target URL."""


class ServiceDied(ServiceError):
    """An owned service process exited while it was needed."""


class IdentityMismatch(ServiceError):
    """The running server is not what the profile asked for."""


class OwnershipError(ServiceError):
    """An unrelated process owns a GPU the service needs."""


class MeasurementError(DsvError):
    """A round or wave could not be measured (failed requests, dead server mid-round)."""

    exit_code = 5


class ArchiveError(DsvError):
    """An archive is missing, tampered with, or would be overwritten."""

    exit_code = 6


class LedgerError(DsvError):
    """A ledger table cannot be read or appended."""

    exit_code = 6


class EvidenceError(DsvError):
    """An operation would break an evidence rule (docs/evidence-rules.md#numbered-rules); the message cites the rule."""

    exit_code = 7


class OracleError(DsvError):
    """An oracle file is malformed or an oracle check could not run."""

    exit_code = 8


class PatchError(DsvError):
    """A model patch series cannot be applied, reverted or verified."""

    exit_code = 9


class RunInterrupted(DsvError):
    """The user interrupted a run; what was measured so far is kept and marked partial."""

    exit_code = 130


class SlurmError(DsvError):
    """Slurm refused a job or could not be asked (sbatch, squeue, scontrol); the message carries its words."""

    exit_code = 10
