"""``dsv4h replay plan|run``: trace replays (protocol class trace-replay; docs/replay.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import WorkspaceOpt, console, esc, resolve_workspace, startup_reap
from harness.cli.listing import ms, num
from harness.cli.outcome import end_run, print_findings
from harness.cli.render import sim_label
from harness.errors import SpecError
from harness.inputs.corpus import load_corpus
from harness.inputs.spec import LoadedSpec, ReplaySpec, load_spec
from harness.run.events import silent
from harness.run.kinds import RunOptions, run_loaded
from harness.run.replay import ReplayOutcome, make_replay_plan

app = typer.Typer(help="Trace replays: a Mooncake trace's requests at its timestamps / speed, prefix hits checked.\n\n"
                  "Example: dsv4h replay run campaigns/replay-demo.yaml -w ws", no_args_is_help=True)


def _replay_spec(loaded: LoadedSpec) -> ReplaySpec:
    if not isinstance(loaded.spec, ReplaySpec):
        raise SpecError(f"{loaded.source}: kind '{loaded.kind}' is not a trace replay",
                        hint="give a spec of kind trace-replay (docs/replay.md)")
    return loaded.spec


@app.command("plan")
def plan_cmd(spec: Annotated[Path, typer.Argument(help="trace-replay YAML file")]) -> None:
    """Print what a replay would send (requests, span, implied prefix hits); run nothing.

    Example: dsv4h replay plan campaigns/replay-demo.yaml
    """
    loaded = load_spec(spec)
    s = _replay_spec(loaded)
    corpus = load_corpus(loaded.paths.corpora["replay"])
    plan = make_replay_plan(s, corpus, loaded.paths.corpora["trace"])
    prompt = sum(c.n_tokens for c in corpus.cases)
    exp = sum(plan.expected_cached)
    span = plan.offsets_s[-1] if plan.offsets_s else 0.0
    console.print(f"plan id {plan.plan_id}: {len(plan.case_ids)} requests over {span:.3f} s (speed {s.speed:g}), "
                  f"{prompt} prompt tokens, {exp} implied cached ({exp / prompt:.1%}), blocks of "
                  f"{plan.block_size} tokens; protocol class trace-replay")


def replay_line(r: Mapping[str, Any]) -> str:
    """The replay's console line: throughput, latency, schedule and prefix hits."""
    rep = r.get("reported_cached_tokens")
    return (f"{r['n_ok']}/{r['n_requests']} ok; output {num(r.get('output_throughput_tok_s'))} tok/s; "
            f"TTFT p50 {ms(r.get('ttft_p50_s'))} ms; lateness max {ms(r.get('client_lateness_max_s'))} ms "
            f"(schedule {'kept' if r.get('schedule_kept') else 'NOT kept'}); cached tokens expected "
            f"{r['expected_cached_tokens']} ({num(r.get('expected_hit_ratio'), 3)}), reported "
            f"{'none' if rep is None else rep} ({num(r.get('reported_hit_ratio'), 3)}): "
            f"{'agree' if r.get('cached_agree') else 'DISAGREE'}")


def run_replay_loaded_cli(loaded: LoadedSpec, ws: Path, *, percentiles: Sequence[float] | None = None,
        options: RunOptions | None = None) -> None:
    """Run a loaded trace-replay spec into ``ws`` through the kind registry and print its outcome
    (after the startup recovery). Raises the run's error after the archive is finalized."""
    _replay_spec(loaded)
    startup_reap(ws)
    out = run_loaded(loaded, ws, silent)
    assert isinstance(out, ReplayOutcome)
    archive = out.finished.archive
    console.print(f"[bold]{esc(archive.run.campaign)}: trace replay[/]{sim_label(archive.run.simulated)}")
    if out.row is not None:
        console.print(replay_line(out.row))
    print_findings(out.finished.findings, all_severities=True)
    console.print(f"archive {archive.archive_id} ({archive.status})")
    end_run(out.finished.verdict, error=out.error, status=archive.status, archive_id=archive.archive_id)


@app.command("run")
def run_cmd(spec: Annotated[Path, typer.Argument(help="trace-replay YAML file")],
            workspace: WorkspaceOpt = Path()) -> None:
    """Replay a trace into a hashed archive and the ledgers (replay_runs); print throughput, lateness
    and expected vs reported prefix-cache hits.

    Example: dsv4h replay run campaigns/replay-demo.yaml -w ws
    """
    run_replay_loaded_cli(load_spec(spec), resolve_workspace(workspace))
