#!/usr/bin/env bash
# GPU ownership + memory sampling, end to end on a real NVIDIA GPU machine (written for one H200).
#
#   OUT=/path/to/out bash benchmarks/gpu_ownership_device.sh        # from the repository root
#
# Outputs: $OUT/summary.json (which checks passed), $OUT/script.log (this script's trace) and
# $OUT/gpu_ownership.tar.gz holding gpu_ownership/ with every capture under a simple name (set
# DSV4H_PACK=0 to keep the folder unpacked instead).
#
# What it does:
#   1. idle captures: nvidia-smi (table, -q -x, -L, both CSV queries), `dsv4h gpu owners|memory --json`
#   2. starts an UNRELATED decoy holding GPU memory (torch if importable, else ctypes on libcuda.so.1),
#      shows `dsv4h gpu owners --json` listing it and the refusal (OwnershipError) it causes
#   3. starts a "harness-started" GPU process tree through harness.service.process.start_owned (a
#      python root whose child holds GPU memory), shows the child classified as owned and the decoy
#      as unrelated (library and CLI --pid), samples memory with MemorySampler (1 s), then stops the
#      tree with stop_owned and checks that only the tree died (the decoy is still alive)
#   4. kills the decoy (by the PID this script started) and captures the idle state again
#
# Needs: python3 with psutil (typer + rich for the CLI steps; pyarrow for memory.parquet; torch
# optional). Without typer/rich the CLI steps fall back to the library (noted in cli_mode.txt).
# Knobs: DSV4H_DECOY_BYTES (default 8 GiB), DSV4H_OWNED_BYTES (4 GiB), DSV4H_GPU_SOURCE (auto),
# DSV4H_PYTHON (interpreter), DSV4H_HOLD_S (holder lifetime, 400 s).
#
# Dry run on a machine without a GPU: DSV4H_GPU_FAKE=1 puts a fake nvidia-smi on PATH that reports
# the holders this script starts (they only sleep), so every Python part runs for real against it.
#
# Robust by design: set -x, no set -e (each step records its exit code), timeouts on every tool call,
# and a trap that kills only the PIDs this script started.

set -x
set -u
export LC_ALL=C
cd "$(dirname "$0")/.." || exit 1
REPO=$(pwd)
OUT_TOP=${OUT:-$REPO/gpu-ownership-out}
OUT=$OUT_TOP/gpu_ownership   # every capture goes here; packed into one tarball at the end
mkdir -p "$OUT"
exec > >(tee -a "$OUT_TOP/script.log") 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUT/started_utc.txt"

DECOY_BYTES=${DSV4H_DECOY_BYTES:-$((8 << 30))}
OWNED_BYTES=${DSV4H_OWNED_BYTES:-$((4 << 30))}
HOLD_S=${DSV4H_HOLD_S:-400}
export DSV4H_GPU_SOURCE=${DSV4H_GPU_SOURCE:-auto}
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
unset DSV4H_GPU_OWNERS_FILE

STARTED_PIDS=()
cleanup() {
    for pid in "${STARTED_PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
}
trap cleanup EXIT

step() {  # step NAME CMD...: run with a timeout, stdout -> $OUT/NAME, exit code -> $OUT/NAME.rc
    local name=$1
    shift
    timeout 120 "$@" > "$OUT/$name" 2> "$OUT/$name.stderr"
    echo $? > "$OUT/$name.rc"
}

# ---------------------------------------------------------------------------------------- python
PY=${DSV4H_PYTHON:-}
if [ -z "$PY" ]; then
    for cand in "$REPO/.venv/bin/python" python3 python; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import psutil" >/dev/null 2>&1; then
            PY=$cand
            break
        fi
    done
fi
PY=${PY:-python3}
"$PY" -c "import sys, psutil; print(sys.version); print('psutil', psutil.__version__)" > "$OUT/python.txt" 2>&1
for mod in psutil typer rich pyarrow torch pynvml; do
    "$PY" -c "import $mod; print('$mod', getattr($mod, '__version__', '?'))" >> "$OUT/python_modules.txt" 2>&1 \
        || echo "$mod MISSING" >> "$OUT/python_modules.txt"
done

# ---------------------------------------------------------------------------------------- fake mode
FAKE=${DSV4H_GPU_FAKE:-0}
if [ "$FAKE" = "1" ]; then
    mkdir -p "$OUT/fakebin"
    export DSV4H_FAKE_PIDS="$OUT/fake_pids.txt"
    : > "$DSV4H_FAKE_PIDS"
    cat > "$OUT/fakebin/nvidia-smi" <<EOF
#!$(command -v "$PY")
import os, sys
rows = []
for line in open(os.environ["DSV4H_FAKE_PIDS"]):
    pid, size = (int(x) for x in line.split())
    try:
        os.kill(pid, 0)
        name = open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        continue
    rows.append((pid, name, size >> 20))
args = " ".join(sys.argv[1:])
uuid = "GPU-00000000-fake-0000-0000-000000000000"
if "--query-compute-apps" in args:
    for pid, name, mib in rows:
        print(f"{uuid}, {pid}, {name}, {mib}")
elif "--query-gpu" in args:
    print(f"0, {uuid}, {5 + sum(r[2] for r in rows)}, 81559")
elif "--version" in args or "-L" in args:
    print("GPU 0: FAKE (UUID: " + uuid + ")")
else:
    print("fake nvidia-smi: " + args)
EOF
    chmod +x "$OUT/fakebin/nvidia-smi"
    export PATH="$OUT/fakebin:$PATH"
fi

# ---------------------------------------------------------------------------------------- holder
cat > "$OUT/holder.py" <<'EOF'
"""Hold N bytes of GPU memory on device 0 for S seconds: torch if importable, else libcuda via ctypes."""
import os, sys, time
n, secs = int(sys.argv[1]), float(sys.argv[2])
how = None
if os.environ.get("DSV4H_GPU_FAKE") == "1":
    with open(os.environ["DSV4H_FAKE_PIDS"], "a") as f:
        f.write(f"{os.getpid()} {n}\n")
    how = "fake (sleep only)"
else:
    try:
        import torch
        x = torch.empty(n, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        how = f"torch {torch.__version__}"
    except Exception as exc:  # no torch, or torch without CUDA: use the driver API directly
        print(f"torch path failed: {exc!r}", flush=True)
        import ctypes
        cuda = ctypes.CDLL("libcuda.so.1")
        def ck(r, what):
            if r != 0:
                raise SystemExit(f"{what} failed with CUresult {r}")
        ck(cuda.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        ck(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        ctx = ctypes.c_void_p()
        ck(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        ck(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        ptr = ctypes.c_uint64()
        ck(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(n)), "cuMemAlloc_v2")
        ck(cuda.cuMemsetD8_v2(ptr, ctypes.c_ubyte(1), ctypes.c_size_t(n)), "cuMemsetD8_v2")
        ck(cuda.cuCtxSynchronize(), "cuCtxSynchronize")
        how = "ctypes libcuda.so.1"
print(f"HOLDING {n} bytes pid {os.getpid()} via {how}", flush=True)
time.sleep(secs)
EOF

# ---------------------------------------------------------------------------------------- CLI mode
if timeout 120 "$PY" -m harness.cli gpu --help > "$OUT/cli_help.txt" 2>&1; then
    CLI_MODE=full
elif timeout 60 "$PY" -c "import harness.cli.gpu_cmd" >> "$OUT/cli_help.txt" 2>&1; then
    CLI_MODE=group
else
    CLI_MODE=library
fi
echo "$CLI_MODE" > "$OUT/cli_mode.txt"
# $OUT/dsv4h-gpu ARGS... == `dsv4h gpu ARGS...` (or the same command group, or the library as a fallback)
GPU_CLI="$OUT/dsv4h-gpu"
case "$CLI_MODE" in
    full) printf '#!/usr/bin/env bash\nexec %q -m harness.cli gpu "$@"\n' "$PY" > "$GPU_CLI" ;;
    group) printf '#!/usr/bin/env bash\nexec %q -c %q "$@"\n' "$PY" \
        'from harness.cli.gpu_cmd import app; app(prog_name="dsv4h gpu")' > "$GPU_CLI" ;;
    *) printf '#!/usr/bin/env bash\nexec %q -c %q "$@"\n' "$PY" 'import json, sys
from harness.service.devices.gpu_probe import read_gpu_memory, read_gpu_owners
snap = (read_gpu_memory if sys.argv[1] == "memory" else read_gpu_owners)()
print(json.dumps(snap.to_dict(), indent=1))' > "$GPU_CLI" ;;
esac
chmod +x "$GPU_CLI"
export GPU_CLI

# ---------------------------------------------------------------------------------------- 1. idle
step nvidia_smi_version.txt nvidia-smi --version
step nvidia_smi_L.txt nvidia-smi -L
step idle_plain.txt nvidia-smi
step idle_q.xml nvidia-smi -q -x
step idle_apps.csv nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits
step idle_gpus.csv nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits
step owners_idle.json "$GPU_CLI" owners --json --source "$DSV4H_GPU_SOURCE"
step memory_idle.json "$GPU_CLI" memory --json --source "$DSV4H_GPU_SOURCE"
step owners_idle_table.txt "$GPU_CLI" owners

# ---------------------------------------------------------------------------------------- 2. decoy
"$PY" "$OUT/holder.py" "$DECOY_BYTES" "$HOLD_S" > "$OUT/decoy.log" 2>&1 &
DECOY_PID=$!
STARTED_PIDS+=("$DECOY_PID")
echo "$DECOY_PID" > "$OUT/decoy_pid.txt"
for _ in $(seq 1 240); do
    grep -q HOLDING "$OUT/decoy.log" && break
    kill -0 "$DECOY_PID" 2>/dev/null || break
    sleep 0.5
done
cat "$OUT/decoy.log"
step decoy_apps.csv nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits
step decoy_plain.txt nvidia-smi
step owners_decoy.json "$GPU_CLI" owners --json --source "$DSV4H_GPU_SOURCE"
step owners_decoy_table.txt "$GPU_CLI" owners
step refusal_decoy.txt "$PY" -c '
import sys
from harness.errors import OwnershipError
from harness.service.devices.gpu_probe import ensure_gpus_free
try:
    snap = ensure_gpus_free(None, None, source=sys.argv[1])
except OwnershipError as exc:
    print("REFUSED (exit code %d)" % exc.exit_code)
    print(exc.message)
    print("hint:", exc.hint)
else:
    print("NOT REFUSED: owners seen:", [p.to_dict() for p in snap.processes])
    sys.exit(1)
' "$DSV4H_GPU_SOURCE"

# ---------------------------------------------------------------------------------------- 3. owned tree
cat > "$OUT/owned_phase.py" <<'EOF'
"""Start an owned GPU tree, classify owners, sample memory, stop the tree; write JSON to $OUT."""
import json, os, subprocess, sys, time
from pathlib import Path

import psutil

from harness.service.devices.gpu_probe import current_create_times, owned_tree, read_gpu_owners
from harness.service.devices.memory import MemorySampler
from harness.service.devices.ownership import check_gpus_free, classify_owners
from harness.service.process import start_owned, stop_owned

out = Path(os.environ["OUT"])
source = os.environ.get("DSV4H_GPU_SOURCE", "auto")
decoy = int(sys.argv[1])
owned_bytes, hold_s = int(sys.argv[2]), sys.argv[3]
checks = {}


def dump(name, obj):
    (out / name).write_text(json.dumps(obj, indent=1, default=str))


sampler = MemorySampler(interval_s=1.0, source=source).start()
time.sleep(2.5)
# the root is a plain python process; its child holds the GPU memory (a tree like server + worker)
root_code = ("import subprocess, sys; p = subprocess.Popen([sys.executable] + sys.argv[1:]); "
             "sys.exit(p.wait())")
proc = start_owned([sys.executable, "-c", root_code, str(out / "holder.py"), str(owned_bytes), hold_s],
                   log_path=out / "owned.log")
t0 = time.monotonic()
while time.monotonic() - t0 < 120 and "HOLDING" not in (out / "owned.log").read_text():
    if proc.exit_code() is not None:
        break
    time.sleep(0.5)
time.sleep(3.0)  # let the sampler see the plateau
tree = owned_tree(proc)
dump("owned_identity.json", {**proc.identity(), "tree": tree})
snap = read_gpu_owners(source)
current = current_create_times(p.pid for p in snap.processes)
classified = classify_owners(snap, None, tree, current=current)
dump("owners_owned_phase.json", {"snapshot": snap.to_dict(), "owned_tree": tree,
                                  "classified": [c.to_dict() for c in classified]})
verdicts = {c.process.pid: c.verdict for c in classified}
tree_pids = {p for p, _ in tree}
checks["decoy_listed_as_unrelated"] = verdicts.get(decoy) == "unrelated"
checks["owned_child_listed_as_owned"] = any(v == "owned" and p in tree_pids and p != proc.pid
                                            for p, v in verdicts.items())
checks["no_owned_pid_misclassified"] = all(verdicts.get(p, "owned") == "owned" for p in tree_pids)
unrelated = check_gpus_free(snap, None, tree, current=current)
dump("unrelated_owned_phase.json", [p.to_dict() for p in unrelated])
checks["check_gpus_free_returns_only_decoy"] = {p.pid for p in unrelated} == {decoy}
cli = subprocess.run([os.environ["GPU_CLI"], "owners", "--json", "--source", source, "--pid", str(proc.pid)],
                     capture_output=True, text=True, timeout=120)
(out / "owners_cli_pid.json").write_text(cli.stdout + ("\n--- stderr ---\n" + cli.stderr if cli.stderr else ""))

def births():
    out = set()
    for p in psutil.process_iter():
        try:
            out.add((p.pid, p.create_time()))
        except psutil.Error:
            pass
    return out


def same_process_alive(pid, birth):
    try:
        return abs(psutil.Process(pid).create_time() - birth) < 0.05
    except psutil.Error:
        return False


before = births()
report = stop_owned(proc, term_timeout_s=15)
time.sleep(0.5)
after = births()
gone = sorted(before - after)
dump("stop_report.json", {"terminated": report.terminated, "killed": report.killed,
                          "exit_code": report.exit_code, "tree": tree,
                          "vanished_during_stop": gone,
                          "vanished_outside_tree": [g for g in gone if g[0] not in tree_pids]})
checks["tree_gone_after_stop"] = bool(tree) and not any(same_process_alive(p, ct) for p, ct in tree)
checks["decoy_alive_after_stop"] = psutil.pid_exists(decoy)
time.sleep(3.0)
sampler.stop()
samples = sampler.samples()
dump("memory_samples.json", [s.__dict__ for s in samples])
summary = [s.to_dict() for s in sampler.summary()]
dump("memory_summary.json", {"source": sampler.source, "errors": sampler.errors,
                             "error_count": sampler.error_count, "devices": summary})
try:
    import pyarrow.parquet as pq
    pq.write_table(sampler.table(), out / "memory.parquet")
except Exception as exc:  # no pyarrow on this machine
    (out / "memory.parquet.txt").write_text(f"not written: {exc!r}\n")
dev0 = [s for s in samples if s.device == 0 and s.used_bytes is not None]
if dev0:
    base = dev0[0].used_bytes
    peak = max(s.used_bytes for s in dev0)
    checks["sampler_saw_owned_allocation"] = peak - base >= 0.9 * owned_bytes
    checks["sampler_saw_release"] = dev0[-1].used_bytes <= base + 0.1 * owned_bytes
else:
    checks["sampler_saw_owned_allocation"] = False
after_snap = read_gpu_owners(source)
dump("owners_after_stop.json", after_snap.to_dict())
checks["after_stop_only_decoy_owns"] = {p.pid for p in after_snap.processes} == {decoy}
dump("checks_owned_phase.json", checks)
print(json.dumps(checks, indent=1))
sys.exit(0 if all(checks.values()) else 1)
EOF
export OUT
timeout 300 "$PY" "$OUT/owned_phase.py" "$DECOY_PID" "$OWNED_BYTES" "$HOLD_S" > "$OUT/owned_phase.txt" 2>&1
echo $? > "$OUT/owned_phase.rc"
cat "$OUT/owned_phase.txt"

# ---------------------------------------------------------------------------------------- 4. cleanup
kill -0 "$DECOY_PID" 2>/dev/null && echo alive > "$OUT/decoy_alive_before_kill.txt"
kill "$DECOY_PID" 2>/dev/null
wait "$DECOY_PID" 2>/dev/null
sleep 2
step final_apps.csv nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits
step final_gpus.csv nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits
step owners_final.json "$GPU_CLI" owners --json --source "$DSV4H_GPU_SOURCE"

"$PY" - "$OUT" <<'EOF' > "$OUT/summary.json"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def read(name):
    try:
        return (out / name).read_text()
    except OSError:
        return ""
checks = {}
try:
    checks.update(json.loads(read("checks_owned_phase.json")))
except ValueError:
    checks["owned_phase_ran"] = False
decoy = read("decoy_pid.txt").strip()
try:
    owners = json.loads(read("owners_decoy.json"))
    listed = owners.get("owners", owners.get("processes", []))
    checks["cli_lists_decoy"] = any(str(o["pid"]) == decoy for o in listed)
except ValueError:
    checks["cli_lists_decoy"] = False
checks["decoy_refused"] = read("refusal_decoy.txt").startswith("REFUSED") and f"PID {decoy}" in read(
    "refusal_decoy.txt")
try:
    final = json.loads(read("owners_final.json"))
    checks["final_no_owners"] = not final.get("owners", final.get("processes", []))
except ValueError:
    checks["final_no_owners"] = False
print(json.dumps({"all_passed": all(checks.values()), "checks": checks,
                  "cli_mode": read("cli_mode.txt").strip(), "fake": read("fake_pids.txt") != ""}, indent=1))
EOF
cat "$OUT/summary.json"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUT/finished_utc.txt"
cp "$OUT/summary.json" "$OUT_TOP/summary.json"
if [ "${DSV4H_PACK:-1}" = "1" ]; then  # few files travel back from a remote machine: pack them
    tar czf "$OUT_TOP/gpu_ownership.tar.gz" -C "$OUT_TOP" gpu_ownership && rm -rf "$OUT"
fi
exit 0
