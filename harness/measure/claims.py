"""Every count a server reports is a claim, checked before use (pure; docs/speculative.md "Reported
counts are claims").

A server reports counts dsv4h cannot observe (verify steps, drafts proposed and accepted, cached prompt
tokens, usage totals, ``/metrics`` counters). Each is checked against the server's other counts and
against what the client read itself (the streamed token count of the request, ``n_tokens``) before any
figure is built from it. A contradiction means the count is not used: the acceptance of the request's
wave, cell and run is withheld (:mod:`harness.measure.acceptance`), and the evidence rule
``reported-counts`` (harness.evidence.rules.reported) names the request, the field and the values.

What must hold, per request that reported speculative counts (``steps`` verify steps, ``proposed`` /
``accepted`` drafts, bonus token excluded; ``k`` draft tokens per step when the served configuration
says it):

- ``accepted <= proposed``; no drafts without a verify step; ``proposed <= steps * k``;
- each verify step emits ``1 + its accepted drafts``, so ``accepted + steps <= completion tokens`` (the
  streamed count when the client counted exactly, else the server's usage total; a failed request's
  stream may have been cut, so it is not bounded by it). With ``k`` known the last step may have been
  cut short by ``max_new_tokens`` after its drafts were counted: ``k`` more are allowed;
- an acceptance histogram (``hist[i]`` steps accepted i drafts), when reported: ``sum(hist) = steps``,
  ``sum(i * hist[i]) = accepted`` and ``len(hist) <= k + 1``.

Per request, usage: ``cached_tokens <= prompt_tokens``; a successful request counted exactly
(``harness.load.openai.EXACT_COUNT_METHODS``) has ``completion_tokens`` equal to the streamed count.

Per wave, vLLM's ``/metrics`` counters read before and after it: every delta a whole non-negative number
(a counter never goes down within a wave), ``accepted <= draft tokens``, ``draft tokens <= drafts * k``,
``accepted + drafts <= the wave's streamed tokens`` (plus ``k`` per request, as above), and the
per-position accepted counts non-increasing from ``drafts`` down and summing to ``accepted``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.load.openai import EXACT_COUNT_METHODS
from harness.measure.speculative import VLLM_ACCEPTED, VLLM_DRAFT_TOKENS, VLLM_DRAFTS, VLLM_PER_POS
from harness.records import RequestRecord

__all__ = ["Contradiction", "draft_length", "request_contradictions", "wave_counter_contradictions"]


@dataclass(frozen=True)
class Contradiction:
    """One reported count that cannot be true: ``subject`` (a request id, or ``wave W`` for a counter
    delta) of wave ``wave_id``; ``field`` the reported count; ``relation`` what should hold;
    ``values`` the counts compared, by name, in the order of the relation."""

    subject: str
    wave_id: str
    field: str
    relation: str
    values: tuple[tuple[str, int | float], ...]

    def describe(self) -> str:
        """One line naming the subject, the field, the relation and the values."""
        shown = ", ".join(f"{n} {_num(v)}" for n, v in self.values)
        return f"{self.subject}: {self.field} ({shown}) breaks {self.relation}"

    def to_json(self) -> dict[str, Any]:
        """As plain data (the rule's and a report's input)."""
        return {"subject": self.subject, "wave_id": self.wave_id, "field": self.field,
                "relation": self.relation, "values": {n: v for n, v in self.values}}


def _num(v: int | float) -> str:
    return str(int(v)) if isinstance(v, int) or (math.isfinite(v) and v == int(v)) else repr(v)


def _c(subject: str, wave_id: str, fld: str, relation: str, **values: int | float) -> Contradiction:
    return Contradiction(subject, wave_id, fld, relation, tuple(values.items()))


def spec_contradictions(subject: str, wave_id: str, *, steps: int | None, proposed: int | None,
                        accepted: int | None, histogram: Sequence[int] = (), completion_tokens: int | None = None,
                        draft_tokens: int | None = None) -> list[Contradiction]:
    """The speculative counts one request reported, checked (module docstring); ``completion_tokens``:
    the bound on what its steps emitted (None: not bounded). Nothing is checked when no step count was
    reported (nothing claimed)."""
    if steps is None:
        return []
    out: list[Contradiction] = []
    acc, prop, k = accepted or 0, proposed, draft_tokens
    if prop is not None and acc > prop:
        out.append(_c(subject, wave_id, "spec_accepted", "accepted <= proposed",
                      spec_accepted=acc, spec_proposed=prop))
    if steps == 0 and (acc or prop):
        out.append(_c(subject, wave_id, "spec_steps", "no drafts without a verify step",
                      spec_steps=0, spec_proposed=prop or 0, spec_accepted=acc))
    if k is not None and prop is not None and prop > steps * k:
        out.append(_c(subject, wave_id, "spec_proposed", "proposed <= steps x draft tokens",
                      spec_proposed=prop, spec_steps=steps, draft_tokens=k))
    if completion_tokens is not None and acc + steps > completion_tokens + (k or 0):
        slack = f" + draft tokens {k}" if k else ""
        out.append(_c(subject, wave_id, "spec_accepted", f"accepted + steps <= completion tokens{slack}",
                      spec_accepted=acc, spec_steps=steps, completion_tokens=completion_tokens))
    if histogram:
        if sum(histogram) != steps:
            out.append(_c(subject, wave_id, "spec_histogram", "sum(histogram) = steps",
                          histogram_sum=sum(histogram), spec_steps=steps))
        weighted = sum(i * n for i, n in enumerate(histogram))
        if accepted is not None and weighted != accepted:
            out.append(_c(subject, wave_id, "spec_histogram", "sum(i x histogram[i]) = accepted",
                          histogram_weighted=weighted, spec_accepted=accepted))
        if k is not None and len(histogram) > k + 1:
            out.append(_c(subject, wave_id, "spec_histogram", "len(histogram) <= draft tokens + 1",
                          histogram_len=len(histogram), draft_tokens=k))
    return out


def usage_contradictions(subject: str, wave_id: str, *, prompt_tokens: int | None, cached_tokens: int | None,
                         completion_tokens: int | None, streamed_tokens: int, count_method: str,
                         ok: bool) -> list[Contradiction]:
    """A request's usage totals against each other and against the stream (module docstring)."""
    out: list[Contradiction] = []
    if cached_tokens is not None and prompt_tokens is not None and cached_tokens > prompt_tokens:
        out.append(_c(subject, wave_id, "cached_tokens", "cached_tokens <= prompt_tokens",
                      cached_tokens=cached_tokens, prompt_tokens=prompt_tokens))
    if (ok and count_method in EXACT_COUNT_METHODS and completion_tokens is not None
            and completion_tokens != streamed_tokens):
        out.append(_c(subject, wave_id, "completion_tokens", "completion_tokens = streamed tokens",
                      completion_tokens=completion_tokens, streamed_tokens=streamed_tokens))
    return out


def token_bound(streamed_tokens: int, completion_tokens: int | None, count_method: str, ok: bool) -> int | None:
    """What a request's verify steps can have emitted at most: the streamed count when counted exactly,
    else the server's usage total; None for a failed request (its stream may have been cut)."""
    if not ok:
        return None
    return streamed_tokens if count_method in EXACT_COUNT_METHODS else completion_tokens


def request_contradictions(row: Mapping[str, Any], draft_tokens: int | None = None) -> list[Contradiction]:
    """Every check of one request (module docstring) from a plain row: ``rid``, ``wave_id``,
    ``spec_steps``, ``spec_proposed``, ``spec_accepted``, ``spec_histogram``, ``prompt_tokens``,
    ``cached_tokens``, ``completion_tokens``, ``n_tokens`` (streamed), ``count_method``, ``ok``
    (missing keys read as not reported)."""
    rid, wave = str(row.get("rid")), str(row.get("wave_id"))
    streamed = int(row.get("n_tokens") or 0)
    method, ok = str(row.get("count_method") or "unknown"), bool(row.get("ok", True))
    completion = row.get("completion_tokens")
    return spec_contradictions(
        rid, wave, steps=row.get("spec_steps"), proposed=row.get("spec_proposed"),
        accepted=row.get("spec_accepted"), histogram=tuple(row.get("spec_histogram") or ()),
        completion_tokens=token_bound(streamed, completion, method, ok), draft_tokens=draft_tokens,
    ) + usage_contradictions(rid, wave, prompt_tokens=row.get("prompt_tokens"),
                             cached_tokens=row.get("cached_tokens"), completion_tokens=completion,
                             streamed_tokens=streamed, count_method=method, ok=ok)


def record_row(rec: RequestRecord) -> dict[str, Any]:
    """The plain row of :func:`request_contradictions` for one record."""
    return {"rid": rec.rid, "wave_id": rec.wave_id, "spec_steps": rec.spec_steps,
            "spec_proposed": rec.spec_proposed, "spec_accepted": rec.spec_accepted,
            "spec_histogram": [int(x) for x in rec.spec_histogram], "prompt_tokens": rec.prompt_tokens,
            "cached_tokens": rec.cached_tokens, "completion_tokens": rec.completion_tokens,
            "n_tokens": rec.n_tokens, "count_method": rec.count_method, "ok": rec.ok}


def record_contradictions(rec: RequestRecord, draft_tokens: int | None = None) -> list[Contradiction]:
    """:func:`request_contradictions` of one record."""
    return request_contradictions(record_row(rec), draft_tokens)


def _delta(before: Mapping[str, Any], after: Mapping[str, Any], name: str) -> float | None:
    b, a = before.get(name), after.get(name)
    if not isinstance(b, int | float) or not isinstance(a, int | float) or isinstance(a, bool) or isinstance(b, bool):
        return None
    return float(a) - float(b)


def counter_contradictions(wave_id: str, before: Mapping[str, Any], after: Mapping[str, Any], *,
                           streamed_tokens: int | None, requests: int,
                           draft_tokens: int | None = None) -> list[Contradiction]:
    """vLLM's speculative counters read before and after one wave, checked (module docstring);
    ``streamed_tokens``: the wave's output tokens as the client counted them (None: not bounded),
    ``requests`` its requests. Counters missing from either reading are not checked."""
    subject = f"wave {wave_id}"
    names = {"drafts": VLLM_DRAFTS, "draft_tokens": VLLM_DRAFT_TOKENS, "accepted": VLLM_ACCEPTED}
    d: dict[str, float] = {}
    out: list[Contradiction] = []
    for short, name in names.items():
        v = _delta(before, after, name)
        if v is None:
            continue
        if not (math.isfinite(v) and v >= 0 and v == int(v)):
            out.append(_c(subject, wave_id, name, "a counter delta is a whole count >= 0", delta=v))
            continue
        d[short] = v
    drafts, tokens, acc = d.get("drafts"), d.get("draft_tokens"), d.get("accepted")
    k = draft_tokens
    if acc is not None and tokens is not None and acc > tokens:
        out.append(_c(subject, wave_id, VLLM_ACCEPTED, "accepted <= draft tokens", accepted=acc, draft_tokens=tokens))
    if drafts is not None and k is not None and tokens is not None and tokens > drafts * k:
        out.append(_c(subject, wave_id, VLLM_DRAFT_TOKENS, "draft tokens <= drafts x k",
                      draft_tokens=tokens, drafts=drafts, k=k))
    if drafts is not None and acc is not None and streamed_tokens is not None \
            and acc + drafts > streamed_tokens + (k or 0) * requests:
        out.append(_c(subject, wave_id, VLLM_ACCEPTED, "accepted + drafts <= the wave's streamed tokens",
                      accepted=acc, drafts=drafts, streamed_tokens=streamed_tokens))
    out += _per_position(subject, wave_id, before, after, drafts, acc)
    return out


def _per_position(subject: str, wave_id: str, before: Mapping[str, Any], after: Mapping[str, Any],
                  drafts: float | None, accepted: float | None) -> list[Contradiction]:
    prefix = VLLM_PER_POS + "{"
    keys = sorted((k for k in after if isinstance(k, str) and k.startswith(prefix)), key=_position)
    if not keys or drafts is None:
        return []
    per = [_delta(before, after, k) for k in keys]
    if any(v is None for v in per):
        return []
    vals = [float(v) for v in per if v is not None]
    out: list[Contradiction] = []
    reached = [drafts, *vals]
    for i in range(1, len(reached)):
        if reached[i] > reached[i - 1]:
            out.append(_c(subject, wave_id, keys[i - 1], "per-position accepted <= the position before",
                          position=i - 1, accepted_at=reached[i], before=reached[i - 1]))
            break
    if accepted is not None and sum(vals) != accepted:
        out.append(_c(subject, wave_id, VLLM_PER_POS, "per-position accepted sum = accepted",
                      per_position_sum=sum(vals), accepted=accepted))
    return out


def _position(key: str) -> int:
    digits = "".join(ch for ch in key.rsplit("position=", 1)[-1] if ch.isdigit())
    return int(digits) if digits else 0


def wave_counter_contradictions(counters: Mapping[str, Mapping[str, Any]], rows: Iterable[Mapping[str, Any]],
                                draft_tokens: int | None = None) -> list[Contradiction]:
    """:func:`counter_contradictions` of every wave in ``counters`` (wave id -> ``before`` / ``after``
    readings) with its measured requests' streamed tokens from ``rows`` (the plain rows of
    :func:`request_contradictions`; a wave with a failed request is not bounded by its stream)."""
    tokens: dict[str, int | None] = {}
    count: dict[str, int] = {}
    for r in rows:
        w = str(r.get("wave_id"))
        bound = token_bound(int(r.get("n_tokens") or 0), r.get("completion_tokens"),
                            str(r.get("count_method") or "unknown"), bool(r.get("ok", True)))
        prev = tokens.get(w, 0)
        tokens[w] = None if bound is None or prev is None else prev + bound
        count[w] = count.get(w, 0) + 1
    out: list[Contradiction] = []
    for wave_id, readings in counters.items():
        before, after = readings.get("before"), readings.get("after")
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            out += counter_contradictions(wave_id, before, after, streamed_tokens=tokens.get(wave_id),
                                          requests=count.get(wave_id, 0), draft_tokens=draft_tokens)
    return out


def draft_length(services: Iterable[Mapping[str, Any]]) -> int | None:
    """k, the draft tokens per verify step, when every speculating service that says it says the same
    (``service.json``'s ``speculation.draft_tokens``); None otherwise."""
    ks = set()
    for s in services:
        spec = s.get("speculation")
        k = spec.get("draft_tokens") if isinstance(spec, Mapping) else None
        if type(k) is int and k > 0:
            ks.add(k)
    return ks.pop() if len(ks) == 1 else None
