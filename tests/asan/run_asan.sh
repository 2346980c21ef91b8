#!/usr/bin/env bash
# The AddressSanitizer job (tests/asan/CMakeLists.txt): asan.build builds the product (host, core,
# backends, plugins; no tests, no CUDA, no MPI) with -fsanitize=address in a tree of its own, and
# each asan.<script> runs one of the integration scripts on that host. A sanitizer report makes
# the process exit 1 at the first error (halt_on_error), which each script sees as a failure, and
# this script also fails when a report is found in the work directory's logs. Leak detection is
# off: the plugins are never unloaded by design and a stopped run ends through exit.
#
#   run_asan.sh build SOURCE_DIR BUILD_DIR [LAUNCHER]
#   run_asan.sh run WORK_DIR SCRIPT ARGS...   (ARGS name the ASan tree's host and WORK_DIR)
set -euo pipefail

case ${1:-} in
  build)
    src=$2 build=$3 launcher=${4:-}
    # -O1 -g1: line tables for the reports, half the compile time of -O2 -g. Warnings are not
    # errors here: GCC's flow analysis sees through ASan's instrumentation less well
    # (maybe-uninitialized on std::optional); the main build keeps -Werror.
    args=(-S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
      -DTRAINYARD_SANITIZE=address -DTRAINYARD_BUILD_TESTS=OFF -DTRAINYARD_WITH_CUDA=OFF
      -DTRAINYARD_WITH_MPI=OFF -DTRAINYARD_WERROR=OFF)
    [ -z "$launcher" ] || args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
    cmake "${args[@]}" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
    cmake --build "$build" -j2
    echo "PASS: built $build with AddressSanitizer"
    ;;
  run)
    work=$2 script=$3
    shift 3
    export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0
    status=0
    bash "$script" "$@" || status=$?
    if grep -rl "ERROR: AddressSanitizer" "$work" >/dev/null 2>&1; then
      echo "FAIL: AddressSanitizer reports in:"
      grep -rl "ERROR: AddressSanitizer" "$work"
      grep -rh -A 30 "ERROR: AddressSanitizer" "$work" | head -n 60
      exit 1
    fi
    [ $status -eq 0 ] || { echo "FAIL: $script exited $status under AddressSanitizer"; exit 1; }
    echo "PASS: $(basename "$script") under AddressSanitizer, no report"
    ;;
  *)
    echo "usage: run_asan.sh build SOURCE_DIR BUILD_DIR [LAUNCHER] | run WORK_DIR SCRIPT ARGS..." >&2
    exit 2
    ;;
esac
