"""Window energy: known answers for both methods, edge interpolation, missing devices, resets."""

from __future__ import annotations

import pytest

from harness.measure.energy import window_energy
from harness.service.devices.power import PowerSample

S = 1_000_000_000  # one second in ns


def sample(t_s: float, device: int = 0, power_w: float | None = None, energy_j: float | None = None) -> PowerSample:
    t = int(t_s * S)
    return PowerSample(t, t, device, power_w, energy_j)


COUNTER = [sample(0.0, 0, 200.0, 100.0), sample(1.0, 0, 200.0, 300.0), sample(2.0, 0, 200.0, 500.0)]


def test_counter_difference_interpolated_at_both_edges() -> None:
    w = window_energy(COUNTER, int(0.5 * S), int(1.5 * S), tokens=1000)
    assert w.method == "energy-counter"
    assert w.energy_j == pytest.approx(200.0)  # E(1.5 s) = 400, E(0.5 s) = 200
    assert w.mean_power_w == pytest.approx(200.0)
    assert w.tokens_per_joule == pytest.approx(5.0)
    assert w.joules_per_token == pytest.approx(0.2)
    assert w.devices[0].samples == 3 and w.reason is None


def test_counter_window_on_sample_instants() -> None:
    w = window_energy(COUNTER, 0, 2 * S)
    assert w.energy_j == pytest.approx(400.0)
    assert w.tokens is None and w.tokens_per_joule is None


def test_power_integral_trapezoid_with_edge_interpolation() -> None:
    rows = [sample(0.0, 0, 100.0), sample(1.0, 0, 300.0), sample(2.0, 0, 300.0)]
    w = window_energy(rows, int(0.5 * S), int(1.5 * S), tokens=550)
    assert w.method == "power-integral"
    # P(0.5) = 200: 0.5 s x (200 + 300) / 2 + 0.5 s x 300 = 125 + 150
    assert w.energy_j == pytest.approx(275.0)
    assert w.mean_power_w == pytest.approx(275.0)
    assert w.tokens_per_joule == pytest.approx(2.0)


def test_both_methods_on_the_same_samples() -> None:
    rows = [sample(0.0, 0, 100.0, 0.0), sample(1.0, 0, 300.0, 250.0)]
    counter = window_energy(rows, 0, S)
    integral = window_energy(rows, 0, S, method="power-integral")
    assert counter.method == "energy-counter" and counter.energy_j == pytest.approx(250.0)
    assert integral.method == "power-integral" and integral.energy_j == pytest.approx(200.0)


def test_two_devices_total() -> None:
    rows = [*COUNTER, sample(0.0, 1, 50.0, 0.0), sample(2.0, 1, 50.0, 100.0)]
    w = window_energy(rows, int(0.5 * S), int(1.5 * S))
    assert [d.energy_j for d in w.devices] == [pytest.approx(200.0), pytest.approx(50.0)]
    assert w.energy_j == pytest.approx(250.0)
    assert w.mean_power_w == pytest.approx(250.0)


def test_one_device_without_counter_switches_every_device_to_power() -> None:
    rows = [*COUNTER, sample(0.0, 1, 50.0), sample(2.0, 1, 50.0)]
    w = window_energy(rows, int(0.5 * S), int(1.5 * S))
    assert w.method == "power-integral"
    assert w.energy_j == pytest.approx(200.0 + 50.0)


def test_forced_counter_without_counter_is_none() -> None:
    rows = [sample(0.0, 0, 50.0), sample(2.0, 0, 50.0)]
    w = window_energy(rows, 0, S, method="energy-counter")
    assert w.energy_j is None and w.tokens_per_joule is None
    assert w.reason is not None and "have no energy_j" in w.reason


def test_missing_device_gives_none_total() -> None:
    w = window_energy(COUNTER, int(0.5 * S), int(1.5 * S), devices=[0, 1], tokens=10)
    assert w.energy_j is None and w.tokens_per_joule is None and w.joules_per_token is None
    assert w.devices[0].energy_j == pytest.approx(200.0)
    assert w.devices[1].energy_j is None
    assert w.reason == "device 1: no samples"


@pytest.mark.parametrize(("start", "end", "word"), [(-0.5, 1.0, "after the start"), (0.5, 2.5, "before the end")])
def test_window_not_bracketed(start: float, end: float, word: str) -> None:
    w = window_energy(COUNTER, int(start * S), int(end * S))
    assert w.energy_j is None
    assert w.reason is not None and "not bracketed" in w.reason and word in w.reason


def test_counter_reset_gives_none_with_reason() -> None:
    rows = [sample(0.0, 0, 200.0, 100.0), sample(1.0, 0, 200.0, 300.0), sample(2.0, 0, 200.0, 50.0)]
    w = window_energy(rows, int(0.5 * S), int(1.5 * S))
    assert w.method == "energy-counter" and w.energy_j is None
    assert w.reason is not None and "decreased" in w.reason


def test_reset_outside_the_span_does_not_matter() -> None:
    rows = [*COUNTER, sample(3.0, 0, 200.0, 5.0)]
    assert window_energy(rows, int(0.5 * S), int(1.5 * S)).energy_j == pytest.approx(200.0)


def test_empty_window() -> None:
    w = window_energy(COUNTER, S, S)
    assert w.energy_j is None and w.reason is not None and "empty window" in w.reason


def test_to_dict_is_plain() -> None:
    d = window_energy(COUNTER, 0, 2 * S, tokens=800).to_dict()
    assert d["energy_j"] == pytest.approx(400.0) and d["tokens_per_joule"] == pytest.approx(2.0)
    assert d["devices"][0]["device"] == 0 and d["method"] == "energy-counter"
