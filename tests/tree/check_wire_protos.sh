#!/usr/bin/env bash
# The executables' renamed copy of TensorFlow's file-format protos (trainyard_wire_protos, package
# trainyard.wire) registers its descriptors in protobuf's process-wide pool when it loads: a
# shared library carrying it too (the core, a backend, a plugin) would be a second copy in the
# host's process, and protobuf aborts on the second registration of a file. No shared library of
# the build may carry it.
# Usage: check_wire_protos.sh LIB_DIR
set -u
lib_dir=${1:?usage: check_wire_protos.sh LIB_DIR}
[[ -d "$lib_dir" ]] || { echo "no directory $lib_dir"; exit 2; }
status=0
checked=0
while IFS= read -r -d '' so; do
  checked=$((checked + 1))
  # The serialized descriptors hold each file's name.
  if grep -q -a -F "trainyard/wire/" "$so"; then
    echo "$so carries trainyard_wire_protos (link it into executables only)"
    status=1
  fi
done < <(find "$lib_dir" -name '*.so*' -type f -print0)
[[ $checked -gt 0 ]] || { echo "no shared libraries under $lib_dir"; exit 1; }
[[ $status -eq 0 ]] && echo "no shared library carries trainyard_wire_protos ($checked checked)"
exit $status
