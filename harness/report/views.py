"""Template views of the report's context sections, from the frozen snapshot (pure).

- :func:`historical_table`: the historical ledger as one compact row per entry (source, date, metric,
  concurrency, value, unit, claim class) whose long texts (original protocol label, source, "does not
  claim" notes) are keys into legends that list each distinct text once, so a ledger of a hundred rows
  repeats no paragraph;
- :func:`oracle_when`: the label of a sentinel check's place in the run (before/after measurement);
- :func:`corpus_ranges`: a corpus entry's tokenizer and token ranges as display text, saying
  "not recorded" where an older archive did not record them;
- :func:`speculative_view`: the speculative-decoding section (matched AR/SD runs, whose figures are
  withheld when the entry is not valid, and the acceptance counts of the other archives, invalid rows
  marked ``INVALID (rules)``);
- :func:`energy_view`: the energy section (per archive, cell or leg: median output tokens per joule, mean
  W, method and source; withheld for a superseded archive).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.kinds import MATCHED_SECTION, kind_of_run

__all__ = ["NOT_RECORDED", "SD_RULE", "corpus_ranges", "energy_view", "historical_table", "oracle_when",
           "speculative_view"]

NOT_RECORDED = "not recorded"
SD_RULE = "SD is faster than native AR only if T_SD/T_AR < a"


def _keyed(texts: dict[str, str], prefix: str, text: str) -> str:
    """The key of ``text`` in ``texts`` (text -> key), adding ``<prefix><n>`` in first-seen order."""
    if text not in texts:
        texts[text] = f"{prefix}{len(texts) + 1}"
    return texts[text]


def historical_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The compact historical table (pure; ledger order kept).

    Returns ``rows`` (per entry: ``entry_id``, ``label``, ``source_key``, ``date`` and ``date_kind``
    (``measured``, else ``published``, else None), ``metric``, ``concurrency``, ``tp``, ``value``,
    ``range_max``, ``unit``, ``claim_class``, ``protocol_class``, ``protocol_key``, ``note_keys``,
    ``quote``), and the legends ``protocols`` (key, text, protocol class(es), number of entries,
    ``note_keys``), ``sources`` and ``notes`` (key, text), each distinct text once, keys numbered in
    first appearance (``P1``, ``S1``, ``N1``). What an entry does not claim is its protocol's
    ``note_keys`` (the notes every entry of that protocol carries) plus the row's own ``note_keys``."""
    protocols: dict[str, str] = {}
    sources: dict[str, str] = {}
    notes: dict[str, str] = {}
    proto_classes: dict[str, list[str]] = {}
    proto_count: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    row_protocols: list[str] = []
    row_notes: list[list[str]] = []
    for r in rows:
        ptext = str(r.get("protocol_label") or "not recorded")
        pkey = _keyed(protocols, "P", ptext)
        pclass = str(r.get("protocol_class") or "")
        if pclass and pclass not in proto_classes.setdefault(pkey, []):
            proto_classes[pkey].append(pclass)
        proto_count[pkey] = proto_count.get(pkey, 0) + 1
        skey = _keyed(sources, "S", str(r.get("source") or "not recorded"))
        nc = r.get("not_claims") or []
        nkeys = [_keyed(notes, "N", str(n)) for n in ([nc] if isinstance(nc, str) else nc) if str(n)]
        row_protocols.append(pkey)
        row_notes.append(nkeys)
        measured, published = r.get("measured_date"), r.get("published_date")
        out.append({
            "entry_id": r.get("entry_id"), "label": r.get("label"), "source_key": skey,
            "date": measured or published or None,
            "date_kind": "measured" if measured else ("published" if published else None),
            "metric": r.get("metric"), "concurrency": r.get("concurrency"), "tp": r.get("tp"),
            "value": r.get("value"), "range_max": r.get("range_max"), "unit": r.get("unit"),
            "claim_class": r.get("claim_class"), "protocol_class": r.get("protocol_class"),
            "protocol_key": pkey, "note_keys": nkeys, "quote": r.get("quote"),
        })
    # notes every entry of a protocol carries are listed once with the protocol; a row keeps only its own
    common: dict[str, list[str]] = {}
    for pkey, mine in zip(row_protocols, row_notes, strict=True):
        common[pkey] = [k for k in common[pkey] if k in mine] if pkey in common else list(mine)
    for row, pkey, mine in zip(out, row_protocols, row_notes, strict=True):
        row["note_keys"] = [k for k in mine if k not in common[pkey]]
    return {
        "rows": out,
        "protocols": [{"key": k, "text": t, "protocol_classes": proto_classes.get(k, []), "entries": proto_count[k],
                       "note_keys": common.get(k, [])} for t, k in protocols.items()],
        "sources": [{"key": k, "text": t} for t, k in sources.items()],
        "notes": [{"key": k, "text": t} for t, k in notes.items()],
    }


def oracle_when(entry: Mapping[str, Any]) -> str:
    """``before measurement`` / ``after measurement`` (with a leg when recorded: ``before measurement
    (leg A1)``), the recorded text otherwise, or ``not recorded`` for archives that did not record it."""
    when = entry.get("when")
    phase = entry.get("phase")
    if not when:
        return NOT_RECORDED
    if phase in ("before", "after"):
        rest = str(when)[len(str(phase)):].strip()
        return f"{phase} measurement" + (f" (leg {rest})" if rest else "")
    return str(when)


def _range(v: Any) -> str | None:
    if isinstance(v, list | tuple) and len(v) == 2:
        return f"{v[0]}–{v[1]}" if v[0] != v[1] else str(v[0])
    return None


def corpus_ranges(entry: Mapping[str, Any]) -> dict[str, str]:
    """Display text of a corpus entry: ``tokenizer`` (name, vocabulary size, first 16 hex digits of its
    SHA-256), ``declared`` (the manifest's token range), ``input_tokens`` and ``token_ids`` (observed over
    the cases); ``not recorded`` for each value the archive did not record."""
    tok = entry.get("tokenizer")
    if tok:
        extra = [f"vocab {entry['vocab_size']}" if entry.get("vocab_size") else "",
                 f"sha256 {str(entry['tokenizer_sha256'])[:16]}" if entry.get("tokenizer_sha256") else ""]
        tok_text = str(tok) + (f" ({', '.join(x for x in extra if x)})" if any(extra) else "")
    else:
        tok_text = NOT_RECORDED
    return {"tokenizer": tok_text,
            "declared": _range(entry.get("token_range")) or NOT_RECORDED,
            "input_tokens": _range(entry.get("input_tokens")) or NOT_RECORDED,
            "token_ids": _range(entry.get("token_ids")) or NOT_RECORDED}


def _rules_text(entry: Mapping[str, Any]) -> str:
    return ", ".join(str(r) for r in entry.get("invalid_rules") or [])


def _with_marks(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``mark``: ``INVALID (rules)`` for a row a blocking finding invalidates (its
    ``invalid_rules``), else '' (a row of a superseded archive: its entry says so)."""
    return [{**c, "mark": f"INVALID ({_rules_text(c)})" if c.get("invalid_rules") else ""} for c in cells]


def speculative_view(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """The speculative section's view (pure): ``matched`` entries (each with ``withheld``: the reason
    its figures are not shown, or "" for a valid entry; ``withheld (rules)`` for a run a blocking
    evidence finding invalidates, its break-even verdict never shown), ``acceptance`` entries of archives
    that are not matched runs (a matched run's counts are in its own row; each cell with ``mark``),
    ``rule`` and ``present`` (anything to show). A snapshot before format 6 has no ``speculative`` key and
    gives an empty section."""
    raw = snapshot.get("speculative")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    matched = []
    for e in spec.get("matched") or []:
        withheld = ""
        if e.get("valid") is False:
            withheld = (f"withheld ({_rules_text(e)})" if e.get("invalid_rules") and not e.get("superseded_by")
                        else f"withheld (invalid: {e.get('invalid_reason') or 'not a result'})")
        matched.append({**e, "withheld": withheld})
    acceptance = []
    for e in spec.get("acceptance") or []:
        if _shown_with_matched(e):
            continue
        withheld = ""
        if e.get("valid") is False:
            withheld = (f"withheld ({_rules_text(e)})" if e.get("invalid_rules") and not e.get("superseded_by")
                        else "withheld (invalid: superseded)")
        acceptance.append({**e, "withheld": withheld, "cells": _with_marks(e.get("cells") or [])})
    return {"matched": matched, "acceptance": acceptance, "rule": SD_RULE, "present": bool(matched or acceptance)}


def _shown_with_matched(entry: Mapping[str, Any]) -> bool:
    """Whether an acceptance entry's archive is a kind whose entries the matched table shows (with
    their acceptance), by the kind descriptor's report section."""
    info = kind_of_run(entry.get("kind"), entry.get("protocol_class"))
    return info is not None and info.report_section == MATCHED_SECTION


def energy_view(snapshot: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The energy section's entries (pure): each with ``withheld`` (the reason its figures are not shown,
    "" for a valid entry: superseded, or ``withheld (rules)`` when a blocking finding invalidates the
    whole archive) and its cells' ``methods``/``sources`` joined for display and ``mark`` (``INVALID
    (rules)`` for a row whose windows a blocking finding concerns). A snapshot before format 7 has no
    ``energy`` key and gives none."""
    out = []
    for e in snapshot.get("energy") or []:
        withheld = ""
        if e.get("valid") is False:
            withheld = (f"withheld ({_rules_text(e)})" if e.get("invalid_rules") and not e.get("superseded_by")
                        else f"withheld (invalid: superseded by {e.get('superseded_by')})")
        cells = [{**c, "method": ", ".join(c.get("methods") or []) or "none",
                  "source": ", ".join(c.get("sources") or []) or "none"} for c in _with_marks(e.get("cells") or [])]
        out.append({**e, "withheld": withheld, "cells": cells})
    return out
