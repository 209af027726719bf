"""``dsv4h oracle check|capture|repeat``: fixed-input greedy sentinels (thin over harness.oracle.live)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import console
from harness.errors import OracleError, SpecError
from harness.load.client import PROTOCOLS, Protocol
from harness.oracle.model import Decode, Oracle, OracleTokenizer, load_oracle, write_oracle
from harness.records import RequestRecord

app = typer.Typer(
    help="Oracles: exact fixed-input greedy completions (sentinels) checked, captured and repeated against "
    "a service.\n\nExample: dsv4h oracle check --service http://127.0.0.1:30000",
    no_args_is_help=True,
)

DEFAULT_ORACLE = Path("oracles/france.yaml")
_REPO = Path(__file__).resolve().parent.parent.parent

ServiceOpt = Annotated[str, typer.Option(
    "--service", help="base URL (e.g. http://127.0.0.1:30000) or a service-profile YAML to start, use and "
    "stop")]
ProtocolOpt = Annotated[str, typer.Option(
    "--protocol", help="wire protocol for a URL: sglang or vllm (a profile says its own)")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="model name for vLLM requests (default: the server's first model)")]
TokenizerOpt = Annotated[Path | None, typer.Option(
    "--tokenizer", help="tokenizer directory or tokenizer.json used to decode the output to text "
    "(the simulator's own detokenizer is used automatically)")]


def _say(text: str) -> None:
    """Print plain text (no rich markup: IDs and brackets print as they are)."""
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


@dataclass(frozen=True)
class _Target:
    url: str
    protocol: Protocol
    model: str | None


def _protocol(value: str) -> Protocol:
    for p in PROTOCOLS:
        if p == value:
            return p
    raise SpecError(f"unknown --protocol {value!r}", hint=f"use one of: {', '.join(PROTOCOLS)}")


@contextlib.contextmanager
def _service(service: str, protocol: str, model: str | None) -> Iterator[_Target]:
    """A URL as given, or a service profile started for the duration of the block (then stopped)."""
    if service.startswith(("http://", "https://")):
        yield _Target(service.rstrip("/"), _protocol(protocol), model)
        return
    path = Path(service)
    if not path.is_file():
        raise SpecError(f"--service {service!r} is neither an http(s) URL nor a service-profile file",
                        hint="pass e.g. http://127.0.0.1:30000 or campaigns/profiles/sim-control.yaml")
    from harness.inputs.spec import load_profile
    from harness.service.launch.manager import start_service

    profile = load_profile(path)
    _say(f"starting service {profile.name} ({profile.backend}) from {path} ...")
    svc = start_service(profile, Path.cwd(), label="oracle")
    try:
        _say(f"service ready at {svc.url}")
        yield _Target(svc.url, profile.wire_protocol, model or profile.identity.served_model_name)
    finally:
        svc.stop()


def _decoder(target: _Target, tokenizer: Path | None) -> tuple[Decode | None, dict[str, Any]]:
    from harness.oracle.live import describe_service, simulator_decode

    service = describe_service(target.url, target.protocol)
    if tokenizer is not None:
        return _tokenizer_decode(tokenizer), service
    return simulator_decode(service), service


def _tokenizer_decode(tokenizer: Path, *, skip_special_tokens: bool = True) -> Decode:
    """A decode function from a local tokenizer file or directory."""
    from harness.inputs.tokenizer import load_tokenizer

    tok = load_tokenizer(tokenizer)

    def decode(ids: Any) -> str:
        return str(tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens))

    return decode


def _resolve_oracle(path: Path) -> Path:
    if path.is_file() or path.is_absolute():
        return path
    fallback = _REPO / path
    return fallback if fallback.is_file() else path


@app.command("check")
def check_cmd(
    service: ServiceOpt,
    oracle: Annotated[list[Path] | None, typer.Option(
        "--oracle", help="oracle YAML (repeatable; default oracles/france.yaml)")] = None,
    protocol: ProtocolOpt = "sglang",
    model: ModelOpt = None,
    tokenizer: TokenizerOpt = None,
) -> None:
    """Send each oracle's fixed input once (greedy, fresh cache salt) and compare the output IDs exactly.
    Prints the output hash and, on failure, the first diverging position; exits with code 8 if any oracle
    fails. A profile YAML is started, checked and stopped.

    Example: dsv4h oracle check --service http://127.0.0.1:30000 --oracle oracles/france.yaml

    Example: dsv4h oracle check --service campaigns/profiles/sim-control.yaml
    """
    from harness.oracle.live import check_oracle

    oracles = [load_oracle(_resolve_oracle(p)) for p in (oracle or [DEFAULT_ORACLE])]
    failed: list[str] = []
    with _service(service, protocol, model) as target:
        decode, ident = _decoder(target, tokenizer)
        label = " [simulated]" if ident.get("label") == "simulated" else ""
        _say(f"service {target.url}: {ident.get('model_path') or ident.get('model') or '?'}{label}")
        for o in oracles:
            res = check_oracle(target.url, o, protocol=target.protocol, model=target.model, decode=decode)
            _say(res.summary())
            if res.text is not None:
                _say(f"  text: {_short(repr(res.text))}")
            if res.cached_tokens:
                _say(f"  warning: the server reports {res.cached_tokens} cached tokens despite a fresh cache salt")
            if not res.passed:
                failed.append(o.name)
                if res.first_divergence is not None and res.error is None:
                    i = res.first_divergence
                    exp = o.expected_output_ids[i] if i < len(o.expected_output_ids) else "(end)"
                    got = res.got_ids[i] if i < len(res.got_ids) else "(end)"
                    _say(f"  position {i}: expected {exp}, got {got}")
    if failed:
        raise OracleError(f"{len(failed)} of {len(oracles)} oracle(s) failed: {', '.join(failed)}",
                          hint="The service does not reproduce the frozen output; see the first diverging "
                          "position above. An oracle certifies only what its `certifies` list says.")


def _parse_ids(value: str) -> list[int]:
    text = value
    path = Path(value)
    if not value.lstrip().startswith("[") and path.is_file():
        text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"--input-ids: not a JSON list of token IDs: {exc}",
                        hint="pass e.g. '[0, 128803, 3085]' or a file holding such a list") from exc
    if isinstance(data, dict) and "input_ids" in data:
        data = data["input_ids"]
    if not isinstance(data, list) or not data or not all(isinstance(i, int) and not isinstance(i, bool)
                                                         for i in data):
        raise SpecError("--input-ids must be a non-empty JSON list of integers",
                        hint="pass e.g. '[0, 128803, 3085]' or a file holding such a list")
    return data


@app.command("capture")
def capture_cmd(
    service: ServiceOpt,
    out: Annotated[Path, typer.Option("--out", help="oracle file to write, e.g. oracles/NAME.yaml")],
    input_ids: Annotated[str | None, typer.Option(
        "--input-ids", help="JSON list of token IDs, or a file holding one")] = None,
    corpus: Annotated[str | None, typer.Option("--corpus", help="corpus NAME or directory (with --case)")] = None,
    case: Annotated[str | None, typer.Option("--case", help="case id in --corpus, e.g. c000")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="new-token limit", min=1)] = 2048,
    name: Annotated[str | None, typer.Option("--name", help="oracle name (default: --out's stem)")] = None,
    description: Annotated[str, typer.Option("--description", help="one line")] = "",
    certifies: Annotated[list[str] | None, typer.Option(
        "--certifies", help="a sentence the oracle certifies (repeatable; default: one naming the request)")
    ] = None,
    does_not_certify: Annotated[list[str] | None, typer.Option(
        "--does-not-certify", help="a sentence it does not certify (repeatable; default: a standard list)")
    ] = None,
    protocol: ProtocolOpt = "sglang",
    model: ModelOpt = None,
    tokenizer: TokenizerOpt = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
) -> None:
    """Send one fixed input (greedy, fresh cache salt) and freeze the response as an oracle file with the
    server's own identity, the tokenizer identity (the corpus's, or --tokenizer's) and its output hash.

    Example: dsv4h oracle capture --service http://127.0.0.1:30000 --corpus sim-code-512 --case c000
    --out oracles/sim-code-c000.yaml

    Example: dsv4h oracle capture --service http://127.0.0.1:30000 --input-ids '[0, 128803, 3085, 344]'
    --max-new-tokens 64 --out oracles/mine.yaml
    """
    from harness.oracle.live import capture_oracle

    if (input_ids is None) == (corpus is None) or (corpus is None) != (case is None):
        raise SpecError("pass exactly one of --input-ids and --corpus NAME --case ID",
                        hint="e.g. --corpus sim-code-512 --case c000")
    if out.exists() and not force:
        raise OracleError(f"{out} already exists; an oracle is never overwritten silently",
                          hint="choose another --out, or pass --force")
    tok_ident: OracleTokenizer | None = None
    provenance: dict[str, Any] = {}
    if corpus is not None:
        assert case is not None
        from harness.inputs.corpus import load_corpus, resolve_corpus_path

        c = load_corpus(resolve_corpus_path(corpus))
        cs = c.case(case)
        ids = cs.ids_list()
        t = c.manifest.tokenizer
        tok_ident = OracleTokenizer(name=t.name, files=dict(t.files), vocab_size=t.vocab_size)
        provenance = {"corpus": c.name, "corpus_manifest_sha256": c.manifest_sha256, "case_id": cs.case_id}
    else:
        assert input_ids is not None
        ids = _parse_ids(input_ids)
    if tokenizer is not None:
        from harness.inputs.tokenizer import tokenizer_identity

        tok_ident = OracleTokenizer.model_validate(tokenizer_identity(tokenizer))
    with _service(service, protocol, model) as target:
        decode, ident = _decoder(target, tokenizer)
        if decode is not None:
            provenance["text_decoded_with"] = str(tokenizer) if tokenizer is not None else \
                "the dsv4h simulator's detokenizer (harness.sim.tokens.decode_tokens)"
        if not service.startswith(("http://", "https://")):  # a profile was started: record which one
            provenance["service_profile"] = service
        oracle: Oracle = capture_oracle(
            target.url, ids, name=name or out.stem, max_new_tokens=max_new_tokens, protocol=target.protocol,
            model=target.model, tokenizer_identity=tok_ident, service_identity=ident, description=description,
            certifies=certifies, does_not_certify=does_not_certify, decode=decode, provenance=provenance,
        )
    path = write_oracle(oracle, out, force=force)
    _say(f"wrote {path}: {len(oracle.input_ids)} input IDs -> {len(oracle.expected_output_ids)} output IDs, "
         f"hash {oracle.output_hash16} (finish {oracle.provenance.get('finish_reason')})")


@app.command("repeat")
def repeat_cmd(
    service: ServiceOpt,
    oracle: Annotated[Path, typer.Option("--oracle", help="oracle YAML")] = DEFAULT_ORACLE,
    n: Annotated[int, typer.Option("--n", help="number of captures, sent one at a time in order", min=1)] = 70,
    protocol: ProtocolOpt = "sglang",
    model: ModelOpt = None,
) -> None:
    """The exact repeated-capture gate: send the oracle's request N times in order, one at a time, each
    with a fresh cache salt; pass only when all N outputs are identical and equal the oracle's. Prints each
    differing capture (1-based) and its first diverging position; exits with code 8 otherwise.

    Example: dsv4h oracle repeat --service http://127.0.0.1:30000 --oracle oracles/france.yaml --n 70
    """
    from harness.oracle.live import repeat_oracle

    o = load_oracle(_resolve_oracle(oracle))

    def progress(k: int, total: int, rec: RequestRecord) -> None:
        if rec.error is not None:
            _say(f"  capture {k}/{total}: failed: {rec.error}")

    with _service(service, protocol, model) as target:
        res = repeat_oracle(target.url, o, n, protocol=target.protocol, model=target.model, progress=progress)
    _say(f"{o.name}: {res.summary()}")
    for d in res.differing:
        _say(f"  capture {d.capture}: hash {res.capture_hashes[d.capture - 1]}, first divergence at position "
             f"{d.position}")
    if not res.passed:
        if res.unique == 1 and not res.errors:
            hint = ("The service repeats itself exactly but does not reproduce the oracle's output: check the "
                    "service identity against the oracle's `service` (`dsv4h oracle check` shows the first "
                    "diverging position).")
        else:
            hint = ("Exact repeated captures are a gate: find why outputs vary (batch-dependent kernels, "
                    "nondeterministic reductions, failed requests) before promoting anything.")
        raise OracleError(
            f"repeat gate failed for {o.name}: {res.unique} unique output(s) over {res.n} captures, "
            f"{len(res.differing)} differing from the expected output, {len(res.errors)} failed",
            hint=hint,
        )


@app.command("integrity")
def integrity_cmd(
    archive: Annotated[str, typer.Argument(help="archive directory or id")],
    workspace: Annotated[Path, typer.Option("--workspace", "-w", help="workspace holding archives/")] = Path(),
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="tokenizer.json to decode output IDs (default: the simulator's own decoder "
        "for simulator archives)")] = None,
) -> None:
    """ID/text integrity of an archive: decoding each response's output IDs must reproduce the text
    the server streamed (exit 8 on any failure).

    Example: dsv4h oracle integrity 3f2a9c01 -w ws --tokenizer /models/DeepSeek-V4-Flash/tokenizer.json
    """
    from harness.oracle.model import integrity_over_records
    from harness.store.archive import find_archive, open_verified

    a = open_verified(find_archive(archive, workspace))
    decode: Decode | None = None
    if tokenizer is not None:
        # streamed text keeps special tokens, so they are kept when decoding too
        decode = _tokenizer_decode(tokenizer, skip_special_tokens=False)
    elif a.run.simulated:
        from harness.sim.tokens import decode_tokens

        decode = decode_tokens
    if decode is None:
        raise SpecError("no decoder for this archive's output IDs",
                        hint="pass --tokenizer PATH (the model's tokenizer.json)")
    res = integrity_over_records(a.records(), decode)
    console.print(f"archive {a.archive_id}: {res.checked} responses checked, {res.passed} passed, "
                  f"{len(res.failed)} failed, {res.skipped} skipped (no text, failed or delta streams)")
    if res.failed:
        raise OracleError(f"{len(res.failed)} response(s) whose output IDs do not decode to the streamed text: "
                          + ", ".join(res.failed[:5]), hint="check the tokenizer matches the served model")
    if res.checked == 0:
        raise OracleError("no response carried cumulative text to check",
                          hint="the server must stream text (SGLang without --skip-tokenizer-init)")
