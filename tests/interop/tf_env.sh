#!/usr/bin/env bash
# The one Python environment with TensorFlow and TensorBoard that every interoperability test
# uses (CheckpointTest.TensorFlowReadsOurCheckpointsAndWeReadTheirs,
# SummaryWriterTest.TensorBoardsEventAccumulatorReadsTheScalars,
# interop.tensorflow_reads_trainyard_files), pycocotools, which interop.coco_eval_matches_pycocotools
# compares `trainyard coco-eval` with, and onnx with onnxruntime, which
# interop.onnxruntime_runs_exported_classifiers runs Trainyard's ONNX exports on.
#
#   tests/interop/tf_env.sh create   creates the virtual environment VENV with the pinned
#                                    versions below from PyPI, or reuses it when it already has
#                                    them and imports both; .ci/run calls this
#   tests/interop/tf_env.sh python   prints the interpreter the tests use, the first of:
#                                    $TRAINYARD_TF_PYTHON, VENV/bin/python, python3, that has
#                                    tensorflow and tensorboard; else says what is missing and
#                                    how to create it, and exits 77 (the tests skip) or, where
#                                    CI=true, 1 (the tests fail: CI must run them)
#
# VENV is $TRAINYARD_TF_VENV, else ${XDG_CACHE_HOME:-$HOME/.cache}/trainyard/venv-tf: outside
# the checkout, so a fresh clone reuses it; pip's download cache is pip's own, beside it.
# `create` takes PYTHON (default python3, 3.10 to 3.13) for a new environment, needs Debian's
# python3-venv, holds VENV.lock while it works, prints one line when it succeeds and the tail
# of pip's output when it fails (PyPI unreachable, no wheel for this Python).
set -euo pipefail

readonly TENSORFLOW=tensorflow-cpu==2.21.0
readonly TENSORBOARD=tensorboard==2.21.0
readonly PYCOCOTOOLS=pycocotools==2.0.11
readonly ONNX=onnx==1.23.2
readonly ONNXRUNTIME=onnxruntime==1.32.0
readonly SKIP=77

venv=${TRAINYARD_TF_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/trainyard/venv-tf}
create_command="tests/interop/tf_env.sh create"
size="from PyPI: about 350 MB to download, 1.6 GB installed"

has_modules() {  # PYTHON: true when tensorflow and tensorboard are installed for it
  [ -x "$(command -v "$1" 2>/dev/null)" ] &&
    "$1" -c "import importlib.util as u, sys; sys.exit(not (u.find_spec('tensorflow') and u.find_spec('tensorboard')))" \
      >/dev/null 2>&1
}

resolve_python() {
  if [ -n "${TRAINYARD_TF_PYTHON:-}" ]; then
    if has_modules "$TRAINYARD_TF_PYTHON"; then
      echo "$TRAINYARD_TF_PYTHON"
      return 0
    fi
    missing="TRAINYARD_TF_PYTHON=$TRAINYARD_TF_PYTHON is not a Python with tensorflow and tensorboard"
    remedy="Point it at one, or unset it and create one with \`$create_command\` ($size)"
  else
    for candidate in "$venv/bin/python" python3; do
      if has_modules "$candidate"; then
        command -v "$candidate"
        return 0
      fi
    done
    missing="no Python with tensorflow and tensorboard: TRAINYARD_TF_PYTHON is unset, $venv does not have them, nor does python3"
    remedy="Create it with \`$create_command\` ($size), or set TRAINYARD_TF_PYTHON"
  fi
  if [ "${CI:-}" = true ]; then
    echo "FAILED: $missing. CI runs the interoperability tests: .ci/run creates the environment with \`$create_command\`; see its output for why that failed."
    return 1
  fi
  echo "skipped: $missing. $remedy."
  return $SKIP
}

versions_of() {  # PYTHON: "tensorflow-cpu==X tensorboard==Y" as installed
  "$1" -c "import importlib.metadata as m
def v(name):
    try: return m.version(name)
    except m.PackageNotFoundError: return 'none'
print(f'tensorflow-cpu=={v(\"tensorflow-cpu\")} tensorboard=={v(\"tensorboard\")} pycocotools=={v(\"pycocotools\")} onnx=={v(\"onnx\")} onnxruntime=={v(\"onnxruntime\")}')" 2>/dev/null
}

imports_both() {  # PYTHON: true when tensorflow, tensorboard, pycocotools and onnxruntime import
  TF_CPP_MIN_LOG_LEVEL=3 "$1" -c "import tensorflow, tensorboard, pycocotools.cocoeval, onnx, onnxruntime" >/dev/null 2>&1
}

create() {
  local start=$SECONDS python=${PYTHON:-python3} log
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  if [ -x "$venv/bin/python" ] && [ "$(versions_of "$venv/bin/python")" = "$TENSORFLOW $TENSORBOARD $PYCOCOTOOLS $ONNX $ONNXRUNTIME" ] &&
    imports_both "$venv/bin/python"; then
    echo "tf_env: reusing $venv ($TENSORFLOW, $TENSORBOARD, $PYCOCOTOOLS, $ONNX, $ONNXRUNTIME; checked in $((SECONDS - start)) s)"
    return 0
  fi
  if ! "$venv/bin/python" -c "" >/dev/null 2>&1; then
    if ! "$python" -c "import sys; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 13))" 2>/dev/null; then
      echo "tf_env: $TENSORFLOW needs Python 3.10 to 3.13; PYTHON=$python is $("$python" --version 2>&1 || echo missing)" >&2
      return 1
    fi
    if ! "$python" -c "import ensurepip, venv" >/dev/null 2>&1; then
      echo "tf_env: $python cannot create virtual environments (on Debian: apt-get install python3-venv)" >&2
      return 1
    fi
    echo "tf_env: creating $venv ($TENSORFLOW, $TENSORBOARD $size)"
    # --clear only where VENV is a broken environment, never a directory of something else.
    local clear=()
    [ -f "$venv/pyvenv.cfg" ] && clear=(--clear)
    "$python" -m venv "${clear[@]}" "$venv"
  else
    echo "tf_env: $venv has $(versions_of "$venv/bin/python"); installing $TENSORFLOW $TENSORBOARD $PYCOCOTOOLS $ONNX $ONNXRUNTIME"
  fi
  # Short timeouts and few retries: an unreachable PyPI fails in about a minute, not pip's
  # default of several.
  log=$(mktemp)
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off \
    --timeout 30 --retries 2 "$TENSORFLOW" "$TENSORBOARD" "$PYCOCOTOOLS" "$ONNX" "$ONNXRUNTIME" >"$log" 2>&1; then
    echo "tf_env: pip could not install $TENSORFLOW $TENSORBOARD into $venv (is PyPI reachable?); pip's last lines:" >&2
    grep -v "^\(Collecting\|Downloading\|Using cached\|Requirement already\)" "$log" | tail -15 >&2 || true
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
  if ! imports_both "$venv/bin/python"; then
    echo "tf_env: $venv has $TENSORFLOW and $TENSORBOARD but they do not import:" >&2
    TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c "import tensorflow, tensorboard, pycocotools.cocoeval, onnx, onnxruntime" 2>&1 | tail -5 >&2 || true
    return 1
  fi
  echo "tf_env: $venv ready ($TENSORFLOW, $TENSORBOARD, $PYCOCOTOOLS, $ONNX, $ONNXRUNTIME) in $((SECONDS - start)) s"
}

case "${1:-}" in
  create) create ;;
  python) resolve_python ;;
  *)
    echo "usage: $0 create|python" >&2
    exit 2
    ;;
esac
