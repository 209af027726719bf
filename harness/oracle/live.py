"""Oracle checks, captures and repeated captures against a live server (edge module: HTTP).

Every request goes through :class:`harness.load.driver.LoadClient` as one streamed, greedy request
(``temperature 0``) with a fresh cache salt and a unique rid, alone on its connection: a check never
shares a batch with another of its own requests. Output IDs are compared exactly (:mod:`harness.oracle.model`).

Failure policy: when nothing accepts connections at the URL, ``ServerUnreachable`` is raised (from
:func:`harness.load.client.probe`) before anything is sent. Every other failure of a request (HTTP error,
error event, disconnect, timeout) is a *result*: a failed ``OracleResult`` or a failed capture inside a
``RepeatResult``, carrying the reason. Only ``capture_oracle`` raises (``OracleError``), since a failed
response cannot become an oracle.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from harness import __version__
from harness.errors import OracleError, ServerUnreachable, ServiceError
from harness.hashing import ids_hash16, ids_sha256
from harness.ids import RequestIdentity
from harness.inputs.corpus import cache_salt
from harness.load.client import Protocol, probe
from harness.load.driver import DEFAULT_TIMEOUT_S, LoadClient, WaveRequest, run_sync
from harness.oracle.model import (
    Decode,
    Oracle,
    OracleResult,
    OracleTokenizer,
    RepeatResult,
    evaluate,
    repeat_verdict,
    write_oracle,
)
from harness.records import RequestRecord

__all__ = [
    "DEFAULT_DOES_NOT_CERTIFY",
    "capture_oracle",
    "check_oracle",
    "describe_service",
    "fresh_salt",
    "repeat_oracle",
    "simulator_decode",
    "write_oracle",
]

DEFAULT_DOES_NOT_CERTIFY: tuple[str, ...] = (
    "Other inputs, longer contexts or other output lengths.",
    "Other batch shapes or concurrency: the capture ran one request alone.",
    "Other model builds, checkpoints, precisions, kernels or serving configurations.",
    "Answer quality or task accuracy.",
    "Throughput or latency.",
)

Progress = Callable[[int, int, RequestRecord], None]
"""Called after each repeated capture with (capture number from 1, n, its record)."""


def fresh_salt(name: str) -> str:
    """A cache salt never used before (32 hex digits), so no check is served from the prefix cache."""
    return cache_salt("dsv4h-oracle", name, uuid.uuid4().hex)


def _request(input_ids: Sequence[int], max_new_tokens: int, ignore_eos: bool, name: str) -> WaveRequest:
    ids = [int(i) for i in input_ids]
    return WaveRequest(
        input_ids=ids,
        max_new_tokens=max_new_tokens,
        rid=f"oracle-{name}-{uuid.uuid4().hex[:16]}",
        ignore_eos=ignore_eos,
        cache_salt=fresh_salt(name),
        identity=RequestIdentity(phase="oracle", workload="oracle", case_id=name, input_hash=ids_sha256(ids)),
        concurrency=1,
    )


async def _send_sequential(
    url: str,
    requests: Sequence[Callable[[], WaveRequest]],
    *,
    protocol: Protocol,
    model: str | None,
    timeout_s: float,
    progress: Progress | None = None,
) -> list[RequestRecord] | str:
    """Probe, then send the requests one at a time, in order; a client setup failure returns its reason."""
    await probe(url)
    out: list[RequestRecord] = []
    try:
        async with LoadClient(url, protocol=protocol, concurrency=1, model=model, timeout_s=timeout_s,
                              pause_gc=False) as client:
            for k, make in enumerate(requests, start=1):
                rec = await client.send(make())
                out.append(rec)
                if progress is not None:
                    progress(k, len(requests), rec)
    except ServerUnreachable:
        raise
    except ServiceError as exc:  # e.g. vLLM lists no model: the server answered, the check could not run
        return str(exc)
    return out


def check_oracle(
    url: str,
    oracle: Oracle,
    *,
    protocol: Protocol = "sglang",
    model: str | None = None,
    decode: Decode | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> OracleResult:
    """Send the oracle's input once (greedy, its ``max_new_tokens`` and ``ignore_eos``, fresh cache salt)
    and compare the output IDs exactly with the expected ones.

    ``decode`` (a tokenizer's decode) fills ``text``; ``timeout_s`` is the longest silence tolerated while
    reading (seconds). Raises ``ServerUnreachable`` when nothing answers at ``url``; any other failure is
    a failed result whose ``error`` says why.
    """
    req = _request(oracle.input_ids, oracle.request_max_new_tokens, oracle.ignore_eos, oracle.name)
    got = run_sync(_send_sequential(url, [lambda: req], protocol=protocol, model=model, timeout_s=timeout_s))
    if isinstance(got, str):
        return evaluate(oracle, [], error=got, service_url=url, cache_salt=req.cache_salt)
    rec = got[0]
    return evaluate(
        oracle,
        rec.output_ids,
        error=rec.error,
        finish_reason=rec.finish_reason,
        service_url=url,
        decode=decode,
        cached_tokens=rec.cached_tokens,
        cache_salt=req.cache_salt,
    )


def capture_oracle(
    url: str,
    input_ids: Sequence[int],
    *,
    name: str,
    max_new_tokens: int,
    protocol: Protocol = "sglang",
    model: str | None = None,
    tokenizer_identity: OracleTokenizer | Mapping[str, Any] | None = None,
    service_identity: Mapping[str, Any] | None = None,
    description: str = "",
    certifies: Sequence[str] | None = None,
    does_not_certify: Sequence[str] | None = None,
    decode: Decode | None = None,
    ignore_eos: bool = False,
    provenance: Mapping[str, Any] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Oracle:
    """Send ``input_ids`` once (greedy, fresh cache salt) and freeze the response as an oracle.

    ``service_identity`` defaults to :func:`describe_service` of ``url``; ``decode`` fills
    ``expected_text``; ``certifies`` defaults to one sentence naming the input length, ``max_new_tokens``
    and the output hash, ``does_not_certify`` to ``DEFAULT_DOES_NOT_CERTIFY``. ``provenance`` gets the
    finish reason and salt added. Raises ``ServerUnreachable`` when nothing answers, ``OracleError`` when
    the request failed or returned no tokens. Write the result with :func:`harness.oracle.model.write_oracle`.
    """
    req = _request(input_ids, max_new_tokens, ignore_eos, name)
    got = run_sync(_send_sequential(url, [lambda: req], protocol=protocol, model=model, timeout_s=timeout_s))
    if isinstance(got, str):
        raise OracleError(f"cannot capture {name} from {url}: {got}", hint="Pass --model, or check the server.")
    rec = got[0]
    if rec.error is not None or rec.output_ids.size == 0:
        why = rec.error or "the response carried no output token IDs"
        raise OracleError(f"cannot capture {name} from {url}: {why}",
                          hint="A failed or empty response cannot be an oracle; fix the server and retry.")
    out = [int(i) for i in rec.output_ids.tolist()]
    h16 = ids_hash16(out)
    service = dict(service_identity) if service_identity is not None else describe_service(url, protocol)
    prov: dict[str, Any] = dict(provenance or {})
    prov.setdefault("captured_from", url)
    prov.setdefault("captured_at", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    prov.setdefault("captured_with", f"dsv4h {__version__}")
    prov.update({"finish_reason": rec.finish_reason, "cached_tokens": rec.cached_tokens,
                 "cache_salt": req.cache_salt, "input_sha256": req.identity.input_hash})
    tok = tokenizer_identity
    if isinstance(tok, Mapping):
        tok = OracleTokenizer.model_validate(dict(tok))
    sentence = (f"Greedy decoding (temperature 0) of these {len(req.input_ids)} fixed input IDs, alone, with "
                f"max_new_tokens {max_new_tokens}{' and ignore_eos' if ignore_eos else ''}, on the service "
                f"identified under `service`, returns exactly these {len(out)} output IDs (hash {h16}).")
    return Oracle(
        name=name,
        description=description,
        input_ids=list(req.input_ids),
        expected_output_ids=out,
        expected_text=decode(out) if decode is not None else None,
        output_hash16=h16,
        max_new_tokens=max_new_tokens,
        ignore_eos=ignore_eos,
        tokenizer=tok,
        service=service,
        certifies=list(certifies) if certifies else [sentence],
        does_not_certify=list(does_not_certify) if does_not_certify else list(DEFAULT_DOES_NOT_CERTIFY),
        provenance=prov,
    )


def repeat_oracle(
    url: str,
    oracle_or_ids: Oracle | Sequence[int],
    n: int,
    *,
    max_new_tokens: int | None = None,
    ignore_eos: bool = False,
    protocol: Protocol = "sglang",
    model: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
) -> RepeatResult:
    """Send the same request ``n`` times, in order, one at a time, each with a fresh cache salt, and apply
    the exact repeated-capture gate (:func:`harness.oracle.model.repeat_verdict`).

    With an ``Oracle`` the request is the oracle's and the reference is its expected output; with plain
    input IDs ``max_new_tokens`` is required and the reference is the majority output. Failed captures are
    listed in ``errors`` (the gate then fails). Raises ``ServerUnreachable`` when nothing answers and
    ``ValueError`` for ``n < 1`` or missing ``max_new_tokens``.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if isinstance(oracle_or_ids, Oracle):
        name = oracle_or_ids.name
        ids: Sequence[int] = oracle_or_ids.input_ids
        mnt = oracle_or_ids.request_max_new_tokens if max_new_tokens is None else max_new_tokens
        eos = oracle_or_ids.ignore_eos
        expected: Sequence[int] | None = oracle_or_ids.expected_output_ids
    else:
        if max_new_tokens is None:
            raise ValueError("max_new_tokens is required when repeating plain input IDs")
        name, ids, mnt, eos, expected = "repeat", oracle_or_ids, max_new_tokens, ignore_eos, None

    def make() -> WaveRequest:
        return _request(ids, mnt, eos, name)

    got = run_sync(_send_sequential(url, [make] * n, protocol=protocol, model=model, timeout_s=timeout_s,
                                    progress=progress))
    if isinstance(got, str):
        return repeat_verdict([[] for _ in range(n)], expected, errors={k: got for k in range(1, n + 1)})
    errors = {k: rec.error for k, rec in enumerate(got, start=1) if rec.error is not None}
    return repeat_verdict([rec.output_ids for rec in got], expected, errors=errors)


def describe_service(url: str, protocol: Protocol = "sglang") -> dict[str, Any]:
    """A small identity record of the server at ``url`` from its own report (``/server_info``, fallback
    ``/get_server_info``; vLLM ``/v1/models``): model path, version, parallelism, and whether it is the
    dsv4h simulator (then ``label: simulated`` and its profile). Raises ``ServerUnreachable``."""
    from harness.service.launch.manager import read_server_info

    info = read_server_info(url.rstrip("/"), protocol)
    out: dict[str, Any] = {"protocol": protocol}
    if info.get("_source") == "/v1/models":
        models = info.get("models")
        data = models.get("data") if isinstance(models, dict) else None
        if data and isinstance(data[0], dict):
            out["model"] = data[0].get("id")
        return out
    for key in ("model_path", "version", "tp_size", "ep_size", "dp_size", "speculative_algorithm"):
        if key in info:
            out[key] = info[key]
    sim = info.get("dsv4h_simulator")
    if isinstance(sim, dict):
        out["label"] = sim.get("label", "simulated")
        out["sim_profile"] = sim.get("profile")
    return out


def simulator_decode(service: Mapping[str, Any]) -> Decode | None:
    """The simulator's detokenizer when ``service`` (from :func:`describe_service`) is the dsv4h simulator,
    else None (pass a real tokenizer's decode instead)."""
    if service.get("label") != "simulated":
        return None
    from harness.sim.tokens import decode_tokens

    return decode_tokens
