"""Evidence rules of what served the run and whether it said so (pure; every kind, ``scope = "run"``):
the server's own configuration read and as the profile expects (``identity-unverified``), simulator
data labelled simulated (``simulated-context``) and the spec's oracle sentinels run and passed on every
service (``oracle``)."""

from __future__ import annotations

from collections.abc import Mapping

from harness.evidence.findings import ArchiveData, Finding
from harness.evidence.findings import make_finding as _f
from harness.evidence.rules._registry import ALL, rule
from harness.evidence.rules.instruments import serves_simulator
from harness.inputs.spec import sectioned_dump


@rule("identity-unverified", kinds=ALL)
def rule_identity(d: ArchiveData) -> list[Finding]:
    """The served configuration must come from the server itself and match the profile."""
    out: list[Finding] = []
    for i, s in enumerate(d.services):
        info = s.get("server_info") or {}
        name = f"service#{s.get('start_index', i + 1)}"
        if not info:
            out.append(_f(d.archive_id, "identity-unverified", "blocking",
                          f"{name} ({s.get('url')}): no server configuration was read",
                          "the server must answer /server_info (SGLang) or /v1/models (vLLM)", [name], "run"))
            continue
        if info.get("_source") == "/v1/models":
            out.append(_f(d.archive_id, "identity-unverified", "warning",
                          f"{name}: only /v1/models was available; TP size, pool and graphs are unverified",
                          "record the launch arguments and check them against the profile", [name], "run"))
        profile = s.get("profile")
        ident = sectioned_dump(profile).get("identity") if isinstance(profile, Mapping) else None
        expect = (ident.get("expect") if isinstance(ident, Mapping) else None) or {}
        diffs = [k for k, v in expect.items() if k in info and info[k] != v]
        if diffs:
            out.append(_f(d.archive_id, "identity-unverified", "blocking",
                          f"{name}: server reports different {', '.join(sorted(diffs))} than the profile expects",
                          "fix the launch flags or the profile; logged flags prove nothing", [name], "run"))
    return out


@rule("simulated-context", kinds=ALL)
def rule_simulated_context(d: ArchiveData) -> list[Finding]:
    """Simulator data must say so: backend sim, or a server that identifies itself as the simulator."""
    labels = set(d.run.get("labels") or [])
    sim_servers = [s for s in d.services if serves_simulator(s)]
    out: list[Finding] = []
    if sim_servers and d.run.get("backend") != "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking",
                      f"the server is the dsv4h simulator but the run is labelled backend "
                      f"'{d.run.get('backend')}' without 'simulated'",
                      "use backend: sim (or label the run simulated); never present simulator numbers as measured",
                      [str(s.get("url")) for s in sim_servers], "run"))
    if d.run.get("backend") == "sim" and "simulated" not in labels:
        out.append(_f(d.archive_id, "simulated-context", "blocking", "simulator run without the 'simulated' label",
                      "re-run with this dsv4h version, which labels simulator runs", [], "run"))
    return out


@rule("oracle", kinds=ALL)
def rule_oracle(d: ArchiveData) -> list[Finding]:
    """Oracle sentinels declared by the spec must have run and passed on every service."""
    declared = list(d.spec.get("oracles") or [])
    results = list(d.oracles or [])
    out: list[Finding] = []
    failed = [r for r in results if not r.get("passed")]
    if failed:
        out.append(_f(d.archive_id, "oracle", "blocking",
                      f"{len(failed)} oracle check(s) failed: " + ", ".join(
                          f"{r.get('oracle')} on {r.get('service')} (first divergence {r.get('first_divergence')})"
                          for r in failed[:4]),
                      "find the numerical change before publishing any rate from this service",
                      [str(r.get("service")) for r in failed], "run"))
    if declared and not results:
        out.append(_f(d.archive_id, "oracle", "blocking", "oracles were declared but no oracle result is archived",
                      "re-run; sentinels run before and after measurement on every service", [], "run"))
    if not declared and not results:
        out.append(_f(d.archive_id, "oracle", "info", "no oracle sentinel ran for this archive",
                      "declare oracles (e.g. oracles/france.yaml) in the spec", []))
    return out
