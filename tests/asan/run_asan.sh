#!/usr/bin/env bash
# The AddressSanitizer job (tests/asan/CMakeLists.txt): asan.build builds the product (host, core,
# backends, plugins; no CUDA, no MPI) with -fsanitize=address in a tree of its own, then the unit
# tests named in UNIT_TESTS (threads, untrusted files, signals). Each asan.<script> runs one of the
# integration scripts on that host, and asan.unit_tests runs those tests. A sanitizer report makes
# the process exit 1 at the first error (halt_on_error), which each script sees as a failure, and
# this script also fails when a report is found in the work directory's logs. Leak detection is
# off: the plugins are never unloaded by design and a stopped run ends through exit.
#
#   run_asan.sh build SOURCE_DIR BUILD_DIR [LAUNCHER]
#   run_asan.sh run WORK_DIR SCRIPT ARGS...   (ARGS name the ASan tree's host and WORK_DIR)
#   run_asan.sh unit BUILD_DIR WORK_DIR
set -euo pipefail

# The unit and in-process integration tests built and run under AddressSanitizer.
UNIT_TESTS=(input_pipeline_test input_memory_budget_test input_transform_test checkpoint_test
  checkpoint_v1_test coco_json_test user_file_test hostile_files_test stop_signals_test
  train_dir_lock_test trainer_state_test)
# Left out: tests that measure resident memory or cap the address space, which ASan's shadow
# memory makes meaningless.
UNIT_FILTER='-*KeepsTheOthersOutOfMemory*:*AnAllocationFailureNames*'

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
    # Then the tests' part of the tree, building only the unit tests above (the product's
    # objects keep their flags, so nothing of it is built again).
    cmake "${args[@]}" -DTRAINYARD_BUILD_TESTS=ON >>"$build.configure.log" 2>&1 ||
      { cat "$build.configure.log"; exit 1; }
    cmake --build "$build" -j2 --target "${UNIT_TESTS[@]}"
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
  unit)
    build=$(cd "$2" && pwd) work=$3
    rm -rf "$work"
    mkdir -p "$work"
    export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0
    failed=()
    cases=0
    for test in "${UNIT_TESTS[@]}"; do
      # One process per case, as ctest runs them: a case that forks (the SIGTERM test) must not
      # inherit the OpenMP threads an earlier case started.
      names=$("$build/bin/$test" --gtest_list_tests --gtest_filter="$UNIT_FILTER" |
        awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
      for name in $names; do
        cases=$((cases + 1))
        log="$work/$test.${name//\//_}.log"
        if ! (cd "$work" && timeout 600 "$build/bin/$test" --gtest_filter="$name") >"$log" 2>&1; then
          failed+=("$test $name")
          tail -n 40 "$log"
        fi
      done
    done
    if grep -l "ERROR: AddressSanitizer" "$work"/*.log >/dev/null 2>&1; then
      echo "FAIL: AddressSanitizer reports in: $(grep -l "ERROR: AddressSanitizer" "$work"/*.log)"
      exit 1
    fi
    [ ${#failed[@]} -eq 0 ] || { echo "FAIL: under AddressSanitizer: ${failed[*]}"; exit 1; }
    echo "PASS: $cases cases of ${#UNIT_TESTS[@]} test programs under AddressSanitizer, no report"
    ;;
  *)
    echo "usage: run_asan.sh build SOURCE_DIR BUILD_DIR [LAUNCHER] | run WORK_DIR SCRIPT ARGS... | unit BUILD_DIR WORK_DIR" >&2
    exit 2
    ;;
esac
