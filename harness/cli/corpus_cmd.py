"""``dsv4h corpus build|verify|show|train-tokenizer``: frozen token-ID corpora (thin over the library)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import console
from harness.errors import SpecError
from harness.inputs.corpus import Corpus, load_corpus, resolve_corpus_path
from harness.inputs.trace import DEFAULT_MAX_BLOCKS, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, DEFAULT_MAX_TOTAL_TOKENS

app = typer.Typer(
    help="Frozen token-ID corpora: build from source files with a tokenizer, verify against the manifest, "
    "show what is inside.\n\nExample: dsv4h corpus verify sim-code-512",
    no_args_is_help=True,
)


def _corpus_summary(c: Corpus) -> str:
    lo, hi = c.token_range
    return (f"{c.name}: {len(c.cases)} cases of {lo}-{hi} tokens, tokenizer {c.manifest.tokenizer.name}, "
            f"manifest sha256 {c.manifest_sha256}")


@app.command("build")
def build_cmd(
    tokenizer: Annotated[Path, typer.Option("--tokenizer", help="tokenizer directory or tokenizer.json")],
    cases: Annotated[int, typer.Option("--cases", help="number of cases (the total, when extending)")],
    out: Annotated[Path, typer.Option("--out", help="corpus directory to write, e.g. corpora/NAME")],
    source: Annotated[Path | None, typer.Option(
        "--source", help="directory of source files (walked sorted); or use --stdlib")] = None,
    stdlib: Annotated[bool, typer.Option(
        "--stdlib", help="source = this Python's Lib/ without tests, IDLE, lib2to3, turtledemo, codec tables "
        "and pydoc topics; records repository python/cpython, revision vX.Y.Z, root Lib")] = False,
    tokens: Annotated[str | None, typer.Option(
        "--tokens", help="case length N or N-M tokens, inclusive (default with --extend: the old range)"),
    ] = None,
    extend: Annotated[Path | None, typer.Option(
        "--extend", help="existing corpus whose cases are kept byte-identical; new cases are appended"),
    ] = None,
    chat_encoding: Annotated[str | None, typer.Option(
        "--chat-encoding", help="module:function mapping the prompt text to the text to tokenize, e.g. "
        "harness.inputs.corpus.build:deepseek_v4_chat")] = None,
    name: Annotated[str | None, typer.Option("--name", help="corpus name (default: --out's name)")] = None,
    description: Annotated[str | None, typer.Option("--description", help="one-line description")] = None,
    revision: Annotated[str | None, typer.Option(
        "--revision", help="source revision recorded in the manifest, e.g. v3.11.7")] = None,
    repository: Annotated[str | None, typer.Option(
        "--repository", help="source repository recorded in the manifest")] = None,
    root: Annotated[str | None, typer.Option(
        "--root", help="name of the source root recorded in the manifest (default: --source's name)")] = None,
    include: Annotated[list[str] | None, typer.Option(
        "--include", help="fnmatch pattern of files to use, relative to --source (repeatable; default *.py)")
    ] = None,
    exclude: Annotated[list[str] | None, typer.Option(
        "--exclude", help="fnmatch pattern of files to skip (repeatable; default: tests, __pycache__)"),
    ] = None,
    max_per_file: Annotated[int | None, typer.Option(
        "--max-per-file", help="at most this many excerpts per source file")] = None,
    template_file: Annotated[Path | None, typer.Option(
        "--template-file", help="prompt template file with {path} and {code} (default: a review prompt)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
) -> None:
    """Build a corpus deterministically: consecutive line spans of the source files, wrapped in a prompt
    template, tokenized and fitted into the token range; writes manifest.json and cases.jsonl.

    Example: dsv4h corpus build --stdlib --tokenizer corpora/tokenizers/dsv4h-sim-bpe-8k --tokens 511-512
    --cases 32 --max-per-file 2 --chat-encoding harness.inputs.corpus.build:deepseek_v4_chat --out corpora/my-512

    Extend to 64 (old cases kept byte-identical, other settings inherited): dsv4h corpus build --stdlib
    --tokenizer corpora/tokenizers/dsv4h-sim-bpe-8k --cases 64 --extend corpora/my-512 --out corpora/my-512
    --force
    """
    from harness.inputs.corpus.build import STDLIB_EXCLUDE, build_corpus, parse_token_range, stdlib_dir

    if stdlib == (source is not None):
        raise SpecError("pass exactly one of --source DIR and --stdlib",
                        hint="Example: --stdlib, or --source path/to/repo/src")
    if stdlib:
        source = stdlib_dir()
        v = sys.version_info
        repository = repository or "https://github.com/python/cpython"
        revision = revision or f"v{v.major}.{v.minor}.{v.micro}"
        root = root or "Lib"
        exclude = exclude or list(STDLIB_EXCLUDE)
    assert source is not None
    token_range = parse_token_range(tokens) if tokens is not None else None
    template = None
    if template_file is not None:
        try:
            template = template_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"cannot read --template-file {template_file}: {exc}",
                            hint="Pass a readable UTF-8 text file.") from exc
    t0 = time.perf_counter()
    corpus = build_corpus(
        source, tokenizer, token_range, cases, out, name=name, description=description, template=template,
        extend=extend, chat_encoding=chat_encoding, source_revision=revision, source_repository=repository,
        source_root=root, include=include or None, exclude=exclude or None, max_per_file=max_per_file,
        overwrite=force,
    )
    dt = time.perf_counter() - t0
    console.print(f"built {corpus.path} in {dt:.2f} s")
    console.print(_corpus_summary(corpus), highlight=False, soft_wrap=True)


@app.command("verify")
def verify_cmd(
    corpus: Annotated[str, typer.Argument(help="corpus directory, or NAME for corpora/NAME")],
) -> None:
    """Check every case against the manifest; exit non-zero (code 3) naming each changed, missing or extra
    case. On success print the case count and the manifest hash.

    Example: dsv4h corpus verify sim-code-512
    """
    c = load_corpus(resolve_corpus_path(corpus))
    console.print(f"ok {_corpus_summary(c)}", highlight=False, soft_wrap=True)


def _histogram(lengths: list[int], bins: int = 10) -> list[tuple[str, int]]:
    counts = Counter(lengths)
    if len(counts) <= bins:
        return [(str(n), counts[n]) for n in sorted(counts)]
    lo, hi = min(lengths), max(lengths)
    width = max(1, -(-(hi - lo + 1) // bins))
    rows = []
    for b in range(bins):
        a = lo + b * width
        if a > hi:
            break
        z = min(a + width - 1, hi)
        rows.append((f"{a}-{z}", sum(v for k, v in counts.items() if a <= k <= z)))
    return rows


@app.command("show")
def show_cmd(
    corpus: Annotated[str, typer.Argument(help="corpus directory, or NAME for corpora/NAME")],
    limit: Annotated[int | None, typer.Option("--limit", help="show at most this many cases")] = None,
) -> None:
    """Describe a corpus (verified first): case count, length histogram, tokenizer identity, source,
    build history and the provenance of every case.

    Example: dsv4h corpus show sim-code-8k --limit 10
    """
    c = load_corpus(resolve_corpus_path(corpus))
    m = c.manifest
    console.print(f"[bold]{c.name}[/] — {m.description}", highlight=False, soft_wrap=True)
    console.print(f"path {c.path}   format_version {m.format_version}   manifest sha256 {c.manifest_sha256}",
                  highlight=False, soft_wrap=True)
    console.print(f"{len(c.cases)} cases, token range {m.token_range.min}-{m.token_range.max}, "
                  f"chat encoding {m.chat_encoding or 'none'}", highlight=False, soft_wrap=True)
    console.print(f"source {m.source.repository} @ {m.source.revision}, root {m.source.root}/",
                  highlight=False, soft_wrap=True)

    tok = Table(title=f"tokenizer {m.tokenizer.name} (vocab {m.tokenizer.vocab_size or '?'})",
                title_justify="left")
    tok.add_column("file")
    tok.add_column("sha256")
    for fname, digest in sorted(m.tokenizer.files.items()):
        tok.add_row(fname, digest)
    console.print(tok)

    hist = Table(title="length histogram (tokens)", title_justify="left")
    hist.add_column("tokens", justify="right")
    hist.add_column("cases", justify="right")
    hist.add_column("")
    rows = _histogram([x.n_tokens for x in c.cases])
    top = max((n for _, n in rows), default=1)
    for label, n in rows:
        hist.add_row(label, str(n), "█" * max(1 if n else 0, round(30 * n / top)))
    console.print(hist)

    hst = Table(title="history", title_justify="left")
    for col in ("step", "cases", "total", "max/file", "extended from"):
        hst.add_column(col)
    for h in m.history:
        frm = ""
        if h.extended_from is not None:
            ef = h.extended_from
            frm = f"{ef.get('name')} ({ef.get('n_cases')} cases, {str(ef.get('manifest_sha256'))[:16]})"
        hst.add_row(h.action, f"{h.first_case}-{h.last_case}", str(h.n_cases), str(h.max_per_file or "-"),
                    frm)
    console.print(hst)

    prov = Table(title="cases", title_justify="left")
    for col, just in (("case", "left"), ("tokens", "right"), ("sha256[:16]", "left"), ("path", "left"),
                      ("lines", "right"), ("trimmed", "right")):
        prov.add_column(col, justify=just)  # type: ignore[arg-type]
    shown = c.cases if limit is None else c.cases[:limit]
    for case in shown:
        p = case.provenance
        prov.add_row(case.case_id, str(case.n_tokens), case.hash16, str(p["path"]),
                     f"{p['line_start']}-{p['line_end']}", str(p.get("trimmed_tokens", 0)))
    console.print(prov)
    if len(shown) < len(c.cases):
        console.print(f"... {len(c.cases) - len(shown)} more cases (drop --limit to see all)")


@app.command("train-tokenizer")
def train_tokenizer_cmd(
    out: Annotated[Path, typer.Option("--out", help="directory to write tokenizer.json into")],
    vocab_size: Annotated[int, typer.Option("--vocab-size", help="total vocabulary, specials included")],
    specials: Annotated[str, typer.Option(
        "--specials", help="special-token preset: 'deepseek' (BOS 0, EOS 1, chat markers) or 'tiny' "
        "(<pad> 0, <s> 1, </s> 2)")] = "deepseek",
    source: Annotated[Path | None, typer.Option(
        "--source", help="source directory (default: this Python's standard library)")] = None,
    revision: Annotated[str | None, typer.Option(
        "--revision", help="recorded source revision (default: this Python, e.g. 'CPython 3.11.7 Lib/')")
    ] = None,
    model_max_length: Annotated[int, typer.Option(
        "--model-max-length", help="model_max_length in tokenizer_config.json")] = 1 << 20,
    force: Annotated[bool, typer.Option("--force", help="replace an existing tokenizer")] = False,
) -> None:
    """Train a byte-level BPE tokenizer offline (seconds) on .py sources, by default this Python's standard
    library without tests, IDLE, lib2to3, turtledemo, codec tables and pydoc topics.

    Example: dsv4h corpus train-tokenizer --out corpora/tokenizers/dsv4h-sim-bpe-8k --vocab-size 8192
    """
    from harness.inputs.corpus.build import (
        DEEPSEEK_SPECIAL_TOKENS,
        STDLIB_EXCLUDE,
        TINY_SPECIAL_TOKENS,
        stdlib_dir,
        train_tokenizer,
    )

    presets = {"deepseek": DEEPSEEK_SPECIAL_TOKENS, "tiny": TINY_SPECIAL_TOKENS}
    if specials not in presets:
        raise SpecError(f"unknown --specials {specials!r}", hint="Use 'deepseek' or 'tiny'.")
    toks = presets[specials]
    t0 = time.perf_counter()
    ident = train_tokenizer(
        stdlib_dir() if source is None else source, out, vocab_size=vocab_size, special_tokens=toks,
        exclude=STDLIB_EXCLUDE, bos_token=toks[0] if specials == "deepseek" else toks[1],
        eos_token=toks[1] if specials == "deepseek" else toks[2], model_max_length=model_max_length,
        source_revision=revision, overwrite=force,
    )
    dt = time.perf_counter() - t0
    tr = ident["training"]
    console.print(f"trained {out} in {dt:.2f} s: vocab {ident['vocab_size']}, {tr['n_files']} files, "
                  f"{tr['n_chars']:,} chars of {tr['source_revision']}", highlight=False, soft_wrap=True)
    for fname, digest in ident["files"].items():
        console.print(f"  {fname} sha256 {digest}", highlight=False, soft_wrap=True)


@app.command("synth")
def synth_cmd(
    out: Annotated[Path, typer.Option("--out", help="new corpus directory")],
    tokenizer: Annotated[Path, typer.Option("--tokenizer", help="tokenizer directory or tokenizer.json")],
    cases: Annotated[int, typer.Option("--cases", help="number of cases")],
    inputs: Annotated[str, typer.Option("--inputs", help="input lengths: fixed:N uniform:LO:HI normal:M:S "
                                        "lognormal:MEDIAN:SIGMA")],
    outputs: Annotated[str, typer.Option("--outputs", help="declared output lengths (same forms)")],
    seed: Annotated[int, typer.Option("--seed")] = 0,
    extend: Annotated[Path | None, typer.Option("--extend", help="existing corpus to append to")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
) -> None:
    """Build a corpus whose input/output lengths are drawn from declared distributions (seeded,
    hashed, provenance per case; each case's output length in the manifest).

    Example: dsv4h corpus synth --out corpora/syn --tokenizer corpora/tokenizers/tiny-bpe-512 --cases 32
    --inputs lognormal:256:0.5 --outputs uniform:16:128 --seed 1
    """
    from harness.inputs.corpus.synth import build_distribution_corpus

    c = build_distribution_corpus(out, tokenizer=tokenizer, n_cases=cases, inputs=inputs, outputs=outputs,
                                  seed=seed, extend=extend, overwrite=force)
    console.print(f"built {c.name}: {len(c)} cases, manifest {c.manifest_sha256[:16]}")


@app.command("import-sharegpt")
def import_sharegpt_cmd(
    source: Annotated[Path, typer.Argument(help="local ShareGPT-format JSON file")],
    out: Annotated[Path, typer.Option("--out", help="new corpus directory")],
    tokenizer: Annotated[Path, typer.Option("--tokenizer", help="tokenizer directory or tokenizer.json")],
    cases: Annotated[int | None, typer.Option("--cases", help="at most this many cases (default: all)")] = None,
    max_input: Annotated[int, typer.Option("--max-input", help="skip prompts longer than this")] = 32768,
    extend: Annotated[Path | None, typer.Option("--extend", help="existing corpus to append to")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
    max_bytes: Annotated[int, typer.Option("--max-bytes", min=1,
                                           help="refuse a larger file (it is parsed whole)")] = 256 << 20,
) -> None:
    """Freeze the multi-turn conversations of a local ShareGPT-format file into token IDs (one case
    per answered human turn; the answer's length is the case's output length).

    Example: dsv4h corpus import-sharegpt chats.json --out corpora/chats --tokenizer corpora/tokenizers/tiny-bpe-512
    """
    from harness.inputs.corpus.synth import import_sharegpt

    c = import_sharegpt(out, source=source, tokenizer=tokenizer, n_cases=cases, max_input=max_input,
                        extend=extend, overwrite=force, max_bytes=max_bytes)
    console.print(f"imported {c.name}: {len(c)} cases, manifest {c.manifest_sha256[:16]}")


@app.command("import-trace")
def import_trace_cmd(
    source: Annotated[Path, typer.Argument(help="Mooncake-format JSONL trace (timestamp ms, input_length, "
                                           "output_length, hash_ids)")],
    block_size: Annotated[int, typer.Option("--block-size", min=1, help="tokens per hash_ids block "
                                            "(Mooncake: 512)")] = 512,
    name: Annotated[str | None, typer.Option("--name", help="corpus name (default: --out's directory name)")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="new corpus directory (default: corpora/NAME)")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="seed of every block's token ids")] = 0,
    vocab_size: Annotated[int | None, typer.Option("--vocab-size", min=2, help="draw ids from the server's "
                                                   "vocabulary (default: ids 1000-29999)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
    max_bytes: Annotated[int, typer.Option("--max-bytes", min=1, help="largest trace file read (bytes)")
                         ] = DEFAULT_MAX_BYTES,
    max_lines: Annotated[int, typer.Option("--max-lines", min=1, help="most requests (non-blank lines)")
                         ] = DEFAULT_MAX_LINES,
    max_total_tokens: Annotated[int, typer.Option("--max-total-tokens", min=1, help="most prompt tokens of all "
                                                  "lines (input_length summed)")] = DEFAULT_MAX_TOTAL_TOKENS,
    max_blocks: Annotated[int, typer.Option("--max-blocks", min=0, help="most blocks all lines name (hash_ids "
                                            "entries summed)")] = DEFAULT_MAX_BLOCKS,
) -> None:
    """Freeze a Mooncake trace into token IDs whose prompts share prefixes exactly where its hash_ids say
    (one case per line; output_length is the case's output length); replay it with a trace-replay spec.

    Example: dsv4h corpus import-trace tests/fixtures/traces/mooncake-small.jsonl --block-size 512 --name mc-small
    """
    from harness.inputs.corpus.trace_import import import_trace
    from harness.inputs.trace import TraceLimits

    if out is None and name is None:
        raise SpecError("give --name or --out", hint="e.g. --name mc-small writes corpora/mc-small")
    target = out if out is not None else Path("corpora") / str(name)
    c = import_trace(source, target, block_size=block_size, seed=seed, vocab_size=vocab_size, name=name,
                     overwrite=force, limits=TraceLimits(max_bytes, max_lines, max_total_tokens, max_blocks))
    console.print(f"imported {c.name}: {len(c)} cases, manifest {c.manifest_sha256[:16]} ({target})")
