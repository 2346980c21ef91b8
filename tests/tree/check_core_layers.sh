#!/usr/bin/env bash
# The core's floors (issue 36, section 1): core/src/ is in layer folders, and a layer includes
# the private headers of its own floor and the floors below, never one above:
#
#   train      step, loop, hooks, evaluator, exporter, data parallelism
#   input      the input pipeline and its transforms
#   config     pipeline configs, their validation, TF_CONFIG
#   formats    TFRecord, tf.Example, checkpoints, event files, JSON, ONNX
#   registry   plugin loading, classes by name, options, the pipeline's plugin objects
#   engine     tensors, ops, autodiff, variables, the model context
#   platform   errors, files, locks, signals, allocation, progress
#
# Checked on the quoted includes of core/src ("engine/dispatch.h"); the installed headers
# (trainyard/core/...) are the core's public face and every floor may use them. A source
# directly in core/src, or in a folder that is no floor, fails too.
# Usage: check_core_layers.sh SOURCE_DIR
#        check_core_layers.sh --self-test   (plants a violation of each kind and expects failure)
set -u

layers=(platform engine registry formats config input train)

rank_of() {  # LAYER -> its floor number, or nothing
  local i
  for i in "${!layers[@]}"; do
    [[ "${layers[$i]}" == "$1" ]] && {
      echo "$i"
      return
    }
  done
}

check() {  # SOURCE_DIR
  local src=$1 status=0 checked=0 f rel layer rank line target target_layer target_rank
  [[ -d "$src/core/src" ]] || {
    echo "FAIL: $src/core/src is not a directory"
    return 2
  }
  while IFS= read -r -d '' f; do
    rel=${f#"$src"/core/src/}
    checked=$((checked + 1))
    if [[ "$rel" != */* ]]; then
      echo "core/src/$rel sits on no floor: move it into one of ${layers[*]}"
      status=1
      continue
    fi
    layer=${rel%%/*}
    rank=$(rank_of "$layer")
    if [[ -z "$rank" ]]; then
      echo "core/src/$rel is in '$layer', which is no floor (${layers[*]})"
      status=1
      continue
    fi
    while IFS=$'\t' read -r line target; do
      target_layer=${target%%/*}
      target_rank=$(rank_of "$target_layer")
      [[ -z "$target_rank" ]] && continue  # a public or system header
      if ((target_rank > rank)); then
        echo "core/src/$rel:$line: the '$layer' floor includes \"$target\" from the" \
          "'$target_layer' floor above it"
        status=1
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]+"' "$f" |
      sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1\t\2/')
  done < <(find "$src/core/src" -type f \( -name '*.cc' -o -name '*.h' \) -print0 | sort -z)
  if ((checked == 0)); then
    echo "FAIL: no source found under $src/core/src"
    return 2
  fi
  ((status == 0)) && echo "core/src keeps its floors ($checked files, ${layers[*]})"
  return $status
}

self_test() {
  local dir ok=0
  dir=$(mktemp -d) || exit 2
  trap 'rm -rf "$dir"' RETURN
  mkdir -p "$dir/core/src/platform" "$dir/core/src/train" "$dir/core/src/misc"
  echo '#include "platform/a.h"' >"$dir/core/src/train/t.cc"
  echo '#include <vector>' >"$dir/core/src/platform/a.h"
  check "$dir" >/dev/null || {
    echo "FAIL: a clean tree was refused"
    ok=1
  }
  echo '#include "train/t.h"' >"$dir/core/src/platform/up.cc"
  check "$dir" >/dev/null && {
    echo "FAIL: platform including train passed"
    ok=1
  }
  rm "$dir/core/src/platform/up.cc"
  touch "$dir/core/src/flat.cc"
  check "$dir" >/dev/null && {
    echo "FAIL: a source outside the floors passed"
    ok=1
  }
  rm "$dir/core/src/flat.cc"
  touch "$dir/core/src/misc/m.cc"
  check "$dir" >/dev/null && {
    echo "FAIL: a folder that is no floor passed"
    ok=1
  }
  ((ok == 0)) && echo "the check fails on each planted violation"
  return $ok
}

if [[ "${1:-}" == "--self-test" ]]; then
  self_test
  exit $?
fi
check "${1:?usage: check_core_layers.sh SOURCE_DIR | --self-test}"
