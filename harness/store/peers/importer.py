"""Peer benchmark results in (edge module: files); :mod:`harness.store.peers.export` writes them out.

**Import.** A result file of another tool becomes an archive of claim class ``external`` (kind
``external``, protocol class ``external``): ``external.json`` holds the tool, each source file's name and
SHA-256, the tool's summary numbers *as the tool computed them* (``summary``, keys as in the file), the
names of the tool's own metric definitions (:data:`DEFINITIONS`) and which row fields dsv4h derived
(``derived``); ``external.parquet`` holds one row per request (:data:`ROW_SCHEMA`): lengths, TTFT, E2E,
the tool's per-chunk gaps where it writes them, error, start offset, and ``peer``, a JSON object of the
request's numbers exactly as the tool wrote them. The source files are kept byte for byte. Nothing of it
is a dsv4h measurement: the archive has no raw records, adds only a ``runs`` ledger row (``dsv4h import``
appends it at once), the evidence rule ``external-claim`` labels it and the comparison guard refuses to
combine claim classes.

**Whose server.** ``external.json`` ``server`` records the server's identity where the peer's file
holds the server's own report (sglang.bench_serving saves ``/server_info`` as ``server_info``;
:func:`harness.store.peers.parse.server_identity`) and ``data_origin``: ``simulated`` when that
report is the dsv4h simulator's (the run is then also labelled ``simulated``; its claim class stays
``external``), ``external`` when it names another server, ``unknown`` when the file cannot tell (vLLM,
GuideLLM and AIPerf files name only the model the client asked for, which is no server's identity).

Formats read (each checked against a file the real tool wrote here, tests/fixtures/peers/):

* ``sglang-bench``: sglang.bench_serving ``--output-file`` JSONL with ``--output-details`` (the last
  line; one line per run is appended). No per-request E2E in the file: ``e2e_s`` = TTFT + sum(ITL).
* ``vllm-bench``: ``vllm bench serve --save-result --save-detailed`` JSON (``latencies``,
  ``start_times`` per request).
* ``guidellm``: GuideLLM report JSON (``benchmarks[].requests.{successful,errored,incomplete}[]``);
  GuideLLM writes per-request means only, so ``itl_s`` is empty.
* ``aiperf``: AIPerf ``profile_export.jsonl`` (``--export-level records``; one record per request,
  ``metrics.<name>.{value,unit}``) or its artifact directory; ``profile_export_aiperf.json`` beside it
  gives the summary.

**A total function.** Another host's file is untrusted input: every import either makes an archive or
raises one ``ArchiveError`` naming the file, the field (its path in the document, e.g.
``ttfts.3``) and the reason; never a traceback, never a reinterpretation. Each file is typed by a strict
model (``harness.store.peers.docs``: ``BenchResult``, ``GuideLLMReport``, ``AIPerfRecord``): wrong container types,
text where a number belongs, booleans, non-integer or negative or absurd lengths (above
:data:`MAX_LENGTH`), negative or absurd times (above :data:`MAX_SECONDS`), NaN and infinities, invalid
UTF-8 and lone surrogate escapes are refused, and the counts must agree (every per-request list as long
as ``ttfts``; ``completed`` = the requests without an error; ``failed`` = the rest; GuideLLM's stored
requests no more than its ``request_totals``; AIPerf's records without an error = its summary's
``request_count``). A file with no per-request data is refused: there would be nothing to keep.
Summary numbers are the tool's own; one that is NaN or infinite in the file is kept as null and named in
``derived``. Only regular files are read (a FIFO or a device is refused without being opened for
reading), each at most ``max_bytes`` (:data:`MAX_IMPORT_BYTES`, ``dsv4h import --max-bytes``).

**Memory.** JSON lines are parsed one line at a time (AIPerf's records; of an sglang file only the last
line is kept); a whole-document format is parsed once from its bytes (``pydantic_core.from_json``) and
typed without copying its numbers. Rows are kept as flat typed columns, the Parquet file is written
without dictionary pages, and the source is hashed while it is read, then copied into the archive in
chunks (a source that changed between the two reads is refused). benchmarks/bench_import.py measures it:
a 179 MB vllm-bench file imports in 3.5 s at 595 MB peak RSS (80 MB of it the interpreter and modules).

**Once per source.** ``external.json`` keeps each source file's SHA-256; importing a source the
workspace already holds (same tool, same hashes: :func:`imported_before`) is refused with one error
naming the archive that holds it, so a repeated command never counts a peer run twice. ``again``
(``dsv4h import --again``) imports it deliberately a second time: that archive's ``external.json``
``again_of`` names the earlier archive and its run is labelled ``imported-again`` (``again_of`` is null in
every other import, and absent in imports written before it existed).

**No partial left to mislabel.** The file is parsed completely before anything is written. The archive's
partial directory then gets :data:`IMPORT_MARKER` first (tool, claim class ``external``); a failure
while writing removes the partial directory, and one left by a killed process is recovered by
``harness.run.recover`` as an ``external`` import (:func:`recovered_import_run`), never as a measurement.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ArchiveError
from harness.formats import atomic_write_table
from harness.interrupts import fault_point
from harness.service.identity.environment import clock_anchor
from harness.store.archive import PARTIAL_PREFIX, Archive, ArchiveWriter, iter_archives, open_archive
from harness.store.peers.parse import (
    AIPERF_RECORDS,
    AIPERF_SUMMARY,
    GUIDELLM_REQUEST_KEYS,
    MAX_IMPORT_BYTES,
    ROW_SCHEMA,
    TOOLS,
    Columns,
    Tool,
    origin_of,
    parse_peer,
    parse_sources,
    source_files,
)
from harness.store.runblock import RunBlock

__all__ = [
    "AIPERF_RECORDS", "AIPERF_SUMMARY", "DEFINITIONS", "GUIDELLM_REQUEST_KEYS", "IMPORT_MARKER", "MAX_IMPORT_BYTES",
    "ROW_SCHEMA", "TOOLS", "Tool", "import_peer", "parse_peer", "recovered_import_run", "source_files",
]

IMPORT_MARKER = "import.json"  # written first into an import's partial directory (module docstring)

# Read from the tools' source (sglang 0.5.23 sglang/benchmark/serving.py, vllm 0.32.0
# vllm/benchmarks/serve.py, guidellm 0.8.1, aiperf 0.13.0) and checked on the fixture files.
DEFINITIONS: dict[str, dict[str, str]] = {
    "sglang-bench": {
        "ttft": "first streamed chunk with non-empty text minus send (s)",
        "itl": "per token: gap between text-carrying chunks / tokens new in that chunk (meta_info.completion_tokens)",
        "tpot": "(latency - ttft) / (output_len - 1), output_len = the server's completion_tokens",
        "e2e": "last stream message ([DONE]) minus send (summary only; not written per request)",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "vllm-bench": {
        "ttft": "first streamed chunk with choices minus send (s)",
        "itl": "gap between consecutive chunks with choices (per chunk)",
        "tpot": "(latency - ttft) / (output_len - 1)",
        "e2e": "last chunk with choices minus send (latencies, e2el; = ttft + sum(itl))",
        "input_len": "the server's usage.prompt_tokens where reported, else the client tokenizer's count",
        "output_len": "the server's usage.completion_tokens",
        "goodput": "completed requests meeting every --goodput SLO / duration"},
    "guidellm": {
        "ttft": "first_token_iteration - request_start (time_to_first_token_ms)",
        "itl": "(last_token_iteration - first_token_iteration) / (output_tokens - 1), per request",
        "tpot": "(last_token_iteration - request_start) / output_tokens (time_per_output_token_ms)",
        "e2e": "request_end - request_start (request_latency, s)"},
    "aiperf": {
        "ttft": "metrics.time_to_first_token (first response with content)",
        "itl": "metrics.inter_token_latency: (request_latency - ttft) / (output_sequence_length - 1); "
               "per chunk: metrics.inter_chunk_latency",
        "tpot": "same as its inter_token_latency",
        "e2e": "metrics.request_latency",
        "output_len": "output_sequence_length: the client tokenizer's count of the generated text"},
}

def _duration_s(tool: Tool, summary: Mapping[str, Any]) -> float | None:
    """The run's duration (s) as the tool measured it, None where its summary has none."""
    v = summary.get("benchmark_duration.avg" if tool == "aiperf" else "duration")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _run_block(tool: str, token: str, campaign: str, labels: Sequence[str], *, created_wall: str,
               error: str | None = None) -> RunBlock:
    return RunBlock(campaign=campaign, kind="external", claim_class="external", protocol_class="external",
                    backend="external", service_name=tool, created_wall=created_wall, run_token=token,
                    labels=tuple(dict.fromkeys((*labels, "external", tool))), error=error)


def recovered_import_run(marker: Mapping[str, Any], token: str, error: str) -> RunBlock:
    """The run block of an import's partial directory left by a killed ``dsv4h import`` (from its
    :data:`IMPORT_MARKER`): still an ``external`` claim, labelled ``recovered``."""
    tool = str(marker.get("tool", "unknown"))
    labels = [str(x) for x in marker.get("labels") or [] if isinstance(x, str)]
    return _run_block(tool, token, str(marker.get("campaign") or f"{tool}-import"), [*labels, "recovered"],
                      created_wall=str(marker.get("created_wall", "")), error=error)


def _discard(writer: ArchiveWriter) -> None:
    """Remove a partial import directory (and its lock file) that will not become an archive."""
    if writer.dir.name.startswith(PARTIAL_PREFIX):
        shutil.rmtree(writer.dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            (writer.dir.parent / f"{writer.dir.name}.lock").unlink()
    writer.close()


AGAIN_LABEL = "imported-again"


def imported_before(workspace: Path, tool: str, sha256s: Sequence[str]) -> Archive | None:
    """The oldest import archive in ``workspace`` of ``tool`` whose source files have exactly these
    SHA-256s (``external.json`` ``source_files``; an archive older than them its ``source_sha256``),
    or None."""
    want = sorted(sha256s)
    for a in iter_archives(workspace):
        if a.run.kind != "external" or not a.has("external.json"):
            continue
        ext = a.json("external.json")
        files = ext.get("source_files") or [{"sha256": ext.get("source_sha256")}]
        if ext.get("tool") == tool and sorted(str(f.get("sha256")) for f in files) == want:
            return a
    return None


def import_peer(path: Path, tool: Tool, workspace: Path, *, name: str | None = None,
                labels: Sequence[str] = (), max_bytes: int = MAX_IMPORT_BYTES, again: bool = False) -> Archive:
    """Import one peer result as an ``external`` archive (module docstring): parsed and checked in
    full first; written into a marked partial directory that is removed again if anything fails.
    A source the workspace holds already (same tool, same SHA-256s) is refused with ``ArchiveError``
    naming that archive, unless ``again``: the new archive then records ``again_of`` (the earlier
    archive's id) in ``external.json`` and the label ``imported-again``."""
    parsed = parse_sources(path, tool, max_bytes)
    try:
        earlier = imported_before(workspace, tool, [s.sha256 for s in parsed.sources])
        if earlier is not None and not again:
            raise ArchiveError(
                f"{path} was imported already: archive {earlier.archive_id} holds the same {tool} source "
                f"(SHA-256 {parsed.sources[0].sha256[:16]}...)",
                hint=f"'dsv4h archive show {earlier.archive_id} -w {shlex.quote(str(workspace))}' shows it; "
                "pass --again to import the same file a second time on purpose (the new archive records which "
                "one it repeats)")
        if earlier is not None:
            labels = [*labels, AGAIN_LABEL]
        table = parsed.columns.table()
        n_requests = len(parsed.columns)
        parsed.columns = Columns()  # the table holds the rows now
        first = parsed.sources[0]
        origin = origin_of(parsed.server)
        token = secrets.token_hex(8)
        campaign = name or f"{tool}-{first.sha256[:12]}"
        created = str(clock_anchor()["wall_iso"])
        writer = ArchiveWriter(workspace, token=token)
        try:
            writer.write_json(IMPORT_MARKER, {"kind": "external", "claim_class": "external", "tool": tool,
                                              "campaign": campaign, "labels": list(labels),
                                              "created_wall": created,
                                              "sources": [s.path.name for s in parsed.sources]})
            fault_point("import:marked")
            for s in parsed.sources:
                s.copy_into(writer.dir / f"source-{s.path.name}")
            fault_point("import:sources-copied")
            hashes = [{"name": s.path.name, "sha256": s.sha256, "bytes": s.bytes} for s in parsed.sources]
            atomic_write_table(writer.dir / "external.parquet", table, use_dictionary=False)
            writer.write_json("external.json", {
                "tool": tool, "source_file": first.path.name, "source_sha256": first.sha256,
                "source_files": hashes, "summary": parsed.summary, "metric_definitions": DEFINITIONS[tool],
                "derived": parsed.derived, "n_requests": n_requests,
                "duration_s": _duration_s(tool, parsed.summary), "server": parsed.server,
                "data_origin": origin, "again_of": earlier.archive_id if earlier is not None else None,
                "note": "numbers as the peer tool computed them; not a dsv4h measurement; never combined with "
                        "measured claims"})
            fault_point("import:written")
            sim_label = ["simulated"] if origin == "simulated" else []
            run = _run_block(tool, token, campaign, [*labels, *sim_label], created_wall=created)
            return open_archive(writer.finalize(status="complete", run=run))
        except BaseException:
            _discard(writer)
            raise
    finally:
        for s in parsed.sources:
            s.close()
