"""Live progress display of a campaign run (rich)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness.cli.render import fmt

_STATUS_STYLE = {"ok": "green", "failed": "bold red", "short": "yellow"}


def round_line(d: dict[str, Any]) -> Text:
    """The line printed when a round ends: label, rate and its status in brackets (built as
    ``Text``, so ``[ok]`` is shown literally instead of being read as console markup), plus the
    reason of a failed round."""
    c = d["cell"]
    line = Text(f"  {c.label:<12} round {d['round'] + 1}: {fmt(d['rate'])} tok/s ")
    line.append(f"[{d['status']}]", style=_STATUS_STYLE.get(str(d["status"]), ""))
    if d.get("error"):
        line.append(f" {d['error']}")
    return line


class LiveReporter:
    """A ``pipeline.Reporter`` that shows the current cell, round, waves, accumulated resident
    seconds and current rates, plus a line per finished round."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = Live(console=console, refresh_per_second=4, transient=True)
        self.state: dict[str, Any] = {}
        self.t0 = time.monotonic()
        self.n_cells = 0

    def __enter__(self) -> LiveReporter:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def _render(self) -> Group:
        s = self.state
        t = Table.grid(padding=(0, 2))
        t.add_row("elapsed", f"{time.monotonic() - self.t0:,.0f} s")
        if "cell" in s:
            t.add_row("cell", f"{s['cell_index'] + 1}/{self.n_cells}  {s['cell']}")
            t.add_row("round", str(s.get("round", "warmup")))
            t.add_row("waves", str(s.get("waves", 0)))
            t.add_row("resident s", fmt(s.get("resident_s", 0.0), 1))
            t.add_row("round rate", fmt(s.get("rate", float("nan"))) + " tok/s")
            t.add_row("HTTP rate", fmt(s.get("http", float("nan"))) + " tok/s")
        return Group(Text("dsv4h campaign", style="bold"), t)

    def __call__(self, kind: str, **d: Any) -> None:
        if kind == "plan":
            self.n_cells = len(d["plan"].cells)
            est = d["plan"].estimate_s
            self.console.print(f"plan {d['plan'].plan_id}: {self.n_cells} cells"
                               + (f", estimated {est / 60:.1f} min" if est else ""))
        elif kind == "service-starting":
            self.console.print(f"starting service '{d['profile'].name}' (backend {d['profile'].backend}) …")
        elif kind == "service-ready":
            svc = d["service"]
            pid = f", pid {svc.process.pid}" if svc.process else " (attached, not owned)"
            self.console.print(f"service ready at {svc.url}{pid}")
        elif kind == "service-stopped":
            svc = d.get("service")
            where = f" at {svc.url}" if svc is not None else ""
            self.console.print(f"detached from the service{where} (not owned, left running)" if d.get("detached")
                               else "service stopped")
        elif kind == "cell-start":
            c = d["cell"]
            self.state = {"cell": f"{c.label} ({c.cell_id})", "cell_index": c.index, "waves": 0}
        elif kind == "cell-skipped":
            self.console.print(f"[dim]{d['cell'].label}: already complete in the resumed archive[/]")
        elif kind == "warmup-done":
            self.state["round"] = f"warmup wave {d['wave'] + 1}"
        elif kind == "wave-done":
            self.state.update(round=f"{d['round'] + 1}" + (f" (attempt {d['attempt']})" if d["attempt"] else ""),
                              waves=d["wave"] + 1, resident_s=d["resident_s"], rate=d["round_rate"],
                              http=d["http_rate"])
        elif kind == "round-done":
            self.console.print(round_line(d))
        self.live.update(self._render())
