"""Render a report from its snapshot bytes only (edge module: writes the report directory).

:func:`render_report` parses the snapshot (``results.json`` written by the build), draws the
figures (:mod:`harness.report.figures`), and fills the jinja2 templates of
``reports/templates/`` into a self-contained HTML file (figures inlined as base64 PNG data URIs,
inline CSS, a content-security policy that forbids any external resource), a Markdown file, and
with ``latex=True`` a LaTeX file of tables. Figures are also written as PNG, SVG and PDF under
``figures/``. Each kind's section is its template partial ``reports/templates/kinds/<kind>.<format>.j2``,
which the main templates include for every kind of :data:`harness.kinds.KINDS` in order (a kind without
one shows none), over its view (:func:`kind_context`).

Output is deterministic: the same snapshot bytes give the same files, apart from the build time,
which appears in exactly two lines of ``report.html`` (a ``<meta name="dsv4h-build-time">`` and the
footer line) and one line of ``report.md`` (see :func:`normalize_build_time`).
"""

from __future__ import annotations

import base64
import hashlib
import math
import multiprocessing
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness.errors import ArchiveError, SpecError
from harness.kinds import KINDS, resolve
from harness.report import figures as figs
from harness.report.kind_views import entries_view, labelled
from harness.report.snapshot import load_snapshot
from harness.report.summary import (
    count_noun,
    describe,
    invalid_mark,
    slo_text,
    summary_card,
    verdict_text,
)
from harness.report.timeline_figure import timeline_stem
from harness.report.timelines import MAX_TIMELINES
from harness.report.views import corpus_ranges, energy_view, historical_table, oracle_when

REPORT_HTML = "report.html"
REPORT_MD = "report.md"
REPORT_TEX = "tables.tex"
SNAPSHOT_NAME = "results.json"
FIGURES_DIR = "figures"
_MANAGED = (REPORT_HTML, REPORT_MD, REPORT_TEX, SNAPSHOT_NAME)

_BUILD_TIME_RES = (
    re.compile(r'(<meta name="dsv4h-build-time" content=")[^"]*(")'),
    re.compile(r"(Built at )\S+()"),
)

# The page's only script: marks the document when every figure has loaded and records the page's height
# in CSS pixels (browser tests read both).
PAGE_SCRIPT = (
    "window.addEventListener('load',function(){"
    "var imgs=Array.prototype.slice.call(document.images);"
    "var ok=imgs.filter(function(i){return i.complete&&i.naturalWidth>0;}).length;"
    "var root=document.documentElement;"
    "root.setAttribute('data-figures-total',String(imgs.length));"
    "root.setAttribute('data-figures-loaded',String(ok));"
    "root.setAttribute('data-page-height',String(root.scrollHeight));"
    "if(ok!==imgs.length){console.error('dsv4h-report: '+(imgs.length-ok)+' figure(s) failed to load');}"
    "});"
)


def normalize_build_time(text: str) -> str:
    """``text`` with the recorded build time replaced by ``BUILD-TIME`` (for comparing builds)."""
    for rx in _BUILD_TIME_RES:
        text = rx.sub(r"\1BUILD-TIME\2", text)
    return text


def default_templates_dir() -> Path:
    """``reports/templates`` of the source tree this package lives in."""
    return Path(__file__).resolve().parents[2] / "reports" / "templates"


# ---------------------------------------------------------------------------------------------
# Formatting (pure)


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))


def fmt_rate(v: Any, digits: int = 2) -> str:
    """A rate with fixed decimals and no thousands separator (as the report's tables); an em dash
    for a missing value."""
    return f"{float(v):.{digits}f}" if _finite(v) else "—"


def fmt_pct(v: Any, digits: int = 3) -> str:
    """A signed percentage (``+10.769%``); an em dash when missing."""
    return f"{float(v):+.{digits}f}%" if _finite(v) else "—"


def fmt_plain(v: Any) -> str:
    """A number as stored (shortest round-trip form: ``74.5``, ``10413.87``); an em dash when missing.
    Used for historical values, which keep their published precision."""
    if not _finite(v):
        return "—"
    f = float(v)
    return str(int(f)) if f.is_integer() and abs(f) < 1e15 else repr(f)


def fmt_share(v: Any, digits: int = 1) -> str:
    """A fraction in [0, 1] as an unsigned percentage (``0.5`` -> ``50.0%``); an em dash when missing."""
    return f"{float(v) * 100:.{digits}f}%" if _finite(v) else "—"


def fmt_bytes(v: Any) -> str:
    """Bytes as GiB with two decimals."""
    return f"{float(v) / (1 << 30):.2f} GiB" if _finite(v) else "—"


def tex_escape(v: Any) -> Markup:
    """Escape LaTeX special characters in text (the result is marked as already escaped)."""
    if isinstance(v, Markup):
        return v
    s = str(v).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    repl = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
            "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "—": "---",
            "–": "--", "≥": r"$\geq$", "→": r"$\rightarrow$", "<": r"\textless{}", ">": r"\textgreater{}"}
    return Markup("".join(repl.get(ch, ch) for ch in s))


_MD_SPECIAL = re.compile(r"([\\`*_\[\]()<>|!~&#])")


def md_escape(v: Any) -> Markup:
    """Escape a user string for Markdown: every character that could start markup (emphasis, code,
    links, images, raw HTML, table cells) is backslash-escaped, quotes become entities (safe inside
    the report's raw ``<a id="...">`` anchors too) and line breaks become spaces."""
    if isinstance(v, Markup):
        return v
    s = str(v).replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    s = _MD_SPECIAL.sub(r"\\\1", s).replace('"', "&quot;").replace("'", "&#39;")
    return Markup(s)


def md_code(v: Any) -> Markup:
    """A Markdown code span holding ``v`` literally (fenced by more backticks than it contains)."""
    s = str(v).replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return Markup(f"{fence}{pad}{s}{pad}{fence}")


def anchor(v: Any) -> Markup:
    """An id usable in a link target or an ``id`` attribute: letters, digits, ``-`` and ``_`` only."""
    return Markup(re.sub(r"[^0-9A-Za-z_-]", "", str(v)))


@jinja2.pass_context
def _finalize(ctx: jinja2.runtime.Context, value: Any) -> Any:
    """Every ``{{ value }}`` of the Markdown and LaTeX templates is escaped unless a report filter
    already made it safe (HTML templates are autoescaped by jinja2)."""
    name = ctx.name or ""
    if name.endswith(".md.j2"):
        return md_escape(value) if value is not None else value
    if name.endswith(".tex.j2"):
        return tex_escape(value) if value is not None else value
    return value


# ---------------------------------------------------------------------------------------------
# View model (pure)


def view_model(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the templates need, derived from the snapshot alone (pure)."""
    findings = list(snapshot.get("findings") or [])
    by_archive: dict[str, list[Mapping[str, Any]]] = {}
    for f in findings:
        by_archive.setdefault(str(f["archive_id"]), []).append(f)
    archives = [labelled(a) for a in snapshot.get("archives") or []]
    counts = {a["archive_id"]: {s: sum(1 for f in by_archive.get(a["archive_id"], []) if f["severity"] == s)
                                for s in ("blocking", "warning", "info")} for a in archives}
    memory = [{**e, "figure": f"memory-{e['archive_id']}"} for e in snapshot.get("memory") or []]
    services_by: dict[str, list[Mapping[str, Any]]] = {}
    for s in snapshot.get("services") or []:
        services_by.setdefault(str(s["archive_id"]), []).append(s)
    claims = sorted({str(a.get("claim_class")) for a in archives})
    return {
        "s": snapshot,
        "archives": archives,
        "archive_by_id": {a["archive_id"]: a for a in archives},
        "finding_counts": counts,
        "memory": memory,
        "timelines": [{**e, "figure": timeline_stem(e)} for e in snapshot.get("timelines") or []],
        "timelines_omitted": int(snapshot.get("timelines_omitted") or 0),
        "timelines_max": MAX_TIMELINES,
        "energy": energy_view(snapshot),
        "summary": summary_card(snapshot),
        "description": describe(snapshot),
        "historical": list(snapshot.get("historical") or []),
        "historical_table": historical_table(list(snapshot.get("historical") or [])),
        "historical_present": bool(snapshot.get("historical_present")),
        "findings": findings,
        "findings_source": snapshot.get("findings_source"),
        "services_by_archive": services_by,
        "services": list(snapshot.get("services") or []),
        "corpora": list(snapshot.get("corpora") or []),
        "oracles": list(snapshot.get("oracles") or []),
        "claim_classes": claims,
        "has_simulated": bool(snapshot.get("has_simulated")),
        "limits": snapshot.get("limits") or {},
        "report_kinds": list(KINDS),
    } | kind_context(snapshot, by_archive)


def kind_context(snapshot: Mapping[str, Any], by_archive: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Each kind's view (``KindInfo.report_view``, else :func:`harness.report.kind_views.entries_view` of
    its section for a kind with a snapshot entry), under the first part of its ``report_section``; a
    kind with neither (its archives are only listed) has none. Kinds sharing a section share one view."""
    out: dict[str, Any] = {}
    for k in KINDS.values():
        key = k.report_section.partition(".")[0]
        if k.report_view is not None:
            out[key] = resolve(k.report_view)(snapshot, by_archive)
        elif k.report is not None:
            out[key] = entries_view(k.report_section)(snapshot, by_archive)
    return out


# ---------------------------------------------------------------------------------------------
# Jinja environment


def _html_num(text: Any, archive_id: str, cls: str = "") -> Markup:
    klass = "num" + (f" {cls}" if cls else "")
    return Markup('<a class="{}" href="#archive-{}" title="from archive {}">{}</a>').format(
        klass, archive_id, archive_id, text)


def _md_num(text: Any, archive_id: str) -> Markup:
    return Markup(f"[{md_escape(text)}](#archive-{anchor(archive_id)})")


def _tex_num(text: Any, archive_id: str) -> Markup:
    return Markup(f"\\hyperlink{{archive-{anchor(archive_id)}}}{{{tex_escape(text)}}}")


def make_env(templates_dir: Path) -> jinja2.Environment:
    """The jinja2 environment: strict undefined, HTML autoescape for ``*.html.j2``, report filters."""
    if not (templates_dir / "report.html.j2").is_file():
        raise SpecError(f"report templates not found in {templates_dir}",
                        hint="run from the dsv4h source tree or pass the templates directory")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        autoescape=lambda name: bool(name and name.endswith(".html.j2")),
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update({
        "rate": fmt_rate, "pct": fmt_pct, "share": fmt_share, "plain": fmt_plain, "gib": fmt_bytes, "tex": tex_escape,
        "md": md_escape,
        "mdcode": md_code, "anchor": anchor, "hnum": _html_num, "mdnum": _md_num, "texnum": _tex_num,
        "oracle_when": oracle_when, "corpus_ranges": corpus_ranges, "slo": slo_text, "count": count_noun,
        "invalid": invalid_mark, "verdict": verdict_text,
    })
    return env


# ---------------------------------------------------------------------------------------------
# Rendering (writes files)


@dataclass(frozen=True)
class RenderedReport:
    """What a render wrote: the directory, files relative to it, and the snapshot's SHA-256."""

    out_dir: Path
    files: tuple[str, ...]
    snapshot_sha256: str
    figures: tuple[str, ...]

    @property
    def html(self) -> Path:
        """The self-contained HTML report."""
        return self.out_dir / REPORT_HTML


def prepare_out_dir(out_dir: Path) -> None:
    """Create ``out_dir`` or clear the files an earlier report build left there. Refuses (raises
    ``ArchiveError``) a non-empty directory that does not hold a report, so nothing else is lost."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ArchiveError(f"{out_dir} exists and is not a directory", hint="choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = {p.name for p in out_dir.iterdir()}
    if entries and not entries & {REPORT_HTML, SNAPSHOT_NAME}:
        raise ArchiveError(f"{out_dir} is not empty and holds no earlier report; refusing to write into it",
                           hint="choose an empty or new --out directory")
    for name in _MANAGED:
        if (out_dir / name).is_file():
            (out_dir / name).unlink()
    if (out_dir / FIGURES_DIR).is_dir():
        shutil.rmtree(out_dir / FIGURES_DIR)


@dataclass(frozen=True)
class DrawnFigure:
    """A rendered figure: stem, caption, alt text and bytes per format."""

    stem: str
    caption: str
    alt: str
    data: dict[str, bytes]


def _draw(job: tuple[str, Any]) -> DrawnFigure | None:
    fr = figs.build_figure(*job)
    if fr is None:
        return None
    data = figs.render_figure(fr)
    fr.fig.clear()
    return DrawnFigure(fr.stem, fr.caption, fr.alt, data)


def draw_figures(figure_jobs: Sequence[tuple[str, Any]], *, jobs: int | None = None) -> list[DrawnFigure]:
    """Draw and render every figure job, in order. ``jobs`` worker processes (default: one per CPU,
    at most 8, when there are at least 4 figures and ``fork`` is available); the bytes do not depend
    on the number of workers."""
    n = len(figure_jobs)
    if jobs is None:
        jobs = min(os.cpu_count() or 1, 8, n) if n >= 4 else 1
    if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            drawn = list(pool.map(_draw, figure_jobs))
    else:
        drawn = [_draw(j) for j in figure_jobs]
    return [d for d in drawn if d is not None]


def render_report(snapshot_data: bytes, out_dir: Path, *, build_time: str, latex: bool = False,
                  templates_dir: Path | None = None, source: str = SNAPSHOT_NAME,
                  jobs: int | None = None) -> RenderedReport:
    """Write the report for ``snapshot_data`` (the bytes of a snapshot file) into ``out_dir``:
    ``results.json`` (those same bytes), ``report.html``, ``report.md``, optionally ``tables.tex``,
    and ``figures/<stem>.{png,svg,pdf}``. ``build_time`` (ISO 8601, UTC) is the only value not taken
    from the snapshot. ``jobs``: figure worker processes (see :func:`draw_figures`). Raises
    ``SpecError`` for an unreadable snapshot or missing templates."""
    snapshot = load_snapshot(snapshot_data, source)
    env = make_env(templates_dir or default_templates_dir())
    sha = hashlib.sha256(snapshot_data).hexdigest()
    vm = view_model(snapshot)
    prepare_out_dir(out_dir)
    drawn = draw_figures(figs.figure_jobs(snapshot), jobs=jobs)
    (out_dir / FIGURES_DIR).mkdir()
    written: list[str] = []
    figures: dict[str, dict[str, Any]] = {}
    for fg in drawn:
        files = []
        for fmt, blob in fg.data.items():
            rel = f"{FIGURES_DIR}/{fg.stem}.{fmt}"
            (out_dir / rel).write_bytes(blob)
            files.append(rel)
        written += files
        figures[fg.stem] = {"stem": fg.stem, "caption": fg.caption, "alt": fg.alt, "files": files,
                            "png_b64": base64.b64encode(fg.data["png"]).decode("ascii")}
    script_hash = base64.b64encode(hashlib.sha256(PAGE_SCRIPT.encode()).digest()).decode()
    ctx = vm | {"figures": figures, "build_time": build_time, "snapshot_sha256": sha,
                "page_script": Markup(PAGE_SCRIPT), "script_hash": script_hash}
    (out_dir / SNAPSHOT_NAME).write_bytes(snapshot_data)
    outputs = [(REPORT_HTML, "report.html.j2"), (REPORT_MD, "report.md.j2")]
    if latex:
        outputs.append((REPORT_TEX, "tables.tex.j2"))
    for name, tpl in outputs:
        text = env.get_template(tpl).render(ctx)
        (out_dir / name).write_text(text, encoding="utf-8")
    written = [SNAPSHOT_NAME] + [n for n, _ in outputs] + written
    return RenderedReport(out_dir, tuple(written), sha, tuple(figures))
