#!/usr/bin/env bash
# Collectives reach tensors through the SDK only (issue 36, section 5): a collective in
# plugins/collectives/ gets a tensor's device pointer and its backend's native stream from
# Tensor::native_memory and Stream::native_stream (tensor.h, stream.h), which say their
# DeviceKind, and never from a backend's private classes. So no file there
#  - names a class that a backend declares in its headers (backends/*/*.h: CudaStorage,
#    CudaStream, CpuStorage, ...), outside comments;
#  - uses typeid (finding a hidden class by its type name) or spells a mangled Trainyard name;
#  - includes a backend's header;
# and plugins/collectives/CMakeLists.txt does not reach into backends/.
# Usage: check_collectives_use_sdk.sh SOURCE_DIR
set -u
src=${1:?usage: check_collectives_use_sdk.sh SOURCE_DIR}
cd "$src" || exit 2

status=0
report() {  # FILE:LINE MESSAGE
  echo "$1: $2"
  status=1
}

# The classes and structs the backends declare in their headers.
mapfile -t classes < <(
  find backends -type f \( -name '*.h' -o -name '*.cuh' \) -print0 |
    xargs -0 grep -hoE '^[[:space:]]*(class|struct)[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*(final|:|\{)' |
    sed -E 's/^[[:space:]]*(class|struct)[[:space:]]+([A-Za-z_][A-Za-z0-9_]*).*/\2/' | sort -u)
# The basenames of the backends' headers.
mapfile -t headers < <(find backends -type f \( -name '*.h' -o -name '*.cuh' \) -printf '%f\n' | sort -u)
if [[ ${#classes[@]} -eq 0 ]]; then
  echo "FAIL: found no class declared in backends/*/*.h: is $src the source tree?"
  exit 2
fi

files=0
while IFS= read -r -d '' file; do
  files=$((files + 1))
  # Code without its // comments (the line numbers kept).
  code=$(sed -E 's#//.*$##' "$file")
  while IFS=: read -r line text; do
    report "$file:$line" "uses typeid: a collective must not find a backend's class by its type name; use Tensor::native_memory / Stream::native_stream (${text#"${text%%[![:space:]]*}"})"
  done < <(grep -nE '\btypeid[[:space:]]*\(' <<<"$code")
  while IFS=: read -r line _; do
    report "$file:$line" "spells a mangled Trainyard type name (N9trainyard...): a collective must not find a backend's class by its type name"
  done < <(grep -nE 'N9trainyard[0-9]' <<<"$code")
  for class in "${classes[@]}"; do
    while IFS=: read -r line _; do
      report "$file:$line" "names $class, a class of a backend (declared in backends/): use the SDK's native accessors"
    done < <(grep -nwE "$class" <<<"$code")
  done
  while IFS=: read -r line path; do
    base=$(basename "$path")
    for header in "${headers[@]}"; do
      if [[ "$base" == "$header" && ! -f "$(dirname "$file")/$path" ]] || [[ "$path" == *backends/* ]]; then
        report "$file:$line" "includes $path, a backend's header: a collective uses the SDK only"
        break
      fi
    done
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$file" |
    sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1:\2/')
done < <(find plugins/collectives -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0)

while IFS=: read -r line _; do
  report "plugins/collectives/CMakeLists.txt:$line" "reaches into backends/: a collective links the SDK only"
done < <(grep -nE 'backends/|trainyard_cuda|trainyard_cpu' plugins/collectives/CMakeLists.txt)

if [[ $files -eq 0 ]]; then
  echo "FAIL: no source file in plugins/collectives"
  exit 2
fi
if [[ $status -ne 0 ]]; then
  echo "FAIL: plugins/collectives reaches past the SDK into a backend (${#classes[@]} backend classes checked)"
  exit 1
fi
echo "PASS: $files files in plugins/collectives use the SDK only (${#classes[@]} backend classes, ${#headers[@]} backend headers checked)"
