"""Check a built SGLang argv against the flags the installed SGLang accepts.

Two ways to learn the accepted flags, both giving a ``FlagSet`` (version + flags + where from):

* live (serving hosts): run ``PYTHON -m sglang.launch_server --help`` with a timeout and parse the
  option lines (``flags_from_help``); the version comes from ``importlib.metadata`` in the same
  interpreter. Importing SGLang needs its dependencies (torch among them) but no GPU.
* static (fallback, CI): parse the package's source with ``ast`` (``flags_from_source``): the
  ``A[T, "help"]`` / ``A[T, Arg(...)]`` fields of ``srt/server_args.py`` and
  ``srt/arg_groups/fields/*.py`` (``--field-name``, or ``cli_name``/``aliases``; ``no_cli=True`` is
  skipped; ``BooleanOptionalAction`` adds ``--no-...``) plus every ``add_argument("--...")``
  string. This mirrors ``sglang.srt.arg_groups.arg_utils.add_cli_args_from_dataclass`` of 0.5.x
  and also sees options hidden from ``--help`` (``help=argparse.SUPPRESS``).

``validate_argv`` raises ``SpecError`` naming every flag of the argv the installed version does not
know. Matching is exact: argparse would also accept unambiguous prefixes, dsv4h does not.
Parsing functions are pure; ``flags_from_help``/``installed_version`` run the injectable ``runner``.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ServiceError, SpecError

HELP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class RunResult:
    """What a runner returns: exit status and captured output."""

    returncode: int
    stdout: str
    stderr: str


Runner = Callable[[Sequence[str], float], RunResult]


def subprocess_runner(argv: Sequence[str], timeout_s: float) -> RunResult:
    """Run ``argv`` with captured text output; ``ServiceError`` on timeout or a missing interpreter."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=_help_env())
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"'{' '.join(argv)}' did not finish within {timeout_s:.0f} s",
                           hint="the interpreter may be importing a broken SGLang; run the command by hand") from exc
    except OSError as exc:
        raise ServiceError(f"cannot run '{argv[0]}': {exc}",
                           hint="set 'python' in the profile to the interpreter that has SGLang") from exc
    return RunResult(proc.returncode, proc.stdout, proc.stderr)


def _help_env() -> dict[str, str]:
    env = dict(os.environ)
    env["COLUMNS"] = "200"  # argparse never wraps option lines, but keep the help stable anyway
    return env


@dataclass(frozen=True)
class FlagSet:
    """The flags one SGLang version accepts, and where that knowledge came from."""

    version: str
    flags: frozenset[str]
    source: str

    def unknown(self, argv: Sequence[str]) -> list[str]:
        """Flags of ``argv`` (see ``argv_flags``) that this version does not accept, in argv order."""
        return [f for f in argv_flags(argv) if f not in self.flags]


_OPTION_LINE = re.compile(r"^  (-\S.*)$")


def parse_help_flags(text: str) -> frozenset[str]:
    """The option strings of an argparse ``--help`` text (pure).

    Option lines are indented by exactly two spaces and start with ``-``; the invocation ends at the
    first run of two spaces (the help column) and lists aliases separated by ``", "``
    (``--tp-size TP_SIZE, --tensor-parallel-size TP_SIZE``). Description lines are indented deeper,
    so flags mentioned in prose are not picked up.
    """
    flags: set[str] = set()
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if not m:
            continue
        invocation = re.split(r"\s{2,}", m.group(1))[0]
        for part in invocation.split(", "):
            token = part.split(" ", 1)[0]
            if token.startswith("-"):
                flags.add(token)
    return frozenset(flags)


_FLAG = re.compile(r"^--?[A-Za-z][A-Za-z0-9_-]*$")


def argv_flags(argv: Sequence[str]) -> list[str]:
    """The option strings used in a server argv (``--x=v`` counts as ``--x``), in order.

    Only the part after ``sglang.launch_server`` (or ``serve`` of the ``sglang`` script) is read,
    so a ``numactl`` prefix and the interpreter's own options are ignored; values such as ``-1``
    are not flags.
    """
    args = list(argv)
    for i, a in enumerate(args):
        if a == "sglang.launch_server" or (a == "serve" and i > 0 and args[i - 1].endswith("sglang")):
            args = args[i + 1:]
            break
    out = []
    for a in args:
        name = a.split("=", 1)[0]
        if _FLAG.match(name):
            out.append(name)
    return out


def validate_argv(argv: Sequence[str], flagset: FlagSet) -> None:
    """Raise ``SpecError`` naming each flag of ``argv`` that ``flagset`` does not accept."""
    unknown = flagset.unknown(argv)
    if not unknown:
        return
    import difflib

    parts = []
    for flag in dict.fromkeys(unknown):
        close = difflib.get_close_matches(flag, sorted(flagset.flags), n=1)
        parts.append(f"{flag} (did you mean {close[0]}?)" if close else flag)
    raise SpecError(
        f"SGLang {flagset.version} does not accept {len(parts)} flag(s) of the launch command: "
        f"{', '.join(parts)} [flags from {flagset.source}]",
        hint="flags drift between SGLang releases: fix the profile (or extra_args) for this version, or "
        "install the version dsv4h is pinned to",
    )


def installed_version(python: str, *, runner: Runner = subprocess_runner,
                      timeout_s: float = 60.0) -> str:
    """``importlib.metadata.version('sglang')`` as seen by ``python``; ``ServiceError`` if absent."""
    res = runner([python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"], timeout_s)
    version = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
    if res.returncode != 0 or not version:
        raise ServiceError(f"SGLang is not installed for {python}: {res.stderr.strip()[-300:]}",
                           hint="install sglang into that interpreter, or set 'launch.python' in the profile")
    return version


def flags_from_help(python: str, *, runner: Runner = subprocess_runner,
                    timeout_s: float = HELP_TIMEOUT_S) -> FlagSet:
    """Run ``python -m sglang.launch_server --help`` and parse its flags (the live path)."""
    version = installed_version(python, runner=runner, timeout_s=timeout_s)
    argv = [python, "-m", "sglang.launch_server", "--help"]
    res = runner(argv, timeout_s)
    flags = parse_help_flags(res.stdout)
    if res.returncode != 0 or "--model-path" not in flags:
        tail = (res.stderr or res.stdout).strip()[-600:]
        raise ServiceError(f"'{' '.join(argv)}' failed (exit {res.returncode}): {tail}",
                           hint="fix the SGLang install, or validate statically with the source tree")
    return FlagSet(version, flags, f"live '{python} -m sglang.launch_server --help'")


# --- static path -------------------------------------------------------------------------------


def _field_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _str_list(node: ast.expr) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _is_bool_optional(node: ast.expr | None) -> bool:
    return node is not None and ast.unparse(node).endswith("BooleanOptionalAction")


def _annotated_field_flags(stmt: ast.AnnAssign) -> list[str]:
    ann = stmt.annotation
    if not (isinstance(stmt.target, ast.Name) and isinstance(ann, ast.Subscript)
            and isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated")):
        return []
    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    meta: ast.expr | None = None
    for e in elts[1:]:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "Arg":
            meta = e
            break
        if isinstance(e, (ast.Constant, ast.JoinedStr, ast.BinOp)):
            meta = e
            break
    if meta is None:
        return []  # no Arg/help metadata: add_cli_args_from_dataclass skips the field
    names = [_field_flag(stmt.target.id)]
    bool_optional = False
    if isinstance(meta, ast.Call):
        kw = {k.arg: k.value for k in meta.keywords if k.arg}
        no_cli = kw.get("no_cli")
        if isinstance(no_cli, ast.Constant) and no_cli.value is True:
            return []
        cli_name = kw.get("cli_name")
        if isinstance(cli_name, ast.Constant) and isinstance(cli_name.value, str):
            names = [cli_name.value]
        if "aliases" in kw:
            names += _str_list(kw["aliases"])
        bool_optional = _is_bool_optional(kw.get("action"))
    return _with_negations(names, bool_optional)


def _with_negations(names: Iterable[str], bool_optional: bool) -> list[str]:
    out = []
    for n in names:
        out.append(n)
        if bool_optional and n.startswith("--"):
            out.append("--no-" + n[2:])
    return out


def _add_argument_flags(call: ast.Call) -> list[str]:
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
             and a.value.startswith("-")]
    action = next((k.value for k in call.keywords if k.arg == "action"), None)
    return _with_negations(names, _is_bool_optional(action))


def parse_source_flags(sources: Iterable[str]) -> frozenset[str]:
    """Flags declared by SGLang server-argument source files (pure; see the module doc)."""
    flags: set[str] = {"-h", "--help"}
    for text in sources:
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign):
                        flags.update(_annotated_field_flags(stmt))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "add_argument"):
                flags.update(_add_argument_flags(node))
    return frozenset(flags)


def source_files(package_dir: Path) -> list[Path]:
    """The files ``flags_from_source`` reads under an ``sglang/`` package directory."""
    srt = package_dir / "srt"
    return [srt / "server_args.py", *sorted((srt / "arg_groups" / "fields").glob("*.py"))]


def flags_from_source(target: Path) -> FlagSet:
    """Static flags of the SGLang tree at ``target`` (site-packages, ``sglang/`` or a checkout)."""
    from harness.patches.series import locate_package

    tree = locate_package(target, "sglang")
    files = [f for f in source_files(tree.package_dir) if f.is_file()]
    if not files or files[0].name != "server_args.py":
        raise ServiceError(f"{tree.package_dir}/srt/server_args.py not found",
                           hint="pass the root of an SGLang install or checkout")
    flags = parse_source_flags(f.read_text(encoding="utf-8") for f in files)
    return FlagSet(tree.version or "unknown", flags, f"static parse of {tree.package_dir}/srt")


def load_flagset(*, python: str | None = None, source: Path | None = None,
                 runner: Runner = subprocess_runner, timeout_s: float = HELP_TIMEOUT_S) -> FlagSet:
    """Live ``--help`` of ``python`` when given; the static source path when it fails or when only
    ``source`` is given. Raises the live error when there is no source to fall back on."""
    if python is not None:
        try:
            return flags_from_help(python, runner=runner, timeout_s=timeout_s)
        except ServiceError:
            if source is None:
                raise
    if source is None:
        raise SpecError("no way to learn SGLang's flags", hint="give an interpreter or a source tree")
    return flags_from_source(source)
