"""The one run skeleton (harness.run.skeleton.drive): how a body's end maps to status and error, that
clean-up, end events and finalize run in one critical section, and that finish refuses to run
outside one. Literal statuses and event lists; no service is started."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness import interrupts
from harness.errors import ArchiveError, DsvError, RunInterrupted, ServiceError
from harness.run.skeleton import drive, finish
from harness.store.archive import ArchiveWriter
from harness.store.runblock import RunBlock


@dataclass
class Out:
    status: str
    error: DsvError | None
    archive_id: str = "a-1"


@dataclass
class Trace:
    calls: list[str] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)


def _events(writer: ArchiveWriter) -> list[str]:
    lines = (writer.dir / "events.jsonl").read_text().splitlines()
    return [json.loads(x)["event"] for x in lines]


def _drive(writer: ArchiveWriter, body: object, t: Trace, **kw: object) -> Out:
    def clean_up() -> None:
        t.calls.append("clean_up")
        t.depths.append(interrupts.depth())

    def finalize(status: str, error: DsvError | None) -> Out:
        t.calls.append(f"finalize:{status}")
        t.depths.append(interrupts.depth())
        return Out(status, error)

    def after() -> None:
        t.calls.append("after")

    return drive(writer, body, kept="kept-so-far", what="run", clean_up=clean_up,  # type: ignore[arg-type]
                 finalize=finalize, after=after, **kw)  # type: ignore[arg-type]


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[ArchiveWriter]:
    interrupts.reset()
    w = ArchiveWriter(tmp_path, token="t-skeleton")
    yield w
    w.close()


def test_a_complete_body_ends_with_after_checks_then_one_section(writer: ArchiveWriter) -> None:
    t = Trace()
    out = _drive(writer, lambda: None, t)
    assert (out.status, out.error) == ("complete", None)
    assert t.calls == ["after", "clean_up", "finalize:complete"]
    assert t.depths == [1, 1]  # clean-up and finalize share one section, never nested
    assert _events(writer) == ["run-end"]
    assert interrupts.depth() == 0


def test_an_interrupt_is_partial_and_skips_the_after_checks(writer: ArchiveWriter) -> None:
    t = Trace()

    def body() -> None:
        raise KeyboardInterrupt

    out = _drive(writer, body, t)
    assert out.status == "partial" and isinstance(out.error, RunInterrupted)
    assert "kept-so-far" in out.error.message and out.error.exit_code == 130
    assert t.calls == ["clean_up", "finalize:partial"]
    assert _events(writer) == ["interrupted", "run-end"]


def test_a_dsv_error_fails_the_run_through_the_rewrite(writer: ArchiveWriter) -> None:
    t = Trace()

    def body() -> None:
        raise ServiceError("server died")

    def failed(exc: DsvError) -> DsvError:
        exc.message = "leg B1 failed: " + exc.message
        return exc

    out = _drive(writer, body, t, failed=failed)
    assert out.status == "failed" and out.error is not None
    assert out.error.message == "leg B1 failed: server died"
    assert t.calls == ["after", "clean_up", "finalize:failed"]
    assert _events(writer) == ["failed", "run-end"]


def test_a_failed_write_names_the_partial_directory(writer: ArchiveWriter) -> None:
    t = Trace()

    def body() -> None:
        raise OSError(28, "No space left on device", "/x/records.jsonl")

    out = _drive(writer, body, t)
    assert out.status == "failed" and isinstance(out.error, ArchiveError)
    assert "No space left on device (/x/records.jsonl)" in out.error.message
    assert str(writer.dir) in (out.error.hint or "")


def test_a_bug_cleans_up_and_keeps_its_traceback(writer: ArchiveWriter) -> None:
    t = Trace()

    def body() -> None:
        raise ZeroDivisionError("bug")

    with pytest.raises(ZeroDivisionError):
        _drive(writer, body, t)
    assert t.calls == ["clean_up"]  # nothing finalized from a bug; the partial stays for recovery
    assert interrupts.depth() == 0


def test_a_signal_while_finishing_is_held_until_the_archive_is_complete(writer: ArchiveWriter) -> None:
    t = Trace()

    def clean_up() -> None:
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C while services stop
        t.calls.append("clean_up")

    def finalize(status: str, error: DsvError | None) -> Out:
        t.calls.append(f"finalize:{status}")
        return Out(status, error, "a-42")

    out = drive(writer, lambda: None, kept="k", what="sweep", clean_up=clean_up, finalize=finalize)
    assert t.calls == ["clean_up", "finalize:complete"]  # the signal cut neither
    assert out.status == "complete" and isinstance(out.error, RunInterrupted)
    assert out.error.message == ("interrupted (SIGINT); the sweep ended after it was finalized: archive a-42 "
                                 "and its ledger rows are complete")
    assert out.error.exit_code == 130


def test_finish_outside_a_critical_section_is_refused(writer: ArchiveWriter, tmp_path: Path) -> None:
    run = RunBlock(campaign="c", kind="formal-matrix", claim_class="native-ar", protocol_class="formal",
                   backend="sim", service_name="s", created_wall="2026-12-02T00:00:00+00:00", run_token="t")
    with pytest.raises(RuntimeError, match="critical section"):
        finish(writer, tmp_path, "complete", run)
    # nothing finalized: the partial directory is all there is
    assert sorted(d.name for d in (tmp_path / "archives").iterdir()) == [writer.dir.name, writer.dir.name + ".lock"]
    assert writer.dir.name.startswith(".partial-")
