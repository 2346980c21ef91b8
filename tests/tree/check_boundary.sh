#!/usr/bin/env bash
# The SDK boundary (issue 11, section 7), checked on every #include of the tree:
#  - plugins/, backends/ and pkg/ include only the SDK (sdk/include/), pkg/'s headers
#    (pkg/*/include/), files beside the including file, and headers from outside Trainyard
#    (oneDNN, CUDA, the standard library): never the core's headers (trainyard/core/...), the
#    generated protos (trainyard/proto/...) or another layer's sources;
#  - core/ includes no plugin, backend, pkg or app file.
# Usage: check_boundary.sh SOURCE_DIR
set -u
src=${1:?usage: check_boundary.sh SOURCE_DIR}
cd "$src" || exit 2

status=0
checked=0
report() {  # FILE LINE MESSAGE
  echo "$1:$2: $3"
  status=1
}

# The includes of FILE as "LINE<TAB>PATH", quoted and angled alike.
includes_of() {
  grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$1" |
    sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1\t\2/'
}

in_pkg_include() {  # PATH: is it a header of some pkg/*/include?
  local dir
  for dir in pkg/*/include; do
    [[ -f "$dir/$1" ]] && return 0
  done
  return 1
}

# Plugins, backends and pkg: SDK and pkg only.
while IFS= read -r -d '' file; do
  checked=$((checked + 1))
  dir=$(dirname "$file")
  while IFS=$'\t' read -r line path; do
    [[ -z "$path" ]] && continue
    if [[ "$path" != *..* ]] && { [[ -f "sdk/include/$path" ]] || in_pkg_include "$path"; }; then
      continue
    fi
    if [[ -f "$dir/$path" ]]; then
      # Beside the file, but not climbing out of its own plugin, backend or package.
      resolved=$(realpath -m --relative-to=. "$dir/$path")
      own=$(echo "$file" | cut -d/ -f1-2)
      [[ "$resolved" == "$own"/* ]] && continue
      report "$file" "$line" "includes $path, which resolves to $resolved outside $own/"
      continue
    fi
    if [[ "$path" == trainyard/* ]]; then
      report "$file" "$line" "includes $path, which is not in the SDK (sdk/include) or pkg/*/include"
      continue
    fi
    if [[ "$path" == */* && -f "$path" ]]; then
      report "$file" "$line" "includes $path from the source tree"
    fi
    # Anything else comes from outside Trainyard (system and third-party headers).
  done < <(includes_of "$file")
done < <(find plugins backends pkg -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0)

# Core: nothing from plugins, backends, pkg or apps.
while IFS= read -r -d '' file; do
  checked=$((checked + 1))
  dir=$(dirname "$file")
  while IFS=$'\t' read -r line path; do
    [[ -z "$path" ]] && continue
    if [[ -f "$dir/$path" ]]; then
      resolved=$(realpath -m --relative-to=. "$dir/$path")
      [[ "$resolved" == core/* ]] && continue
      report "$file" "$line" "includes $path, which resolves to $resolved outside core/"
      continue
    fi
    if [[ "$path" == trainyard/pkg/* ]] || { [[ "$path" != *..* ]] && in_pkg_include "$path"; }; then
      report "$file" "$line" "includes $path from pkg/ (pkg/ builds on the core, not the reverse)"
      continue
    fi
    for layer in plugins backends apps; do
      if [[ -n "$(find "$layer" -path "*/$path" -print -quit)" ]]; then
        report "$file" "$line" "includes $path, a file of $layer/"
      fi
    done
  done < <(includes_of "$file")
done < <(find core -type f \( -name '*.cc' -o -name '*.h' \) -print0)

[[ $status -eq 0 ]] && echo "the SDK boundary holds ($checked files)"
exit $status
