#!/usr/bin/env bash
# check_collectives_use_sdk.sh fails on each kind of violation it is there for: a copy of
# backends/ and plugins/collectives/ passes, then each planted violation in the copy fails it
# with its message.
# Usage: check_collectives_use_sdk_selftest.sh SOURCE_DIR
set -u
src=${1:?usage: check_collectives_use_sdk_selftest.sh SOURCE_DIR}
check="$src/tests/tree/check_collectives_use_sdk.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh_copy() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree/plugins"
  cp -r "$src/backends" "$work/tree/backends"
  cp -r "$src/plugins/collectives" "$work/tree/plugins/collectives"
}

# shellcheck source=planted.sh
source "$src/tests/tree/planted.sh"

allow "the copy as it is (and a blank line)" plugins/collectives/local_collective.cc ''

plant "a typeid name comparison" plugins/collectives/nccl_collective.cc \
  'static bool probe(const trainyard::Storage& s) { return typeid(s).name()[0] == 0; }' \
  "uses typeid"
plant "a mangled class name" plugins/collectives/nccl_collective.cc \
  'constexpr const char* kName = "N9trainyard4cuda11CudaStorageE";' \
  "mangled Trainyard type name"
plant "a backend class" plugins/collectives/mpi_collective.cc \
  'static void* probe(trainyard::Storage& s) { return static_cast<cpu::CpuStorage&>(s).data(); }' \
  "names CpuStorage"
plant "a backend header" plugins/collectives/local_collective.cc \
  '#include "cuda_backend.h"' \
  "includes cuda_backend.h"
plant "a backend include directory" plugins/collectives/CMakeLists.txt \
  'target_include_directories(trainyard_nccl PRIVATE ${CMAKE_SOURCE_DIR}/backends/cuda)' \
  "reaches into backends/"
allow "a comment naming a backend class" plugins/collectives/local_collective.cc \
  '// unlike CudaStorage, this needs no typeid(x).name()'
finish
