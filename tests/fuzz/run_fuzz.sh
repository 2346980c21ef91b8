#!/usr/bin/env bash
# The main build's fuzz tests (tests/CMakeLists.txt): fuzz.build builds tests/fuzz with clang++,
# then each fuzz.<target> runs one target for a bounded time.
#
#   run_fuzz.sh build SOURCE_DIR BUILD_DIR GENERATOR [MAKE_PROGRAM] [WERROR] [LAUNCHER]
#   run_fuzz.sh run TARGET SOURCE_DIR BUILD_DIR SECONDS
#
# build configures tests/fuzz in BUILD_DIR and builds every target (LAUNCHER, e.g. ccache, wraps
# the compiler). It exits 77 (skipped) when clang++ or its libFuzzer runtime is missing, and
# leaves BUILD_DIR/skipped saying why, so that each run then exits 77 too.
#
# run runs TARGET for SECONDS (TRAINYARD_FUZZ_SECONDS in the environment overrides it) on its
# checked-in seeds, SOURCE_DIR/tests/fuzz/corpus/TARGET, which it never writes, and on the corpus
# kept between runs, where the inputs it finds that reach new code are added:
# $TRAINYARD_FUZZ_CORPUS_DIR/TARGET, else ${XDG_CACHE_HOME:-$HOME/.cache}/trainyard/fuzz-corpus/
# TARGET, else (no HOME) BUILD_DIR/corpus/TARGET. Inputs are at most TRAINYARD_FUZZ_MAX_LEN
# bytes (default: 4096, or the largest seed if larger); a kept corpus of more than
# TRAINYARD_FUZZ_MAX_CORPUS_FILES (2000) files is first merged down to the inputs that cover
# something the others do not. It prints the executions (stat::number_of_executed_units) and
# the inputs added. A crash, leak, sanitizer report, an input running past 30 s or past 2 GiB
# fails it; the input is saved under BUILD_DIR/artifacts/ (replay: BUILD_DIR/TARGET <file>).
# TRAINYARD_FUZZ_CXX picks the compiler.
set -euo pipefail

usage() {
  echo "usage: run_fuzz.sh build SOURCE_DIR BUILD_DIR GENERATOR [MAKE_PROGRAM] [WERROR] [LAUNCHER]" >&2
  echo "       run_fuzz.sh run TARGET SOURCE_DIR BUILD_DIR SECONDS" >&2
  exit 2
}

skip() {
  echo "SKIPPED: $*"
  exit 77
}

build() {
  local src=$1 build=$2 generator=$3 make_program=${4:-} werror=${5:-OFF} launcher=${6:-}
  mkdir -p "$build"
  rm -f "$build/skipped"
  skip_build() {
    echo "$*" >"$build/skipped"
    skip "$@"
  }
  local cxx=${TRAINYARD_FUZZ_CXX:-}
  if [ -z "$cxx" ]; then
    for candidate in clang++ clang++-14; do
      if command -v "$candidate" >/dev/null 2>&1; then
        cxx=$(command -v "$candidate")
        break
      fi
    done
  fi
  [ -n "$cxx" ] || skip_build "no clang++ on PATH; the fuzz targets need clang, lld and" \
                              "libclang-rt-14-dev (packaging/test-depends)"

  # libFuzzer and the sanitizer runtimes come with libclang-rt-*-dev, not with clang itself; the
  # targets link with lld.
  local probe=$build/probe probe_log
  printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
    >"$probe.cc"
  if ! probe_log=$("$cxx" -fsanitize=fuzzer,address,undefined -fuse-ld=lld "$probe.cc" -o "$probe" 2>&1); then
    skip_build "$cxx cannot link -fsanitize=fuzzer,address,undefined with lld (are" \
                "libclang-rt-14-dev and lld installed?): $(printf '%s\n' "$probe_log" | head -n 3)"
  fi

  local configure=(cmake -S "$src/tests/fuzz" -B "$build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx"
                   -DTRAINYARD_SOURCE_DIR="$src" -DTRAINYARD_FUZZ_WERROR="$werror")
  [ -z "$make_program" ] || configure+=(-DCMAKE_MAKE_PROGRAM="$make_program")
  [ -z "$launcher" ] || configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
  "${configure[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
  cmake --build "$build" -j2
}

run() {
  local target=$1 src=$2 build=$3 seconds=${TRAINYARD_FUZZ_SECONDS:-$4}
  if [ -f "$build/skipped" ]; then
    skip "$(cat "$build/skipped")"
  fi
  [ -x "$build/$target" ] || { echo "FAILED: no $build/$target; run fuzz.build first"; exit 1; }
  local seeds=$src/tests/fuzz/corpus/$target
  [ -d "$seeds" ] || { echo "FAILED: no seed corpus $seeds"; exit 1; }

  local kept_root
  if [ -n "${TRAINYARD_FUZZ_CORPUS_DIR:-}" ]; then
    kept_root=$TRAINYARD_FUZZ_CORPUS_DIR
  elif [ -n "${XDG_CACHE_HOME:-}" ] || [ -n "${HOME:-}" ]; then
    kept_root=${XDG_CACHE_HOME:-$HOME/.cache}/trainyard/fuzz-corpus
  else
    kept_root=$build/corpus
  fi
  local corpus=$kept_root/$target artifacts=$build/artifacts
  mkdir -p "$corpus" "$artifacts"

  local largest max_len max_files=${TRAINYARD_FUZZ_MAX_CORPUS_FILES:-2000}
  largest=$(find "$seeds" -type f -printf '%s\n' | sort -n | tail -n 1)
  max_len=${TRAINYARD_FUZZ_MAX_LEN:-$(( ${largest:-0} > 4096 ? largest : 4096 ))}
  local flags=(-rss_limit_mb=2048 -timeout=30 -max_len="$max_len" -print_final_stats=1
               -artifact_prefix="$artifacts/$target-")

  local kept
  kept=$(find "$corpus" -maxdepth 1 -type f | wc -l)
  if [ "$kept" -gt "$max_files" ]; then
    echo "== $target: merging the $kept inputs kept in $corpus"
    local merged=$corpus.merging
    rm -rf "$merged" && mkdir -p "$merged"
    if "$build/$target" -merge=1 "${flags[@]}" "$merged" "$corpus" >"$build/$target.merge.log" 2>&1; then
      rm -rf "$corpus" && mv "$merged" "$corpus"
    else
      tail -n 60 "$build/$target.merge.log"
      echo "FAILED: $target while merging its kept corpus; the input is under $artifacts/"
      rm -rf "$merged"
      exit 1
    fi
  fi

  echo "== $target: ${seconds}s on $seeds and $corpus ($(find "$corpus" -maxdepth 1 -type f | wc -l) kept)"
  # New inputs go to the first directory, the kept corpus; the seeds stay as they are.
  if "$build/$target" -max_total_time="$seconds" "${flags[@]}" "$corpus" "$seeds" \
       >"$build/$target.log" 2>&1; then
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$build/$target.log" || true
  else
    tail -n 60 "$build/$target.log"
    echo "FAILED: $target; the input is under $artifacts/ (replay: $build/$target <file>)"
    exit 1
  fi
}

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
  build) [ $# -ge 3 ] || usage; build "$@" ;;
  run) [ $# -eq 4 ] || usage; run "$@" ;;
  *) usage ;;
esac
