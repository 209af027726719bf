#!/bin/bash
# Builds the native event server (benchmarks/native/event_server.c) into a static x86-64 Linux binary:
#   bash benchmarks/native/build.sh [OUT]   (default: benchmarks/native/build/event_server)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build/event_server}
mkdir -p "$(dirname "$out")"
gcc -O2 -std=gnu11 -Wall -Wextra -static -pthread -o "$out" "$here/event_server.c"
echo "$out"
