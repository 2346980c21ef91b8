#!/usr/bin/env bash
# Builds and runs libtorch_overhead.cc against the libtorch of a PyPI torch wheel.
#   tests/bench/peers/run_libtorch_overhead.sh [VENV]   (default .venv-bench; created if missing)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${1:-$here/../../../.venv-bench}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-deps torch
fi
torch_dir="$("$venv/bin/python" -c 'import os, importlib.util as u; print(os.path.dirname(u.find_spec("torch").origin))')"
out="$(mktemp -d)"
g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 "$here/libtorch_overhead.cc" \
  -I"$torch_dir/include" -I"$torch_dir/include/torch/csrc/api/include" \
  -L"$torch_dir/lib" -Wl,-rpath,"$torch_dir/lib" -ltorch_cpu -lc10 -o "$out/libtorch_overhead"
"$out/libtorch_overhead"
