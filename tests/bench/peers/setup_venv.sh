#!/usr/bin/env bash
# Creates the Python environment of the peer benchmarks and the interop tests: the CPU wheels of
# PyTorch and TensorFlow from PyPI, numpy, onnx and onnxruntime (the ONNX export's interop
# test, interop.onnxruntime_runs_exported_classifiers), and torchvision (the SSD peer,
# ssd_torchvision.py).
#
#   tests/bench/peers/setup_venv.sh [VENV]
#
# VENV defaults to $TRAINYARD_PEERS_VENV, else /work/venv-peers. Does nothing when VENV already
# imports torch, tensorflow, onnx, onnxruntime and torchvision; installs only what it lacks of the
# last three. PyPI has no CPU-only Linux build of torch: its wheel is the CUDA
# build and declares the nvidia-* CUDA wheels (several GB) as dependencies, which the CPU code
# never calls but which its libraries are linked against. So torch is first installed with
# --no-deps plus its small pure-Python dependencies, which imports where the CUDA libraries are
# already on the library path (a machine with the CUDA toolkit); where `import torch` then fails
# on a missing shared library, the declared dependencies are installed as well. torchvision is
# installed the same way, --no-deps (its torch requirement would otherwise pull torch's CUDA
# wheels), and then has to import with the installed torch and run its nms operator;
# TORCHVISION_VERSION pins it (default: the newest, which must declare the installed torch). PYTHON
# picks the interpreter (default python3, 3.10 to 3.13).
set -euo pipefail

VENV=${1:-${TRAINYARD_PEERS_VENV:-/work/venv-peers}}
PYTHON=${PYTHON:-python3}

add_torchvision() {
  if "$VENV/bin/python" -c "import torchvision" >/dev/null 2>&1; then return; fi
  echo "setup_venv: adding torchvision to $VENV" >&2
  "$VENV/bin/pip" install --disable-pip-version-check -q --no-deps pillow \
    "torchvision${TORCHVISION_VERSION:+==$TORCHVISION_VERSION}"
  if ! error=$("$VENV/bin/python" -c "import torch, torchvision
boxes = torch.tensor([[0., 0., 1., 1.], [0., 0., 1., 1.1]])
assert torchvision.ops.nms(boxes, torch.tensor([1., .5]), .5).tolist() == [0]" 2>&1); then
    echo "setup_venv: torchvision does not work with torch" \
      "$("$VENV/bin/python" -c "import torch; print(torch.__version__)") ($(tail -1 <<<"$error"));" \
      "set TORCHVISION_VERSION to the release made for it" >&2
    exit 1
  fi
}

if [[ -x "$VENV/bin/python" ]] &&
  "$VENV/bin/python" -c "import torch, tensorflow, numpy" >/dev/null 2>&1; then
  if ! "$VENV/bin/python" -c "import onnx, onnxruntime" >/dev/null 2>&1; then
    echo "setup_venv: adding onnx and onnxruntime to $VENV" >&2
    "$VENV/bin/pip" install --disable-pip-version-check -q onnx onnxruntime
  fi
  add_torchvision
  echo "setup_venv: $VENV is ready" >&2
  exit 0
fi

echo "setup_venv: creating $VENV (tensorflow-cpu and torch from PyPI, about 1.5 GB)" >&2
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/pip" install --disable-pip-version-check -q)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" numpy tensorflow-cpu
"${PIP[@]}" onnx onnxruntime
"${PIP[@]}" --no-deps torch
"${PIP[@]}" filelock typing-extensions sympy networkx jinja2 fsspec mpmath MarkupSafe
if ! error=$("$VENV/bin/python" -c "import torch" 2>&1); then
  echo "setup_venv: torch without its CUDA wheels does not import here ($(tail -1 <<<"$error"));" \
    "installing its declared dependencies (several GB)" >&2
  version=$("$VENV/bin/python" -c \
    "import importlib.metadata as m; print(m.version('torch'))")
  "${PIP[@]}" "torch==$version"
fi
add_torchvision
"$VENV/bin/python" - <<'EOF'
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# torch before tensorflow: the other order aborts in one process on this pair of wheels (LLVM's
# "option registered more than once"), as the readiness check above imports them.
import torch, torchvision
import numpy, onnx, onnxruntime, tensorflow
print(f"setup_venv: numpy {numpy.__version__}, tensorflow {tensorflow.__version__}, "
      f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnx {onnx.__version__}, "
      f"onnxruntime {onnxruntime.__version__}")
EOF
