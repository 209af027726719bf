"""The report's summary card and generated description, from the frozen snapshot alone (pure).

:func:`summary_card` says, before any detail, what was measured (archives by kind, campaigns, claim and
protocol classes, simulated or measured), where (backends, services as they reported themselves,
hosts), the key numbers each with its claim and protocol class and the verdicts, archive statuses,
oracle checks and the number of findings by severity. What each kind adds (its count noun, the names
the description lists, its key numbers and verdicts) is its own: the ``report_summary`` of its entry in
:data:`harness.kinds.KINDS` (:mod:`harness.report.kind_summaries`: per formal matrix the best resident
decode and prefill cell medians, per rate sweep the goodput knee, per ABBA screen its verdict and
effect), called in ``KINDS`` order over its report section's entries; a kind without one is counted
among the other archives. :func:`describe` turns the same
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from harness.kinds import EXTERNAL, KINDS, resolve
from harness.report.snapshot.freeze import section_entries

__all__ = ["KindSummary", "SummaryFn", "archive_note", "count_noun", "describe", "finite", "invalid_mark", "is_valid",
           "kind_summaries", "slo_text", "summary_card", "superseded_text", "verdict_text"]

SEVERITIES = ("blocking", "warning", "info")


def finite(v: Any) -> bool:
    """Whether ``v`` is a finite number (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))


@dataclass(frozen=True)
class KindSummary:
    """One kind's part of the summary card (a kind's ``report_summary``; :mod:`harness.report.kind_summaries`):
    ``key``, its count's key in the card's ``what``; ``one``/``many``, its count noun; ``names``, what the
    description lists after the count (its entries' campaigns or screens; none: ``note`` follows the count
    instead); ``on_card``: whether the card's "what was measured" line counts it; ``key_numbers`` and
    ``verdicts``: its rows of the card's key numbers and verdicts (valid entries only)."""

    key: str
    one: str
    many: str
    names: tuple[Any, ...]
    note: str = ""
    on_card: bool = True
    key_numbers: tuple[dict[str, Any], ...] = ()
    verdicts: tuple[dict[str, Any], ...] = ()


SummaryFn = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], KindSummary]
"""(the entries of the kind's report section, the snapshot's findings) -> its :class:`KindSummary`."""


def count_noun(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun in the number it takes: ``1 archive``, ``3 archives``, ``2 matrices``."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


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


def slo_text(slo: Any) -> str:
    """An SLO (``{"ttft_s": 2.0, "tpot_s": 0.5, "e2e_s": None}``) as ``TTFT <= 2000 ms, TPOT <= 500 ms``;
    ``none`` when no objective is set."""
    if not isinstance(slo, Mapping):
        return "none"
    parts = [f"{name} <= {float(slo[key]) * 1000:g} ms"
             for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")) if finite(slo.get(key))]
    return ", ".join(parts) or "none"


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


def kind_summaries(snapshot: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each kind's summary contribution (its ``report_summary``, over its report section's entries), in
    ``KINDS`` order: kind -> ``key``, ``count`` (its entries), ``one``, ``many``, ``names``, ``note``,
    ``on_card``, ``key_numbers``, ``verdicts`` (:class:`KindSummary`)."""
    findings = list(snapshot.get("findings") or [])
    out = {}
    for k in KINDS.values():
        if k.report_summary is None:
            continue
        entries = section_entries(snapshot, k.report_section)
        part: KindSummary = cast(SummaryFn, resolve(k.report_summary))(entries, findings)
        out[k.name] = {"key": part.key, "count": len(entries), "one": part.one, "many": part.many,
                       "names": list(part.names), "note": part.note, "on_card": part.on_card,
                       "key_numbers": list(part.key_numbers), "verdicts": list(part.verdicts)}
    return out


def summary_card(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The summary card's data (pure; every value taken from ``snapshot``).

    Keys: ``what`` (counts of archives, of each kind's entries under the key its summary names
    (``formal``, ``screens``, ``sweeps``, ``matched``, ``imports``), of the ``other`` archives, of
    simulated, measured and external archives, campaign names, claim and protocol classes, historical
    entries or None without a ledger), ``kinds`` (:func:`kind_summaries`), ``where`` (backends,
    distinct services, hosts), ``key_numbers`` (every kind's, in ``KINDS`` order: subject, quantity,
    value, unit, detail naming the archive, claim and protocol class, archive id, simulated; valid
    archives and cells only), ``verdicts`` (every kind's verdict rows: one per ABBA screen not
    superseded: verdict, ratio/drift/spread in percent, separation; a screen invalid by a blocking
    finding reads ``withheld (rules)`` with none of its figures), ``superseded`` (archives a resumed run
    superseded or otherwise marked invalid: id, campaign, status, superseded_by, label; none of their
    values is a key number), ``invalid`` (archives with a blocking evidence finding: id, campaign,
    status, rules, label), ``statuses`` (archive status -> count), ``findings`` (severity -> count, and
    ``source``), ``verdict_sources`` (how many archives' verdicts were read from the ledger, ``ledger``,
    or decided by running the rules now, ``rules``), ``oracles`` (checks, failed, and counts
    before/after measurement).
    """
    archives = list(snapshot.get("archives") or [])
    findings = list(snapshot.get("findings") or [])
    oracles = list(snapshot.get("oracles") or [])
    if archives and all("data_origin" in a for a in archives):  # the verdicts' decided origins (format 10)
        n_sim = sum(1 for a in archives if a.get("data_origin") == "simulated")
        n_ext = sum(1 for a in archives if a.get("data_origin") not in ("simulated", "measured"))
    else:
        n_sim = sum(1 for a in archives if a.get("simulated"))
        # an import not known to be simulated was not measured by dsv4h either (harness.report.snapshot.imports)
        imports = section_entries(snapshot, EXTERNAL.report_section)
        n_ext = sum(1 for e in imports if e.get("data_origin") != "simulated")
    historical = list(snapshot.get("historical") or []) if snapshot.get("historical_present") else None
    kinds = kind_summaries(snapshot)
    counts = {part["key"]: part["count"] for part in kinds.values()}
    what = {
        "archives": len(archives), **counts, "other": len(archives) - sum(counts.values()),
        "simulated": n_sim, "measured": len(archives) - n_sim - n_ext, "external": n_ext,
        "campaigns": _sorted_set([a.get("campaign") for a in archives]),
        "claim_classes": _sorted_set([a.get("claim_class") for a in archives]),
        "protocol_classes": _sorted_set([a.get("protocol_class") for a in archives]),
        "historical_entries": None if historical is None else len(historical),
    }
    superseded = [{"archive_id": a.get("archive_id"), "campaign": a.get("campaign"), "status": a.get("status"),
                   "superseded_by": a.get("superseded_by"), "label": superseded_text(a)}
                  for a in archives if not is_valid(a) and (a.get("superseded_by") or not a.get("invalid_rules"))]
    invalid = [{"archive_id": a.get("archive_id"), "campaign": a.get("campaign"), "status": a.get("status"),
                "rules": list(a.get("invalid_rules") or []), "label": superseded_text(a)}
               for a in archives if not a.get("superseded_by") and a.get("invalid_rules")]
    statuses: dict[str, int] = {}
    for a in archives:
        statuses[str(a.get("status"))] = statuses.get(str(a.get("status")), 0) + 1
    severities = {s: sum(1 for f in findings if f.get("severity") == s) for s in SEVERITIES}
    return {
        "what": what,
        "kinds": kinds,
        "where": _where(snapshot),
        "key_numbers": [n for part in kinds.values() for n in part["key_numbers"]],
        "verdicts": [v for part in kinds.values() for v in part["verdicts"]],
        "superseded": superseded,
        "invalid": invalid,
        "statuses": dict(sorted(statuses.items())),
        "findings": severities | {"total": len(findings), "source": snapshot.get("findings_source")},
        "verdict_sources": {src: sum(1 for a in archives if a.get("findings_source") == src)
                            for src in ("ledger", "rules")},
        "oracles": {"checks": len(oracles), "failed": sum(1 for o in oracles if not o.get("passed")),
                    "before": sum(1 for o in oracles if o.get("phase") == "before"),
                    "after": sum(1 for o in oracles if o.get("phase") == "after")},
    }


def _kind_phrase(part: Mapping[str, Any]) -> str:
    """A kind's phrase in the description: its count, then the names it lists or its note."""
    counted = count_noun(part["count"], part["one"], part["many"])
    listed = ", ".join(dict.fromkeys(str(x) for x in part["names"]))
    return (f"{counted} ({listed})" if listed else counted) + str(part["note"])


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
    parts = [_kind_phrase(part) for part in card["kinds"].values() if part["count"]]
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
