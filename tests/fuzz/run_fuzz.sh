#!/usr/bin/env bash
# The main build's `fuzz` test: builds tests/fuzz with clang++ and runs each fuzz target for a
# bounded time on its seed corpus.
#
#   run_fuzz.sh SOURCE_DIR BUILD_DIR SECONDS GENERATOR [MAKE_PROGRAM] [WERROR]
#
# SOURCE_DIR is the Trainyard tree, BUILD_DIR where tests/fuzz is configured (it keeps the
# corpus each run grows, under corpus/, and crash inputs, under artifacts/), SECONDS how long
# each target runs (TRAINYARD_FUZZ_SECONDS in the environment overrides it). Exits 77 (skipped)
# when clang++ or its libFuzzer runtime is missing. TRAINYARD_FUZZ_CXX picks the compiler.
set -euo pipefail

src=$1
build=$2
seconds=${TRAINYARD_FUZZ_SECONDS:-$3}
generator=$4
make_program=${5:-}
werror=${6:-OFF}
targets=(fuzz_tfrecord fuzz_yt8m_parse fuzz_decode_image)

skip() {
  echo "SKIPPED: $*"
  exit 77
}

cxx=${TRAINYARD_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for candidate in clang++ clang++-14; do
    if command -v "$candidate" >/dev/null 2>&1; then
      cxx=$(command -v "$candidate")
      break
    fi
  done
fi
[ -n "$cxx" ] || skip "no clang++ on PATH; the fuzz targets need clang and libclang-rt-14-dev" \
                     "(packaging/build-depends)"

# libFuzzer and the sanitizer runtimes come with libclang-rt-*-dev, not with clang itself.
mkdir -p "$build"
probe=$build/probe
printf '#include <cstddef>\n#include <cstdint>\nextern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n' \
  >"$probe.cc"
if ! probe_log=$("$cxx" -fsanitize=fuzzer,address,undefined "$probe.cc" -o "$probe" 2>&1); then
  skip "$cxx cannot link -fsanitize=fuzzer,address,undefined (is libclang-rt-14-dev installed?):" \
       "$(printf '%s\n' "$probe_log" | head -n 3)"
fi

configure=(cmake -S "$src/tests/fuzz" -B "$build" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx"
           -DTRAINYARD_SOURCE_DIR="$src" -DTRAINYARD_FUZZ_WERROR="$werror")
[ -z "$make_program" ] || configure+=(-DCMAKE_MAKE_PROGRAM="$make_program")
"${configure[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2

status=0
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target
  artifacts=$build/artifacts
  mkdir -p "$corpus" "$artifacts"
  echo "== $target: ${seconds}s on $src/tests/fuzz/corpus/$target"
  # New inputs go to the first directory, the build tree's; the seeds stay as they are.
  if "$build/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 \
       -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
       "$corpus" "$src/tests/fuzz/corpus/$target" >"$build/$target.log" 2>&1; then
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$build/$target.log" || true
  else
    status=1
    tail -n 60 "$build/$target.log"
    echo "FAILED: $target; the input is under $artifacts/ (replay: $build/$target <file>)"
  fi
done
exit $status
