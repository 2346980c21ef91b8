#!/usr/bin/env bash
# check_op_families.sh on a copy of the tree's op family files with a fixture family planted:
# a family added by one row of families.h and its own files passes; the same family present in
# one place but not the list, listed without its files, with a file its row says it lacks, or
# named by a hand-kept list, fails. So the check, and with it the one-edit procedure, is
# proven against each way of breaking it.
# Usage: check_op_families_planted.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: check_op_families_planted.sh SOURCE_DIR}
check=$(dirname "$0")/check_op_families.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh() {  # a copy of the files the check reads
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  (cd "$src" && tar -c sdk/include/trainyard/ops.h sdk/include/trainyard/ops core/src/engine/ops \
    core/CMakeLists.txt backends/cpu backends/cuda apps/conformance tests/unit) |
    tar -x -C "$work/tree"
  t=$work/tree
}
add_row() {  # appends a row to TRAINYARD_CORE_OP_FAMILIES
  sed -i "s/^\(  X(mixture,.*\))$/\1) \\\\\n  X($1)/" "$t/sdk/include/trainyard/ops/families.h"
  grep -q "X($1)" "$t/sdk/include/trainyard/ops/families.h"
}
plant_family_files() {  # the fixture family's own files: core, cpu kernels, conformance cases
  cat >"$t/core/src/engine/ops/fixture.cc" <<'EOF'
#define TRAINYARD_FIXTURE_OPS(X) X(kFixtureOp, "fixture_op", 1, 1, NoAttrs, "x -> x")
TRAINYARD_DEFINE_OP_FAMILY(fixture, TRAINYARD_FIXTURE_OPS)
EOF
  printf 'void add_fixture_kernels(std::vector<KernelRegistration>& table) {}\n' \
    >"$t/backends/cpu/kernels_fixture.cc"
  printf 'void add_fixture_cases(std::vector<OpCase>& c) {}\n' >"$t/apps/conformance/cases_fixture.cc"
}
passes=0
failures=0
expect() {  # expect pass|fail "what" [grep pattern the report must contain]
  local want=$1 what=$2 pattern=${3:-}
  local out rc=0
  out=$(bash "$check" "$t" 2>&1) || rc=$?
  if [[ $want == pass && $rc -ne 0 ]]; then
    echo "FAIL: $what: the check failed:"
    echo "$out"
    failures=$((failures + 1))
  elif [[ $want == fail && $rc -eq 0 ]]; then
    echo "FAIL: $what: the check passed: $out"
    failures=$((failures + 1))
  elif [[ -n "$pattern" ]] && ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: the report does not say '$pattern':"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok: $what"
    passes=$((passes + 1))
  fi
}

fresh
expect pass "the tree as it is"

fresh
add_row "fixture, ops, kernels, none, none, cases"
plant_family_files
expect pass "a fixture family added by one row and its own files"

fresh
plant_family_files
expect fail "a fixture family's files without its row" "which sdk/include/trainyard/ops/families.h does not list"

fresh
add_row "fixture, ops, kernels, none, none, cases"
expect fail "a fixture family's row without its files" "core/src/engine/ops/fixture.cc does not exist"

fresh
add_row "fixture, ops, kernels, none, none, cases"
plant_family_files
printf 'void add_fixture_kernels(std::vector<KernelRegistration>& table) {}\n' \
  >"$t/backends/cuda/kernels_fixture.cu"
expect fail "a cuda file for a family whose row says cuda none" "says cuda none"

fresh
add_row "fixture, ops_composites, kernels, none, none, cases"
plant_family_files
expect fail "a row that says composites where the file declares none" "declare_fixture_composites"

fresh
add_row "fixture, ops, kernels, none, none, cases"
plant_family_files
sed -i 's/^\(  precision_ = .*\)$/\1\n  add_fixture_kernels(kernels_);/' "$t/backends/cpu/cpu_backend.cc"
expect fail "a registration call kept by hand" "a hand-kept list names op family 'fixture'"

fresh
printf 'void add_math_cases(std::vector<OpCase>& c);\n' >>"$t/apps/conformance/op_cases.h"
expect fail "a declaration kept by hand" "a hand-kept declaration names op family 'math'"

fresh
sed -i 's/\${cpu_family_sources}/${cpu_family_sources} kernels_math.cc/' "$t/backends/cpu/CMakeLists.txt"
expect fail "a CMake source list kept by hand" "a CMake source list names op family 'math'"

fresh
printf '// fixture\n' >"$t/sdk/include/trainyard/ops/fixture.h"
expect fail "an sdk family header that ops.h does not include" "missing \[trainyard/ops/fixture.h"

echo "$passes passed, $failures failed"
((failures == 0))
