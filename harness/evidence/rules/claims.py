"""Evidence rules about the claim class against the served speculative configuration (pure).

``speculative-native``: a native-ar claim (a run's, or the AR legs' of a matched AR/SD run) on a
service that speculates. ``claim-vs-server``: a
speculative claim on a service that does not, or a full-target claim on a service that witnesses
relaxed verification. Both read the configuration through
``harness.service.identity.speculative_identity.served_speculation`` (the server's own report, else the launch
argv), so they cover archives imported from elsewhere or made before the start-time check
(``verify_identity``) existed. All three apply to every kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule
from harness.kinds import MATCHED
from harness.service.identity.speculative_identity import SPECULATIVE_CLAIMS, claim_conflicts, served_speculation


def _name(s: Mapping[str, Any], i: int) -> str:
    return f"service#{s.get('start_index', i + 1)}"


def _service_claim(run: Mapping[str, Any], service: Mapping[str, Any]) -> str:
    """The claim class one recorded service was started under: the run's, except the AR legs of a matched
    AR/SD run (the descriptor's matched kind; ``first_leg`` AR...), which are native-ar."""
    if run.get("protocol_class") == MATCHED.protocol_class and str(service.get("first_leg") or "").startswith("AR"):
        return "native-ar"
    return str(run.get("claim_class") or "")


@rule("speculative-native", kinds=ALL)
def rule_speculative_native(d: ArchiveData) -> list[Finding]:
    """A native-ar claim (the run's, or a matched run's AR leg) is refused when its service reports (or,
    reporting nothing, was launched with) speculative decoding."""
    bad = [_name(s, i) for i, s in enumerate(d.services) if _service_claim(d.run, s) == "native-ar"
           and served_speculation(s.get("server_info"), s.get("command")) is not None]
    if not bad:
        return []
    return [_f(d.archive_id, "speculative-native", "blocking",
               "a speculative algorithm is active under a native-ar claim (rule 1: native, full-target "
               "speculative and approximate-target results are different claims)",
               "relaunch without speculative decoding or declare the correct claim class", bad, "run")]


@rule("claim-vs-server", kinds=ALL)
def rule_claim_vs_server(d: ArchiveData) -> list[Finding]:
    """A speculative claim class must match what every service started under it serves (a matched run's SD
    legs; its AR legs are native-ar): speculation reported by the server (or its launch argv), and no
    relaxed verification under speculative-full-target."""
    out: list[Finding] = []
    for i, s in enumerate(d.services):
        claim = _service_claim(d.run, s)
        if claim not in SPECULATIVE_CLAIMS:
            continue  # native-ar: speculative-native; external: the peer's own claim
        served = served_speculation(s.get("server_info"), s.get("command"))
        for why in claim_conflicts(claim, served, where="the run's claim_class"):
            out.append(_f(d.archive_id, "claim-vs-server", "blocking", f"{_name(s, i)}: {why}",
                          "re-run with the claim class the server serves; a claim class is never relabelled "
                          "after the fact (rule 1)", [_name(s, i)], "run"))
    return out


@rule("mapped-libraries", kinds=ALL)
def rule_mapped_libraries(d: ArchiveData) -> list[Finding]:
    """``mapped-libraries``: a service whose live workers, in the snapshot taken before it was stopped
    (``stack.mapped.at_end``), no longer map what its profile requires (``require_libraries``,
    ``library_dirs``); blocking: the run measured a stack other than the one the profile asked for
    (the start snapshot is checked before measurement, which refuses the run)."""
    from pydantic import ValidationError

    from harness.inputs.spec import ServiceProfile
    from harness.service.identity.stack import violations

    out: list[Finding] = []
    for i, s in enumerate(d.services):
        stack = s.get("stack") if isinstance(s.get("stack"), Mapping) else None
        mapped = (stack or {}).get("mapped") if stack else None
        at_end = mapped.get("at_end") if isinstance(mapped, Mapping) else None
        if not isinstance(at_end, Mapping) or not isinstance(s.get("profile"), Mapping):
            continue
        try:
            profile = ServiceProfile.model_validate(s["profile"])
        except ValidationError:
            continue  # a profile this dsv4h cannot read names no requirement it could check
        bad = violations(profile, at_end)
        if bad:
            out.append(_f(d.archive_id, "mapped-libraries", "blocking",
                          f"{_name(s, i)}: at the end of the run its workers do not map what the profile "
                          f"requires: {'; '.join(bad[:3])}" + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""),
                          "find what replaced or unloaded the library during the run; the measurement is not "
                          "of the required stack", [_name(s, i)], "run"))
    return out
