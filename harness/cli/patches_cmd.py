"""``dsv4h patches status|apply|revert|describe``: model patches on an SGLang tree (thin over the library)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from harness.cli.common import console
from harness.errors import PatchError
from harness.patches.series import ChangeResult, Series, SeriesStatus, describe_diff, load_series

app = typer.Typer(
    help="Model patches (model_patches/series.yaml) on an installed SGLang tree: status, apply, revert. "
    "Apply is idempotent and all-or-nothing; a tree that differs from the series' base is refused.\n\n"
    "Example: dsv4h patches apply --target $(python -c 'import sglang, os; "
    "print(os.path.dirname(sglang.__path__[0]))')",
    no_args_is_help=True,
)

DEFAULT_SERIES = Path("model_patches/series.yaml")

TargetOpt = Annotated[Path, typer.Option(
    "--target", help="site-packages directory holding sglang/, the sglang/ directory itself, or a source "
    "checkout")]
SeriesOpt = Annotated[Path, typer.Option("--series", help="series file")]


def _load(series: Path) -> Series:
    if not series.is_file():
        raise PatchError(f"series file {series} not found",
                         hint="run from the dsv4h checkout or pass --series model_patches/series.yaml")
    return load_series(series)


def _print_status(series: Series, st: SeriesStatus) -> None:
    t = st.tree
    console.print(f"target {t.package_dir} ({t.layout}, {t.package} {t.version or 'version unknown'})",
                  highlight=False)
    console.print(f"series {series.spec.name} ({series.path}, sha256 {series.sha256[:16]}) targets "
                  f"{t.package} {st.version_expected}", highlight=False)
    if not st.version_matches:
        console.print(f"[yellow]warning:[/] the tree is {t.package} {t.version}, the series targets "
                      f"{st.version_expected}", highlight=False)
    table = Table(title=f"patches: {st.overall}", title_justify="left")
    for col in ("patch", "status", "default", "enabled by", "files"):
        table.add_column(col)
    specs = {p.spec.id: p.spec for p in series.patches}
    for p in st.patches:
        spec = specs[p.id]
        enable = spec.enable
        switch = " / ".join(x for x in ((enable.env if enable else None), (enable.flag if enable else None)) if x)
        color = {"applied": "green", "unapplied": "white", "partial": "red", "modified": "red"}[p.status]
        table.add_row(p.id, f"[{color}]{p.status}[/]", "off" if spec.default_off else "on", switch or "-",
                      "\n".join(f"{path} ({state})" for path, state in p.files.items()))
    console.print(table)
    for f in st.files:
        if f.position is None:
            console.print(f"[red]modified:[/] {f.path} sha256 {f.current or 'absent'}", highlight=False)


def _print_change(res: ChangeResult) -> None:
    if not res.changed:
        what = "already applied" if res.action == "apply" else "nothing applied"
        console.print(f"{what}: no file was written", highlight=False)
        return
    verb = "applied" if res.action == "apply" else "reverted"
    console.print(f"{verb} {', '.join(res.patches)}", highlight=False)
    for path, (before, after) in sorted(res.files.items()):
        console.print(f"  {path}: {(before or 'absent')[:16]} -> {(after or 'absent')[:16]}", highlight=False)
    if res.state_path:
        console.print(f"state file {res.state_path}", highlight=False)


@app.command("status")
def status_cmd(
    target: TargetOpt,
    series: SeriesOpt = DEFAULT_SERIES,
    expect: Annotated[str | None, typer.Option(
        "--expect", help="exit with an error unless the series is 'applied' or 'unapplied'")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the patch identity as JSON")] = False,
) -> None:
    """Show each patch as applied, unapplied, partial or modified (from file hashes; writes nothing).

    Example: dsv4h patches status --target .venv-sglang/lib/python3.11/site-packages --expect applied
    """
    from harness.patches.series import patch_identity, status

    s = _load(series)
    if as_json:
        typer.echo(json.dumps(patch_identity(s, target), indent=1))
        st = status(s, target)
    else:
        st = status(s, target)
        _print_status(s, st)
    if expect is not None:
        if expect not in ("applied", "unapplied"):
            raise PatchError(f"--expect {expect!r}", hint="use --expect applied or --expect unapplied")
        if st.overall != expect:
            raise PatchError(f"series {s.spec.name} is {st.overall} on {st.tree.package_dir}, expected {expect}",
                             hint=f"run 'dsv4h patches {'apply' if expect == 'applied' else 'revert'}'")


@app.command("apply")
def apply_cmd(target: TargetOpt, series: SeriesOpt = DEFAULT_SERIES) -> None:
    """Apply every unapplied patch, all or nothing; an applied series is left untouched.

    Example: dsv4h patches apply --target /opt/sglang/lib/python3.11/site-packages
    """
    from harness.patches.series import apply

    _print_change(apply(_load(series), target))


@app.command("revert")
def revert_cmd(target: TargetOpt, series: SeriesOpt = DEFAULT_SERIES) -> None:
    """Revert every applied patch, restoring the original bytes.

    Example: dsv4h patches revert --target /opt/sglang/lib/python3.11/site-packages
    """
    from harness.patches.series import revert

    _print_change(revert(_load(series), target))


@app.command("describe")
def describe_cmd(
    diff: Annotated[Path, typer.Argument(help="unified diff (paths sglang/...)")],
    target: TargetOpt,
) -> None:
    """Print the sha256 and per-file base/patched hashes of DIFF against a CLEAN tree, for the
    series entry of a new or changed patch (reads the tree, writes nothing).

    Example: dsv4h patches describe model_patches/sglang-0.5.23/0001-backend-witness.diff --target /tmp/sgl
    """
    typer.echo(json.dumps(describe_diff(diff.read_bytes(), target, source=str(diff)), indent=1))
