"""Measure GPU energy through NVML around a known load: idle window, then bf16 matrix products on cuda:0.

    python3 benchmarks/gpu/power_nvml.py OUT.json [--seconds 20] [--idle-s 5] [--interval 0.1] [--size 8192]

A PowerSampler(source="nvml") samples every --interval seconds from before the idle window to after
the load; window_energy gives each window's energy (the NVML energy counter when it answers, else the
power integral; both are printed for the load) and mean power. OUT.json holds the windows, the
sampler's source/resolution record, the load's work (matmuls, TFLOP/s) and every raw sample; it is
meant to become a fixture under tests/fixtures/gpu/. Needs only this checkout (put on sys.path
here), nvidia-ml-py and torch; no pydantic. Without torch, CUDA or pynvml it prints why and exits 0
without measuring.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.measure.energy import EnergyWindow, window_energy  # noqa: E402
from harness.service.devices.power import PowerSampler  # noqa: E402


def _skip(reason: str) -> None:
    print(f"SKIPPED: {reason}")
    raise SystemExit(0)


def _nvml_identity(device: int) -> dict[str, Any]:
    import pynvml

    out: dict[str, Any] = {"nvml_index": device}
    pynvml.nvmlInit()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(device)
        for key, fn in (("name", pynvml.nvmlDeviceGetName), ("uuid", pynvml.nvmlDeviceGetUUID),
                        ("power_limit_mw", pynvml.nvmlDeviceGetEnforcedPowerLimit)):
            try:
                value = fn(h)
                out[key] = value.decode() if isinstance(value, bytes) else value
            except Exception as exc:  # a field the driver refuses is recorded, not fatal
                out[key] = f"unavailable: {exc}"
        try:
            drv = pynvml.nvmlSystemGetDriverVersion()
            out["driver"] = drv.decode() if isinstance(drv, bytes) else drv
        except Exception as exc:
            out["driver"] = f"unavailable: {exc}"
    finally:
        pynvml.nvmlShutdown()
    return out


def _row(label: str, w: EnergyWindow) -> str:
    e = "n/a" if w.energy_j is None else f"{w.energy_j:10.1f}"
    p = "n/a" if w.mean_power_w is None else f"{w.mean_power_w:8.1f}"
    return f"{label:<22} {w.seconds:8.3f} {e:>10} {p:>8}  {w.method or '-':<15} {w.reason or ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="JSON result path")
    ap.add_argument("--seconds", type=float, default=20.0, help="load duration (s)")
    ap.add_argument("--idle-s", type=float, default=5.0, help="idle window before the load (s)")
    ap.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    ap.add_argument("--size", type=int, default=8192, help="square matrix size of the bf16 products")
    ap.add_argument("--nvml-device", type=int, default=0, help="NVML index of the GPU torch sees as cuda:0")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        _skip("torch is not installed")
    try:
        import pynvml  # noqa: F401
    except ImportError:
        _skip("pynvml (nvidia-ml-py) is not installed")
    if not torch.cuda.is_available():
        _skip("no CUDA GPU visible to torch")

    dev = torch.device("cuda:0")
    a = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    for _ in range(5):  # warm-up: cuBLAS heuristics and clocks, outside every window
        torch.matmul(a, b)
    torch.cuda.synchronize()

    sampler = PowerSampler(interval_s=args.interval, source="nvml", devices=[args.nvml_device]).start()
    time.sleep(max(2 * args.interval, 0.5))  # a sample before the idle window starts
    idle_start = time.perf_counter_ns()
    time.sleep(args.idle_s)
    idle_end = time.perf_counter_ns()

    matmuls = 0
    load_start = time.perf_counter_ns()
    deadline = time.perf_counter() + args.seconds
    while time.perf_counter() < deadline:
        for _ in range(10):
            torch.matmul(a, b)
        matmuls += 10
        torch.cuda.synchronize()  # keep the host clock honest about when the work ran
    load_end = time.perf_counter_ns()
    time.sleep(max(2 * args.interval, 1.5))  # bracket the end; NVML power is a 1 s average on Hopper
    sampler.stop()

    samples = sampler.samples()
    load_s = (load_end - load_start) / 1e9
    tflop = matmuls * 2 * args.size**3 / 1e12
    windows = {
        "idle": window_energy(samples, idle_start, idle_end),
        "load": window_energy(samples, load_start, load_end),
        "load_power_integral": window_energy(samples, load_start, load_end, method="power-integral"),
        "idle_power_integral": window_energy(samples, idle_start, idle_end, method="power-integral"),
    }
    load = windows["load"]
    work = {"matmuls": matmuls, "size": args.size, "dtype": "bfloat16", "tflop": tflop,
            "tflop_per_s": tflop / load_s,
            "gflop_per_joule": None if not load.energy_j else tflop * 1e3 / load.energy_j}
    print(f"{'window':<22} {'seconds':>8} {'energy J':>10} {'mean W':>8}  {'method':<15} reason")
    for label, w in windows.items():
        print(_row(label, w))
    print(f"load: {matmuls} matmuls of {args.size}^2 bf16, {work['tflop_per_s']:.1f} TFLOP/s, "
          f"{work['gflop_per_joule'] or float('nan'):.1f} GFLOP/J; samples {len(samples)}, "
          f"read errors {sampler.error_count}")
    result = {
        "what": "benchmarks/gpu/power_nvml.py: NVML power/energy around a bf16 matmul load",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "torch_device": torch.cuda.get_device_name(dev), "nvml": _nvml_identity(args.nvml_device),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "sampler": sampler.info, "work": work,
        "windows": {k: w.to_dict() for k, w in windows.items()},
        "samples": [s.to_dict() for s in samples],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
