"""Synthetic archives for tests and benchmarks (test data, not part of the package; writes archives).

Everything written here is labelled ``simulated`` and ``synthetic``, with backend ``sim``: these
archives exercise the report pipeline (selection, verification, snapshot, figures, templates)
without running a service. Result tables are built with the real producers
(:func:`harness.measure.results.cell_result`, :func:`harness.measure.abba.summarize`), so their format follows the
campaign code. Values are deterministic for a given ``seed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa

from harness.measure.abba import LEGS, legs_from_rates, summarize
from harness.measure.results import (
    CampaignResults,
    CellResult,
    RoundResult,
    cell_result,
    results_json,
    results_tables,
)
from harness.store.archive import Archive, ArchiveWriter, open_archive
from harness.store.ledger import append_rows
from harness.store.runblock import RunBlock

# Table 2 of the technical report (tok/s): used as the centre of synthetic rates.
PAPER_PREFILL = {1: 7035.83, 2: 9176.62, 4: 10278.75, 8: 10362.67, 16: 10413.87, 32: 10431.43, 64: 10381.49}
PAPER_RESIDENT = {1: 88.63, 2: 107.41, 4: 187.13, 8: 333.38, 16: 598.11, 32: 1041.78, 64: 1327.10}
PAPER_HTTP = {1: 86.76, 2: 102.89, 4: 152.72, 8: 250.49, 16: 458.78, 32: 689.74, 64: 829.65}

_SIM_SERVICE = {
    "name": "synthetic", "backend": "sim", "url": "http://127.0.0.1:0", "owned": True,
    "process": {"pid": 4242, "argv": ["dsv4h", "sim", "serve"]},
    "command": ["dsv4h", "sim", "serve", "--profile", "paper-tp8"], "env_diff": {},
    "ready_wall": "2026-11-29T00:00:00+0000", "start_index": 1,
    "server_info": {"_source": "/server_info", "version": "sim-0.1", "model_path": "sim://deepseek-v4-flash",
                    "tp_size": 8, "ep_size": 1, "chunked_prefill_size": 32768, "max_running_requests": 64,
                    "dsv4h_simulator": {"label": "simulated", "profile": "paper-tp8"}},
}
# ABBA archives get the record older runs wrote (no tokenizer, no observed ranges); formal matrices and
# sweeps the full record of harness.inputs.corpus.Corpus.identity (record format 2).
_CORPUS = {"name": "sim-code-512", "manifest_sha256": "0" * 64, "n_cases": 64, "token_range": [511, 512]}
_CORPUS_V2 = _CORPUS | {"record_format": 2, "path": "corpora/sim-code-512", "tokenizer": "dsv4h-sim-bpe-8k",
                        "tokenizer_sha256": "ab" * 32, "vocab_size": 8192, "input_tokens": [511, 512],
                        "token_ids": [3, 8189]}
_ENVIRONMENT = {"synthetic": True, "hostname": "synthetic-host", "machine": "x86_64", "cpu_count": 2,
                "gpus": {"source": "synthetic", "devices": [{"index": 0, "memory_total_bytes": 150_000_000_000}]}}


def _finish(writer: ArchiveWriter, run: dict[str, Any], status: str = "complete") -> Archive:
    block = RunBlock.model_validate({"run_token": "synthetic"} | run)
    return open_archive(writer.finalize(status=status, run=block))


def _with_latency(cell: CellResult) -> CellResult:
    """Decode cells get latency columns consistent with their rate (TPOT = C / rate; TTFT ~ an 8K
    prefill wave); prefill cells none, as in a real run of one-token answers."""
    if cell.workload != "decode" or not np.isfinite(cell.median_tok_s):
        return cell
    c = cell.concurrency
    tpot = c / cell.median_tok_s
    ttft = 0.5 + 0.01 * c
    n = float(3 * 2 * c)
    lat = {"ttft_n": n, "itl_n": n * 159, "tpot_n": n, "e2e_n": n}
    for metric, base in (("ttft", ttft), ("tpot", tpot), ("itl", tpot), ("e2e", ttft + 159 * tpot)):
        for stat, f in (("p50", 1.0), ("p90", 1.08), ("p99", 1.2), ("mean", 1.02), ("max", 1.35)):
            lat[f"{metric}_{stat}_s"] = base * f
    return replace(cell, latency=lat)


def write_formal_archive(workspace: Path, *, campaign: str = "synthetic-matrix", seed: int = 0,  # noqa: PLR0913 - test data knobs
                         tiers: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), rounds: int = 3,
                         created_wall: str = "2026-11-29T12:00:00+0000", memory_devices: int = 0,
                         memory_samples: int = 0, oracles: bool = False,
                         failed_round: tuple[str, int, int] | None = None, rate_scale: float = 1.0,
                         archive_status: str = "complete", resumed_from: str | None = None,
                         claim_class: str = "native-ar",
                         acceptance: Sequence[Mapping[str, Any]] | None = None) -> Archive:
    """A finalized formal-matrix archive with prefill and decode cells for ``tiers``.

    ``acceptance`` rows (harness.measure.rows.AcceptanceRow fields) go to ``acceptance.parquet``;
    ``claim_class`` is the run's claim class.

    ``rate_scale`` multiplies every rate (an interrupted run's lower numbers); ``archive_status`` is the
    archive's status and ``resumed_from`` the id of the archive this run resumed (which it supersedes).

    ``failed_round=(workload, concurrency, round_index)`` marks that round ``failed`` (kept, out of
    the median). ``memory_devices``/``memory_samples`` add a ``memory.parquet``; ``oracles`` adds an
    ``oracles.json`` with a passing France sentinel before and after measurement.
    """
    rng = np.random.default_rng(seed)
    rr: list[RoundResult] = []
    cells_spec: list[tuple[str, str, int]] = []
    for wl in ("decode", "prefill"):
        for c in tiers:
            cid = f"{wl}-c{c:02d}-syn{seed:04d}"
            cells_spec.append((cid, wl, c))
            base = PAPER_PREFILL[c] if wl == "prefill" else PAPER_RESIDENT[c]
            for k in range(rounds):
                rate = float(base * rate_scale * (1 + rng.normal(0, 0.004)))
                secs = 30.0 + k
                http = float((PAPER_HTTP[c] if wl == "decode" else 1.0 * c) * (1 + rng.normal(0, 0.004)))
                status = "failed" if failed_round == (wl, c, k) else "ok"
                rr.append(RoundResult(
                    round_id=f"{cid}.r{k}", cell_id=cid, round_index=k, workload=wl, concurrency=c, status=status,
                    n_waves=2, n_requests=2 * c, n_failed=0, rate_tok_s=rate, tokens=int(rate * secs), seconds=secs,
                    http_output_tok_s=http, http_tokens=int(http * secs * 1.2), http_seconds=secs * 1.2,
                    cache_violations=0))
    cells = tuple(_with_latency(cell_result(cid, wl, c, [r for r in rr if r.cell_id == cid], rounds))
                  for cid, wl, c in cells_spec)
    res = CampaignResults(waves=(), rounds=tuple(rr), cells=cells)
    w = ArchiveWriter(workspace)
    spec = {"name": campaign, "kind": "formal-matrix", "claim_class": claim_class, "protocol_class": "formal",
            "decode": {"tiers": list(tiers), "rounds": rounds, "min_resident_seconds": 30.0, "max_new_tokens": 2048,
                       "warmup_waves": 1, "ignore_eos": False},
            "prefill": {"tiers": list(tiers), "rounds": rounds, "warmup_waves": 1, "max_new_tokens": 1},
            "service": {"backend": "sim"}}
    w.write_json("spec.json", spec)
    w.write_json("results.json", results_json(res))
    extra = {"campaign": campaign, "claim_class": claim_class, "protocol_class": "formal"}
    tables = results_tables(res, extra)
    for name in ("cells", "rounds"):
        w.write_table(f"{name}.parquet", tables[name])
    w.write_json("service.json", {"services": [_SIM_SERVICE]})
    w.write_json("corpora.json", {"decode": _CORPUS_V2, "prefill": _CORPUS_V2 | {
        "name": "sim-code-8k", "path": "corpora/sim-code-8k", "token_range": [8191, 8192],
        "input_tokens": [8191, 8192], "token_ids": [0, 8191]}})
    w.write_json("environment.json", _ENVIRONMENT)
    if memory_devices and memory_samples:
        rows = []
        for d in range(memory_devices):
            used = 60e9 + d * 1e9
            for k in range(memory_samples):
                used += float(rng.normal(0, 2e8))
                rows.append({"t_monotonic_ns": 1_000_000_000 * k + d, "wall_iso": f"2026-11-29T12:00:{k % 60:02d}Z",
                             "device": d, "used_bytes": int(used), "total_bytes": 150_000_000_000})
        w.write_table("memory.parquet", pa.Table.from_pylist(rows))
    if oracles:  # as a run writes them: the sentinel before and after measurement
        w.write_json("oracles.json", {"results": [
            {"oracle": "france", "service": "service#1", "when": when, "passed": True,
             "output_hash16": "6f41fe2f01d52507", "first_divergence": None} for when in ("before", "after")]})
    if acceptance:
        w.write_table("acceptance.parquet", pa.Table.from_pylist([dict(r) | extra for r in acceptance]))
    run = {"campaign": campaign, "kind": "formal-matrix", "claim_class": claim_class, "protocol_class": "formal",
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated", "synthetic"],
           "service_name": "synthetic", "error": None, "resumed_from": resumed_from}
    return _finish(w, run, archive_status)


def write_abba_archive(workspace: Path, *, campaign: str = "synthetic-abba", seed: int = 0,
                       effect: float = 0.10, waves_per_leg: int = 2, concurrency: int = 32,
                       created_wall: str = "2026-11-29T13:00:00+0000",
                       energy: Mapping[str, Any] | None = None) -> Archive:
    """A finalized ABBA screen archive with a candidate ``effect`` (0.10 = +10 %) on C``concurrency``;
    ``energy`` is written as its ``energy.json`` (harness.run.energy)."""
    rng = np.random.default_rng(seed)
    base = PAPER_RESIDENT.get(concurrency, 1000.0)
    rates: dict[str, list[tuple[float, float]]] = {}
    for leg in LEGS:
        f = 1 + (effect if leg.startswith("B") else 0.0)
        rates[leg] = [(float(base * f * (1 + rng.normal(0, 0.003))),
                       float(0.72 * base * f * (1 + rng.normal(0, 0.003)))) for _ in range(waves_per_leg)]
    legs = legs_from_rates(rates)
    result = summarize(legs)
    n = waves_per_leg * concurrency
    outputs = {"compared": n, "identical_all_legs": n, "differing": 0, "identical_within_control": n,
               "identical_within_candidate": n, "identical_across_arms": n}
    leg_services = {"A1": {"pid": 100, "service_index": 1, "fresh_start": True},
                    "B1": {"pid": 200, "service_index": 2, "fresh_start": True},
                    "B2": {"pid": 200, "service_index": 2, "fresh_start": False},
                    "A2": {"pid": 300, "service_index": 3, "fresh_start": True}}
    w = ArchiveWriter(workspace)
    w.write_json("spec.json", {"name": campaign, "kind": "abba", "workload": {
        "name": f"{campaign}-workload", "concurrency": concurrency, "waves_per_leg": waves_per_leg,
        "boundary": "resident", "max_new_tokens": 192, "declared_change": ["sim.step_factor"]}})
    w.write_json("comparison.json", {"result": asdict(result), "outputs": outputs, "legs": leg_services,
                                     "failed_leg": None})
    services = [_SIM_SERVICE | {"name": name, "start_index": i, "process": {"pid": pid}}
                for i, (name, pid) in enumerate((("control", 100), ("candidate", 200), ("control", 300)), start=1)]
    w.write_json("service.json", {"services": services, "legs": leg_services, "b2_shares_b1_service": True})
    w.write_json("identity_check.json", {"declared_change": ["sim.step_factor"],
                                         "declared_differences": ["sim.step_factor: control 1.0, candidate 0.909"],
                                         "undeclared_differences": [], "allow_identity_change": False})
    w.write_json("corpora.json", {"workload": _CORPUS})
    if energy is not None:
        w.write_json("energy.json", dict(energy))
    w.write_table("legs.parquet", pa.Table.from_pylist(
        [{"leg": k, "wave_rates": list(v.wave_rates), "http_rates": list(v.http_rates), "median": v.median}
         for k, v in legs.items()]))
    run = {"campaign": campaign, "kind": "abba", "claim_class": "native-ar", "protocol_class": "abba-screen",
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated", "synthetic"],
           "service_name": "control vs candidate", "error": None}
    return _finish(w, run)


def write_sweep_archive(workspace: Path, *, campaign: str = "synthetic-sweep", seed: int = 0,
                        rates: Sequence[float] = (2.0, 4.0, 8.0), rounds: int = 3,
                        created_wall: str = "2026-11-29T14:00:00+0000") -> Archive:
    """A finalized rate-sweep archive (``sweep.json``, ``sweep_cells.parquet``, ``sweep_rounds.parquet``): request
    throughput follows the offered rate up to a service limit of 5 req/s, TTFT grows with the load, and
    goodput under the recorded SLO (TTFT 1 s, TPOT 50 ms) collapses once p99 TTFT passes 1 s."""
    rng = np.random.default_rng(seed)
    cells: list[dict[str, Any]] = []
    round_rows: list[dict[str, Any]] = []
    ttft_slo = 1.0
    slo = {"ttft_s": ttft_slo, "tpot_s": 0.05, "e2e_s": None}
    for rate in rates:
        load = rate / 5.0
        served = min(rate, 5.0)
        ttft, tpot = 0.2 + 0.6 * load ** 3, 0.02 + 0.02 * load ** 2
        good = served * (1.0 if ttft * 1.2 <= ttft_slo else 0.3)
        cid = f"sweep-{rate:g}rps"
        vals = [float(good * (1 + rng.normal(0, 0.01))) for _ in range(rounds)]
        for k, v in enumerate(vals):
            round_rows.append({"round_id": f"{cid}.r{k}", "cell_id": cid, "round_index": k,
                               "arrival_rate_req_s": rate, "status": "ok", "goodput_req_s": v,
                               "request_throughput_req_s": served,
                               "client_schedule_kept": True, "client_lag_p99_s": 0.001})
        cells.append({"cell_id": cid, "workload": "sweep", "arrival_rate_req_s": rate, "rounds_ok": rounds,
                      "rounds_planned": rounds, "concurrency": 0, "request_throughput_median_req_s": served,
                      "output_throughput_median_tok_s": served * 160.0, "input_throughput_median_tok_s": served * 512.0,
                      "goodput_median_req_s": float(np.median(vals)), "goodput_min_req_s": min(vals),
                      "goodput_max_req_s": max(vals),
                      "ttft_p50_s": ttft, "ttft_p99_s": ttft * 1.2, "tpot_p50_s": tpot, "tpot_p99_s": tpot * 1.3,
                      "e2e_p50_s": ttft + 159 * tpot, "e2e_p99_s": (ttft + 159 * tpot) * 1.2, "schedule_kept": True,
                      "client_lag_p99_s": 0.001})
    best = max(cells, key=lambda c: (c["goodput_median_req_s"], -c["arrival_rate_req_s"]))
    w = ArchiveWriter(workspace)
    w.write_json("spec.json", {"name": campaign, "kind": "rate-sweep", "rates": list(rates), "rounds": rounds,
                               "schedule_tolerance_ms": 50.0})
    w.write_json("sweep.json", {"cells": cells, "rounds": round_rows, "slo": slo, "plan_id": f"syn{seed:013d}",
                                "knee": {"arrival_rate_req_s": best["arrival_rate_req_s"],
                                         "goodput_median_req_s": best["goodput_median_req_s"]}})
    extra = {"campaign": campaign, "claim_class": "native-ar", "protocol_class": "rate-sweep"}
    w.write_table("sweep_cells.parquet", pa.Table.from_pylist([c | extra for c in cells]))
    w.write_table("sweep_rounds.parquet", pa.Table.from_pylist([r | extra for r in round_rows]))
    w.write_json("service.json", {"services": [_SIM_SERVICE]})
    w.write_json("corpora.json", {"sweep": _CORPUS_V2})
    w.write_json("environment.json", _ENVIRONMENT)
    run = {"campaign": campaign, "kind": "rate-sweep", "claim_class": "native-ar", "protocol_class": "rate-sweep",
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated", "synthetic"],
           "service_name": "synthetic", "error": None}
    return _finish(w, run)


def write_matched_archive(workspace: Path, *, campaign: str = "synthetic-matched",  # noqa: PLR0913 - test data knobs
                          created_wall: str = "2026-11-29T15:00:00+0000", concurrency: int = 4,
                          ar_rates: Sequence[float] = (99.0, 101.0), sd_rates: Sequence[float] = (198.0, 202.0),
                          t_ar_s: float = 0.040, t_sd_s: float = 0.050, steps: int = 200, proposed: int = 600,
                          accepted: int = 300, differing: int = 0, status: str = "complete",
                          failed_leg: str | None = None, algorithm: str = "EAGLE",
                          sd_claim: str = "speculative-full-target") -> Archive:
    """A finalized matched AR/SD archive (legs AR1 SD1 SD2 AR2, every wave at ``ar_rates`` / ``sd_rates``
    tok/s, every stream step gap ``t_ar_s`` / ``t_sd_s``, each SD leg ``steps``/``proposed``/``accepted``
    counts), built with the real producers (harness.measure.matched.summarize_matched,
    harness.run.matched.result_json / leg_row). Defaults: a = 2.5, acceptance 50 %, T_SD/T_AR = 1.25,
    SD rate 200 = 2 x AR rate 100: ``sd-faster``. ``differing`` SD outputs differ from AR1's at token 7."""
    from harness.measure.matched import LegData, OutputDiff, summarize_matched
    from harness.measure.speculative import SpecCounts
    from harness.run.matched import leg_row, result_json

    order = ("AR1", "SD1", "SD2", "AR2")
    legs = []
    for leg in order:
        sd = leg.startswith("SD")
        rates = tuple(float(x) for x in (sd_rates if sd else ar_rates))
        counts = SpecCounts(steps, proposed, accepted, steps + accepted + concurrency * len(rates),
                            "sglang-meta-info") if sd else None
        legs.append(LegData(leg, rates, tuple(0.75 * x for x in rates), (t_sd_s if sd else t_ar_s,) * 8, counts))
    compared = 2 * concurrency * len(sd_rates) + concurrency * len(ar_rates)
    diffs = tuple(("SD1", 0, f"case-{k:03d}", 7) for k in range(differing))
    outputs = OutputDiff("AR1", compared, compared - differing, diffs)
    result = summarize_matched(legs, order, concurrency, outputs)
    leg_services = {leg: {"pid": 500 + i, "service_index": i + 1, "fresh_start": True}
                    for i, leg in enumerate(order)}
    spec_info: dict[str, Any] = {"speculative_algorithm": algorithm, "speculative_draft_model_path": "sim-draft",
                                 "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                 "speculative_num_draft_tokens": 4}
    ar_info: dict[str, Any] = {"speculative_algorithm": None}
    base_info: dict[str, Any] = dict(cast(Mapping[str, Any], _SIM_SERVICE["server_info"]))
    services = [_SIM_SERVICE | {"name": "sd" if leg.startswith("SD") else "ar", "start_index": i + 1,
                                "first_leg": leg, "process": {"pid": 500 + i},
                                "server_info": base_info | (spec_info if leg.startswith("SD") else ar_info)}
                for i, leg in enumerate(order)]
    common = {"campaign": campaign, "claim_class": sd_claim, "protocol_class": "matched-sd"}
    w = ArchiveWriter(workspace)
    w.write_json("spec.json", {"name": campaign, "kind": "matched-sd", "sd_claim": sd_claim, "order": list(order),
                               "workload": {"concurrency": concurrency, "waves_per_leg": len(sd_rates),
                                            "max_new_tokens": 128}})
    w.write_json("service.json", {"services": services, "legs": leg_services})
    w.write_json("corpora.json", {"workload": _CORPUS_V2})
    w.write_table("legs.parquet", pa.Table.from_pylist([leg_row(x) | common for x in legs]))
    acc = [{"wave_id": f"{x.leg}.w{j}", "cell_id": x.leg, "concurrency": concurrency, "source": "sglang-meta-info",
            "verify_steps": steps // len(sd_rates), "drafts_proposed": proposed // len(sd_rates),
            "drafts_accepted": accepted // len(sd_rates), "completion_tokens": 0} | common
           for x in legs if x.counts is not None for j in range(len(sd_rates))]
    w.write_table("acceptance.parquet", pa.Table.from_pylist(acc))
    w.write_json("matched.json", {"result": result_json(result), "legs": leg_services, "failed_leg": failed_leg})
    run = {"campaign": campaign, "kind": "matched-sd", "claim_class": sd_claim, "protocol_class": "matched-sd",
           "backend": "sim", "created_wall": created_wall, "labels": ["simulated", "synthetic"],
           "service_name": "ar vs sd", "error": f"leg {failed_leg} failed" if failed_leg else None,
           "failed_leg": failed_leg}
    return _finish(w, run, status)


HISTORICAL_COLUMNS = ("entry_id", "source", "published_date", "measured_date", "protocol_label", "claim_class",
                      "protocol_class", "metric", "concurrency", "value", "unit", "tp", "label", "not_claims")


def write_historical_ledger(workspace: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """Append ``entries`` to the ``historical`` ledger table (one transaction, canonical schema; keys
    outside it are not stored, missing ones are null)."""
    append_rows(workspace, "historical", [dict(e) for e in entries])


def synthetic_historical_entries(n: int = 5) -> list[dict[str, Any]]:
    """``n`` clearly synthetic milestone entries (source ``synthetic``; the first has a published range,
    every third no measured date) plus one synthetic historical formal cell, for tests and benchmarks."""
    out: list[dict[str, Any]] = []
    for k in range(n):
        out.append({
            "entry_id": f"syn-{k:03d}", "source": "synthetic", "published_date": "2026-09-18",
            "measured_date": None if k % 3 == 2 else f"2026-0{1 + k % 9}-10",
            "protocol_label": "synthetic TP4 short probe", "claim_class": "native-ar",
            "protocol_class": "historical-other", "metric": "single_request_output", "concurrency": 1,
            "value": 15.0 + 12.0 * k, "range_max": 16.0 if k == 0 else None, "unit": "output tok/s", "tp": 4,
            "label": f"synthetic milestone {k}", "not_claims": ["not current", "not a controlled series"],
        })
    out.append({
        "entry_id": "syn-formal-c1", "source": "synthetic", "published_date": "2026-09-18",
        "measured_date": "2026-09-18", "protocol_label": "synthetic formal matrix", "claim_class": "native-ar",
        "protocol_class": "formal", "metric": "resident_decode", "concurrency": 1, "value": 88.63,
        "unit": "output tok/s", "tp": 8, "label": "synthetic historical formal cell", "not_claims": ["not current"],
    })
    return out
