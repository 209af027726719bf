#!/usr/bin/env bash
# Download the pinned SGLang wheel (no dependencies) into the dsv4h cache, for the tests that apply
# model_patches/ to the real package (tests/test_patches.py). Those tests FAIL when CI is set and the
# wheel is absent, so CI runs this script before pytest.
#
#   .ci/fetch_sglang_wheel.sh            # -> ${DSV4H_CACHE:-$HOME/.cache/dsv4h}/wheels/sglang-<ver>-*.whl
#   SGLANG_VERSION=0.5.23 PYTHON=.venv/bin/python .ci/fetch_sglang_wheel.sh
#
# The pinned version is the one model_patches/series.yaml targets; keep them in step.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${SGLANG_VERSION:-0.5.23}"
PY="${PYTHON:-}"
if [[ -z "$PY" ]]; then
  if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; else PY=python3; fi
fi
DEST="${DSV4H_CACHE:-$HOME/.cache/dsv4h}/wheels"
mkdir -p "$DEST"

if compgen -G "$DEST/sglang-${VERSION}-*.whl" > /dev/null; then
  echo "already cached: $(ls "$DEST"/sglang-"${VERSION}"-*.whl)"
  exit 0
fi

# The wheel is platform-specific (cp311 manylinux x86_64); ask for exactly that one so the
# download does not depend on the machine running this script.
"$PY" -m pip download "sglang==${VERSION}" --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 \
  --dest "$DEST" --disable-pip-version-check --quiet
ls -l "$DEST"/sglang-"${VERSION}"-*.whl
