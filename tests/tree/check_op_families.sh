#!/usr/bin/env bash
# A new op family is one list edit (issue 36, section 5): every per-family table of the tree is
# generated from TRAINYARD_CORE_OP_FAMILIES in sdk/include/trainyard/ops/families.h. Fails when
#   - a family's file exists in some layer (core, sdk, cpu, cuda, conformance, unit tests) but
#     the family is not listed;
#   - a listed family's row and its files disagree: a column says kernels/cases/ops but the
#     file or its registration function is missing, or says none but the file exists (it would
#     be silently left out of the build);
#   - a hand-kept family list comes back: registration calls, declarations or CMake source lists
#     that name a family's function or file instead of expanding the list;
#   - ops.h does not include exactly the sdk's family headers.
# Usage: check_op_families.sh SOURCE_DIR. Prints PASS, or FAIL lines naming the file and family.
set -euo pipefail
root=${1:?usage: check_op_families.sh SOURCE_DIR}
cd "$root"
list=sdk/include/trainyard/ops/families.h
fail=0
problem() {
  echo "FAIL: $*"
  fail=1
}

# The rows: family core cpu cuda reference conformance.
rows=$(sed -n 's/^ *X(\([^)]*\)).*/\1/p' "$list" | tr -d ' ' | tr ',' ' ')
if [[ -z "$rows" ]]; then
  echo "FAIL: $list: no op family rows"
  exit 1
fi
declare -A core cpu cuda conformance
families=()
while read -r f c k g r t; do
  families+=("$f")
  core[$f]=$c cpu[$f]=$k cuda[$f]=$g conformance[$f]=$t
done <<<"$rows"
listed() { [[ -v "core[$1]" ]]; }

# Files that belong to a family but are not a family's own file (sub-files of a family, called
# from that family's registration function).
parts=" backends/cpu/kernels_batch_norm.cc backends/cuda/kernels_conv.cu "
not_families=" core/src/engine/ops/composite.cc core/src/engine/ops/op_registry.cc "

# 1. Every family file names a listed family.
for file in core/src/engine/ops/*.cc backends/cpu/kernels_*.cc backends/cuda/kernels_*.cu \
  backends/cuda/kernels_*.cc apps/conformance/cases_*.cc \
  apps/conformance/reference_kernels_*.cc sdk/include/trainyard/ops/*.h; do
  [[ -e "$file" ]] || continue
  [[ "$parts$not_families" == *" $file "* ]] && continue
  [[ "$file" == "$list" ]] && continue
  base=$(basename "$file")
  base=${base%.*}
  family=${base#kernels_}
  family=${family#cases_}
  family=${family#reference_kernels_}
  if ! listed "$family"; then
    problem "$file is a file of op family '$family', which $list does not list"
  fi
done
for file in tests/unit/ops_*_test.cc; do
  [[ -e "$file" ]] || continue
  family=$(basename "$file" _test.cc)
  family=${family#ops_}
  case $family in cross_family | moe_mixture) continue ;; esac
  listed "$family" || problem "$file tests op family '$family', which $list does not list"
done

# 2. Each row agrees with the family's files.
for f in "${families[@]}"; do
  src=core/src/engine/ops/$f.cc
  if [[ ! -e "$src" ]]; then
    problem "op family '$f' is listed but $src does not exist"
  else
    case ${core[$f]} in
      ops | ops_composites) wants_ops=1 ;;
      *) wants_ops=0 ;;
    esac
    case ${core[$f]} in
      ops_composites | composites) wants_declare=1 ;;
      *) wants_declare=0 ;;
    esac
    has_ops=0
    grep -Eq "^TRAINYARD_DEFINE_OP_FAMILY\($f," "$src" && has_ops=1
    has_declare=0
    grep -Eq "^void declare_${f}_composites\(\)" "$src" && has_declare=1
    ((has_ops == wants_ops)) ||
      problem "$src: op family '$f' is '${core[$f]}' in $list, but the file" \
        "$( ((has_ops)) && echo defines || echo 'does not define') TRAINYARD_DEFINE_OP_FAMILY($f, ...)"
    ((has_declare == wants_declare)) ||
      problem "$src: op family '$f' is '${core[$f]}' in $list, but the file" \
        "$( ((has_declare)) && echo defines || echo 'does not define') declare_${f}_composites()"
  fi
  check_column() {  # column value, yes word, file glob..., function
    local column=$1 value=$2 yes=$3 fn=$4
    shift 4
    local found=""
    for file in "$@"; do [[ -e "$file" ]] && found=$file; done
    if [[ "$value" == "$yes" ]]; then
      if [[ -z "$found" ]]; then
        problem "op family '$f' says $column $yes in $list, but $* does not exist"
      elif ! grep -Eq "^(void|std::span<const KernelRegistration>) ${fn}\(" "$found"; then
        problem "$found does not define ${fn}(), which the $column column of '$f' calls for"
      fi
    elif [[ -n "$found" ]]; then
      problem "$found exists, but op family '$f' says $column none in $list (it is not built)"
    fi
  }
  check_column cpu "${cpu[$f]}" kernels "add_${f}_kernels" backends/cpu/kernels_$f.cc
  check_column cuda "${cuda[$f]}" kernels "add_${f}_kernels" \
    backends/cuda/kernels_$f.cu backends/cuda/kernels_$f.cc
  check_column conformance "${conformance[$f]}" cases "add_${f}_cases" \
    apps/conformance/cases_$f.cc
done

# 3. No hand-kept family list: the consumers expand TRAINYARD_OP_FAMILIES instead of naming
# each family.
for f in "${families[@]}"; do
  hits=$(grep -EnH "\badd_${f}_kernels\(kernels_\)|\badd_${f}_cases\(c\);|[{ ,]${f}_ops[,}]|^ *declare_${f}_composites\(\);|reference::${f}_kernels\b" \
    backends/cpu/cpu_backend.cc backends/cuda/cuda_backend.cc apps/conformance/op_cases.cc \
    apps/conformance/reference_backend.cc core/src/engine/ops/op_registry.cc 2>/dev/null || true)
  [[ -z "$hits" ]] || problem "a hand-kept list names op family '$f' (expand TRAINYARD_OP_FAMILIES):" \
    "$hits"
  hits=$(grep -EnH "^(void add_${f}_(kernels|cases)|std::span<(OpDef\* const|const KernelRegistration)> ${f}_(ops|kernels)\(\);|void declare_${f}_composites\(\);)" \
    backends/cpu/kernels.h backends/cuda/kernels.cuh apps/conformance/op_cases.h \
    apps/conformance/reference_kernels.h core/src/engine/ops/op_def.h 2>/dev/null || true)
  [[ -z "$hits" ]] || problem "a hand-kept declaration names op family '$f' (expand" \
    "TRAINYARD_OP_FAMILIES): $hits"
  hits=$(grep -EnH "(^|[ /])(kernels|cases|reference_kernels)_${f}\.(cc|cu)\b|src/engine/ops/${f}\.cc\b|\bops_${f}_test\b" \
    core/CMakeLists.txt backends/cpu/CMakeLists.txt backends/cuda/CMakeLists.txt \
    apps/conformance/CMakeLists.txt tests/unit/CMakeLists.txt 2>/dev/null |
    grep -v "set_source_files_properties" || true)
  [[ -z "$hits" ]] || problem "a CMake source list names op family '$f''s file (use" \
    "trainyard_op_family_sources): $hits"
done

# 4. ops.h includes every family header of the sdk, and only those.
want=$(cd sdk/include && ls trainyard/ops/*.h | grep -v '^trainyard/ops/families.h$' | sort)
have=$(sed -n 's|^#include "\(trainyard/ops/[^"]*\)"|\1|p' sdk/include/trainyard/ops.h | sort)
if [[ "$want" != "$have" ]]; then
  problem "sdk/include/trainyard/ops.h must include exactly the family headers of" \
    "sdk/include/trainyard/ops/: missing [$(comm -23 <(echo "$want") <(echo "$have") | tr '\n' ' ')]" \
    "extra [$(comm -13 <(echo "$want") <(echo "$have") | tr '\n' ' ')]"
fi

if ((fail)); then exit 1; fi
echo "PASS: ${#families[@]} op families, each in one list ($list)"
