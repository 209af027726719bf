"""The report's summary card and generated description, from the frozen snapshot alone (pure).

:func:`summary_card` says, before any detail, what was measured (archives by kind, campaigns, claim and
protocol classes, simulated or measured), where (backends, services as they reported themselves,
hosts), the key numbers each with its claim and protocol class (per formal matrix the best resident
decode and prefill cell medians, per rate sweep the goodput knee), the ABBA verdicts with their effect,
archive statuses, oracle checks and the number of findings by severity. :func:`describe` turns the same
snapshot into the report's description sentences: they name only what the snapshot holds.

Units: rates in tokens per second (prefill: input, decode: output), sweep rates and goodput in requests
per second, ABBA effects in percent (10.0 = +10 %). A cell carrying a blocking finding is never a key
number (a cell the snapshot marks ``valid: false``, or, in a snapshot before format 10, one a blocking
finding names), nor is any value of an archive a resumed run superseded (``superseded_by`` in the
snapshot: its successor carries its records, so its numbers are not a result) or of an entry invalid by
a blocking evidence finding (``invalid_rules``); every key number names its archive id (16 hex digits,
whole) in its detail, and the card lists the superseded and the invalid archives apart. Whether an
archive is simulated, measured or another tool's is its verdict's decided ``data_origin``
(``archives[].data_origin``; older snapshots: its ``simulated`` flag and the imports' origins).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["archive_note", "count_noun", "describe", "invalid_mark", "is_valid", "slo_text", "summary_card",
           "superseded_text", "verdict_text"]

SEVERITIES = ("blocking", "warning", "info")


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))


def count_noun(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: ``1 archive``, ``3 archives``, ``2 matrices``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _blocked_cells(findings: Sequence[Mapping[str, Any]], archive_id: str) -> set[str]:
    """Row ids (cells and their rounds/waves) named by a blocking finding of the archive."""
    return {str(r) for f in findings if f.get("archive_id") == archive_id and f.get("severity") == "blocking"
            for r in f.get("rows") or []}


def _is_blocked(cell_id: str, blocked: set[str]) -> bool:
    return any(r == cell_id or r.startswith(cell_id + ".") for r in blocked)


def _cell_invalid(cell: Mapping[str, Any], blocked: set[str]) -> bool:
    """A cell the snapshot marks invalid (before cells carried ``valid``: one a blocking finding names)."""
    if "valid" in cell:
        return cell.get("valid") is False
    return _is_blocked(str(cell.get("cell_id")), blocked)


def _best_cell(entry: Mapping[str, Any], workload: str, blocked: set[str]) -> tuple[Mapping[str, Any] | None, int]:
    """The cell of ``workload`` with the largest finite median that is valid (:func:`_cell_invalid`), and
    how many cells of that workload were left out for a blocking finding."""
    cells = [c for c in entry.get("cells") or [] if c.get("workload") == workload and _finite(c.get("median_tok_s"))]
    left_out = [c for c in cells if _cell_invalid(c, blocked)]
    usable = [c for c in cells if c not in left_out]
    best = max(usable, key=lambda c: (float(c["median_tok_s"]), -int(c.get("concurrency") or 0)), default=None)
    return best, len(left_out)


def is_valid(entry: Mapping[str, Any]) -> bool:
    """Whether a snapshot entry (archive, matrix, screen, sweep) holds results: not superseded by a
    resumed run and not marked invalid (snapshots before format 3 read as valid)."""
    return not entry.get("superseded_by") and entry.get("valid", True) is not False


def archive_note(entry: Mapping[str, Any]) -> str:
    """``archive 0123456789abcdef`` and, when the archive did not complete, its status."""
    status = entry.get("status")
    note = f"archive {entry.get('archive_id')}"
    return note if status in (None, "complete") else f"{note} ({status})"


def invalid_mark(entry: Mapping[str, Any]) -> str:
    """``INVALID (rule, ...)`` for an entry or row a blocking evidence finding invalidates (its
    ``invalid_rules``), ``INVALID`` for an entry (it has ``superseded_by``) marked ``valid: false`` that
    no resumed run superseded, else '' (a row invalid only because its archive was superseded is not
    marked: the entry says SUPERSEDED)."""
    rules = entry.get("invalid_rules") or []
    if rules:
        return f"INVALID ({', '.join(str(r) for r in rules)})"
    if entry.get("valid", True) is False and "superseded_by" in entry and not entry.get("superseded_by"):
        return "INVALID"
    return ""


def superseded_text(entry: Mapping[str, Any]) -> str:
    """``superseded by <id>`` for a superseded entry, ``invalid (rule, ...)`` for one a blocking evidence
    finding invalidates, ``invalid`` for one otherwise marked invalid, else an empty string."""
    by = entry.get("superseded_by")
    if by:
        return f"superseded by {by}"
    rules = entry.get("invalid_rules") or []
    if rules:
        return f"invalid ({', '.join(str(r) for r in rules)})"
    return "invalid" if entry.get("valid", True) is False else ""


def verdict_text(entry: Mapping[str, Any]) -> str:
    """A run's verdict as shown: ``withheld (rule, ...)`` when withheld (never the measured one), else the verdict."""
    v = entry.get("verdict")
    if v == "withheld":
        rules = entry.get("invalid_rules") or []
        return f"withheld ({', '.join(str(r) for r in rules)})" if rules else "withheld"
    return "" if v is None else str(v)


def _formal_numbers(entry: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    blocked = _blocked_cells(findings, str(entry.get("archive_id")))
    out = []
    for workload, what, unit in (("decode", "best resident decode cell median", "output tok/s"),
                                 ("prefill", "best prefill cell median", "input tok/s")):
        best, left_out = _best_cell(entry, workload, blocked)
        if best is None:
            continue
        n_ok = sum(1 for s in best.get("round_status") or [] if s == "ok")
        detail = f"{archive_note(entry)}; C{best.get('concurrency')}, median of " \
                 f"{count_noun(n_ok, 'ok round', 'ok rounds')}"
        if left_out:
            detail += f"; {count_noun(left_out, 'cell', 'cells')} with a blocking finding left out"
        out.append({"subject": entry.get("campaign"), "quantity": what, "value": float(best["median_tok_s"]),
                    "unit": unit, "detail": detail, "claim_class": entry.get("claim_class"),
                    "protocol_class": entry.get("protocol_class"), "archive_id": entry.get("archive_id"),
                    "simulated": bool(entry.get("simulated"))})
    return out


def slo_text(slo: Any) -> str:
    """An SLO (``{"ttft_s": 2.0, "tpot_s": 0.5, "e2e_s": None}``) as ``TTFT <= 2000 ms, TPOT <= 500 ms``;
    ``none`` when no objective is set."""
    if not isinstance(slo, Mapping):
        return "none"
    parts = [f"{name} <= {float(slo[key]) * 1000:g} ms"
             for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")) if _finite(slo.get(key))]
    return ", ".join(parts) or "none"


def _sweep_numbers(entry: Mapping[str, Any]) -> list[dict[str, Any]]:
    knee = entry.get("knee") or {}
    if not _finite(knee.get("goodput_median_req_s")) or not _finite(knee.get("arrival_rate_req_s")):
        return []
    return [{"subject": entry.get("campaign"), "quantity": "goodput at the knee",
             "value": float(knee["goodput_median_req_s"]),
             "unit": "req/s", "detail": f"{archive_note(entry)}; offered {float(knee['arrival_rate_req_s']):g} req/s; "
                                        f"SLO {slo_text(entry.get('slo'))}",
             "claim_class": entry.get("claim_class"), "protocol_class": entry.get("protocol_class"),
             "archive_id": entry.get("archive_id"), "simulated": bool(entry.get("simulated"))}]


def _verdict(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A screen's verdict row; a withheld one (invalid by a blocking finding) shows none of its figures."""
    withheld = entry.get("verdict") == "withheld" or not is_valid(entry)
    figures = {k: None if withheld else entry.get(k) for k in ("ratio_pct", "drift_pct", "spread_pct")}
    return {"subject": entry.get("screen"), "verdict": verdict_text(entry), **figures, "withheld": withheld,
            "separated": bool(entry.get("separated")) and not withheld, "boundary": entry.get("boundary"),
            "concurrency": entry.get("concurrency"), "claim_class": entry.get("claim_class"),
            "protocol_class": entry.get("protocol_class"), "archive_id": entry.get("archive_id"),
            "simulated": bool(entry.get("simulated"))}


def _sorted_set(values: Sequence[Any]) -> list[str]:
    return sorted({str(v) for v in values if v not in (None, "")})


def _where(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    archives = list(snapshot.get("archives") or [])
    services = []
    seen: set[tuple[str, ...]] = set()
    for s in snapshot.get("services") or []:
        key = (str(s.get("backend")), str(s.get("name")), str(s.get("version")), str(s.get("model_path")))
        if key not in seen:
            seen.add(key)
            services.append({"backend": s.get("backend"), "name": s.get("name"), "version": s.get("version"),
                             "model_path": s.get("model_path"), "simulated": bool(s.get("simulated"))})
    hosts = []
    for h in (a.get("host") for a in archives):
        if not isinstance(h, Mapping) or not h.get("hostname"):
            continue
        text = f"{h['hostname']} ({h.get('machine') or '?'}, {count_noun(int(h.get('gpu_count') or 0), 'GPU', 'GPUs')})"
        if text not in hosts:
            hosts.append(text)
    return {"backends": _sorted_set([a.get("backend") for a in archives]), "services": services,
            "hosts": hosts, "hosts_recorded": sum(1 for a in archives if isinstance(a.get("host"), Mapping))}


def summary_card(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The summary card's data (pure; every value taken from ``snapshot``).

    Keys: ``what`` (counts of archives, formal matrices, screens, sweeps, simulated and measured
    archives, campaign names, claim and protocol classes, historical entries or None without a ledger),
    ``where`` (backends, distinct services, hosts), ``key_numbers`` (one row per number: subject,
    quantity, value, unit, detail naming the archive, claim and protocol class, archive id, simulated;
    valid archives and cells only), ``verdicts`` (one per ABBA screen not superseded: verdict,
    ratio/drift/spread in percent, separation; a screen invalid by a blocking finding reads
    ``withheld (rules)`` with none of its figures), ``superseded`` (archives a resumed run superseded or
    otherwise marked invalid: id, campaign, status, superseded_by, label; none of their values is a key
    number), ``invalid`` (archives with a blocking evidence finding: id, campaign, status, rules, label),
    ``statuses`` (archive status -> count), ``findings`` (severity -> count, and ``source``),
    ``verdict_sources`` (how many archives' verdicts were read from the ledger, ``ledger``, or decided
    by running the rules now, ``rules``), ``oracles`` (checks, failed, and counts before/after measurement).
    """
    archives = list(snapshot.get("archives") or [])
    formal = list(snapshot.get("formal") or [])
    screens = list(snapshot.get("screens") or [])
    sweeps = list(snapshot.get("sweeps") or [])
    findings = list(snapshot.get("findings") or [])
    oracles = list(snapshot.get("oracles") or [])
    if archives and all("data_origin" in a for a in archives):  # the verdicts' decided origins (format 10)
        n_sim = sum(1 for a in archives if a.get("data_origin") == "simulated")
        n_ext = sum(1 for a in archives if a.get("data_origin") not in ("simulated", "measured"))
    else:
        n_sim = sum(1 for a in archives if a.get("simulated"))
        # an import not known to be simulated was not measured by dsv4h either (harness.report.snapshot.imports)
        n_ext = sum(1 for e in snapshot.get("imports") or [] if e.get("data_origin") != "simulated")
    historical = list(snapshot.get("historical") or []) if snapshot.get("historical_present") else None
    spec = snapshot.get("speculative")
    matched = list(spec.get("matched") or []) if isinstance(spec, Mapping) else []
    what = {
        "archives": len(archives), "formal": len(formal), "screens": len(screens), "sweeps": len(sweeps),
        "imports": len(snapshot.get("imports") or []), "matched": len(matched),
        "other": len(archives) - len(formal) - len(screens) - len(sweeps) - len(snapshot.get("imports") or [])
        - len(matched),
        "simulated": n_sim, "measured": len(archives) - n_sim - n_ext, "external": n_ext,
        "campaigns": _sorted_set([a.get("campaign") for a in archives]),
        "claim_classes": _sorted_set([a.get("claim_class") for a in archives]),
        "protocol_classes": _sorted_set([a.get("protocol_class") for a in archives]),
        "historical_entries": None if historical is None else len(historical),
    }
    numbers = [n for e in formal if is_valid(e) for n in _formal_numbers(e, findings)]
    numbers += [n for e in sweeps if is_valid(e) for n in _sweep_numbers(e)]
    superseded = [{"archive_id": a.get("archive_id"), "campaign": a.get("campaign"), "status": a.get("status"),
                   "superseded_by": a.get("superseded_by"), "label": superseded_text(a)}
                  for a in archives if not is_valid(a) and (a.get("superseded_by") or not a.get("invalid_rules"))]
    invalid = [{"archive_id": a.get("archive_id"), "campaign": a.get("campaign"), "status": a.get("status"),
                "rules": list(a.get("invalid_rules") or []), "label": superseded_text(a)}
               for a in archives if not a.get("superseded_by") and a.get("invalid_rules")]
    statuses: dict[str, int] = {}
    for a in archives:
        statuses[str(a.get("status"))] = statuses.get(str(a.get("status")), 0) + 1
    counts = {s: sum(1 for f in findings if f.get("severity") == s) for s in SEVERITIES}
    return {
        "what": what,
        "where": _where(snapshot),
        "key_numbers": numbers,
        "verdicts": [_verdict(e) for e in screens if is_valid(e) or (e.get("invalid_rules")
                                                                     and not e.get("superseded_by"))],
        "superseded": superseded,
        "invalid": invalid,
        "statuses": dict(sorted(statuses.items())),
        "findings": counts | {"total": len(findings), "source": snapshot.get("findings_source")},
        "verdict_sources": {src: sum(1 for a in archives if a.get("findings_source") == src)
                            for src in ("ledger", "rules")},
        "oracles": {"checks": len(oracles), "failed": sum(1 for o in oracles if not o.get("passed")),
                    "before": sum(1 for o in oracles if o.get("phase") == "before"),
                    "after": sum(1 for o in oracles if o.get("phase") == "after")},
    }


def _kind_phrase(n: int, one: str, many: str, names: Sequence[Any]) -> str:
    listed = ", ".join(dict.fromkeys(str(x) for x in names))
    return f"{count_noun(n, one, many)} ({listed})" if listed else count_noun(n, one, many)


def _validity_sentences(card: Mapping[str, Any]) -> list[str]:
    """The description's sentences on superseded archives and archives with a blocking evidence finding."""
    out: list[str] = []
    if card["superseded"]:
        listed = "; ".join(f"{x['archive_id']} ({x['campaign']}, {x['status']}) {x['label']}"
                           for x in card["superseded"])
        out.append(f"{count_noun(len(card['superseded']), 'archive was', 'archives were')} superseded by a resumed "
                   f"run and {'is' if len(card['superseded']) == 1 else 'are'} not a result (the successor carries "
                   f"the records; no key number comes from {'it' if len(card['superseded']) == 1 else 'them'}): "
                   f"{listed}.")
    if card["invalid"]:
        listed = "; ".join(f"{x['archive_id']} ({x['campaign']}, {', '.join(x['rules'])})" for x in card["invalid"])
        out.append(f"{count_noun(len(card['invalid']), 'archive has', 'archives have')} a blocking evidence finding: "
                   f"{'its' if len(card['invalid']) == 1 else 'their'} run verdicts are withheld and the rows the "
                   f"findings concern are marked INVALID (never a key number): {listed}.")
    return out


def describe(snapshot: Mapping[str, Any]) -> list[str]:
    """The report's description, as sentences naming only what ``snapshot`` holds (pure): the kinds of
    archive present with their campaigns, claim and protocol classes, whether the data is simulated,
    and the historical ledger when one was frozen."""
    card = summary_card(snapshot)
    what = card["what"]
    parts = []
    if what["formal"]:
        parts.append(_kind_phrase(what["formal"], "formal P/D matrix", "formal P/D matrices",
                                  [e.get("campaign") for e in snapshot.get("formal") or []]))
    if what["screens"]:
        parts.append(_kind_phrase(what["screens"], "ABBA screen", "ABBA screens",
                                  [e.get("screen") for e in snapshot.get("screens") or []]))
    if what["sweeps"]:
        parts.append(_kind_phrase(what["sweeps"], "rate sweep", "rate sweeps",
                                  [e.get("campaign") for e in snapshot.get("sweeps") or []]))
    if what["matched"]:
        parts.append(_kind_phrase(what["matched"], "matched AR/SD run", "matched AR/SD runs",
                                  [e.get("name") for e in (snapshot.get("speculative") or {}).get("matched") or []]))
    if what["imports"]:
        parts.append(count_noun(what["imports"], "imported peer result", "imported peer results")
                     + " (external claims, listed under Imported results)")
    if what["other"]:
        parts.append(count_noun(what["other"], "other archive", "other archives") + " (listed under Archives)")
    if len(parts) > 1:
        holds = ", ".join(parts[:-1]) + " and " + parts[-1]
    else:
        holds = parts[0] if parts else ""
    out = [f"This report holds {count_noun(what['archives'], 'archive', 'archives')}"
           + (f": {holds}." if holds else ".")]
    if what["claim_classes"]:
        out.append(f"Claim classes: {', '.join(what['claim_classes'])}; protocol classes: "
                   f"{', '.join(what['protocol_classes'])} (never compared or combined).")
    backends = ", ".join(card["where"]["backends"])
    if what["archives"] and what["simulated"] == what["archives"]:
        out.append(f"Every archive is SIMULATED (backend {backends}): the numbers show what the harness "
                   "measures, not how fast any model is.")
    elif what["simulated"] and not what["external"]:
        out.append(f"{count_noun(what['simulated'], 'archive is', 'archives are')} SIMULATED and "
                   f"{count_noun(what['measured'], 'is', 'are')} measured (backends {backends}); they are never mixed.")
    elif what["external"]:
        out.append(f"{count_noun(what['simulated'], 'archive is', 'archives are')} SIMULATED, "
                   f"{count_noun(what['measured'], 'is', 'are')} measured and "
                   f"{count_noun(what['external'], 'is an import', 'are imports')} of another tool's result whose "
                   f"server is not known to be the simulator (backends {backends}); they are never mixed.")
    elif what["archives"]:
        out.append(f"Every archive was measured on a live service (backends {backends}).")
    out += _validity_sentences(card)
    if what["historical_entries"]:
        out.append(f"The historical ledger adds {count_noun(what['historical_entries'], 'entry', 'entries')} "
                   "measured elsewhere, shown apart with their original protocol labels.")
    return out
