#!/usr/bin/env bash
# libtrainyard_core exports its contract only (issue 36, section 4): the dynamic symbols it
# defines (nm -D --defined-only, demangled) are checked against what core/exports.map lets out.
#
# It fails when
#  - there are more than MAX_SYMBOLS (1,500) defined dynamic symbols;
#  - a symbol names an internal generated message anywhere in its name: `trainyard::od::` (the
#    Object Detection API's pipeline and preprocessor messages), `trainyard::tf::` (TensorFlow's
#    file formats) or `onnx::` (the ONNX export's protos). A TRAINYARD_API function taking such
#    a message counts too: an application could not build its argument;
#  - a symbol is not Trainyard's own. Allowed are exactly
#      trainyard::...                          functions and variables of namespace trainyard
#      typeinfo / typeinfo name / vtable / VTT / construction vtable / guard variable for, and
#      (non-)virtual thunks to, trainyard::...
#      google::protobuf::Arena::CreateMaybeMessage<trainyard::config::...>   (what the inline
#                                              accessors of pipeline.pb.h call)
#      descriptor_table_pipeline_2eproto       (pipeline.pb.h's descriptor table)
#    where a template function's name is read after the return type the demangler prints first;
#    so any instantiation of a template of std::, __gnu_cxx::, boost:: or google::protobuf::
#    (weak copies that every object using them makes for itself) fails the check;
#  - `typeinfo for trainyard::Error` is missing: exceptions thrown by the core must be caught by
#    type in applications and plugins.
# Usage: check_core_exports.sh LIBTRAINYARD_CORE [MAX_SYMBOLS]
set -u -o pipefail
lib=${1:?usage: check_core_exports.sh LIBTRAINYARD_CORE [MAX_SYMBOLS]}
max=${2:-1500}
[[ -f "$lib" ]] || { echo "FAIL: $lib does not exist"; exit 1; }

symbols=$(nm -D --defined-only -C "$lib" | sed -E 's/^[0-9a-fA-F]* *[A-Za-z] //') || {
  echo "FAIL: nm -D could not read $lib"
  exit 1
}
count=$(printf '%s\n' "$symbols" | grep -c .)
status=0
fail() {
  echo "FAIL: $*"
  status=1
}

echo "$lib: $count defined dynamic symbols"
printf '%s\n' "$symbols" | sed -E 's/^(typeinfo name|typeinfo|vtable|VTT|guard variable) for //' |
  grep -oE '^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)?' | sort | uniq -c | sort -rn |
  head -12

((count > max)) && fail "$count defined dynamic symbols, over the limit of $max"

hidden=$(printf '%s\n' "$symbols" | grep -E '(^|[^A-Za-z0-9_:])(trainyard::od|trainyard::tf|onnx)::')
[[ -n "$hidden" ]] &&
  fail "$(printf '%s\n' "$hidden" | wc -l) symbols name hidden messages" \
    "(trainyard::od::, trainyard::tf::, onnx::):" &&
  printf '%s\n' "$hidden" | head -20

# Each symbol's subject: its name less "typeinfo for" and the like, and less the return type that
# the demangler prints first for a template function ("trainyard::Tensor*
# std::__do_uninit_copy<...>" is an instantiation of std::, not Trainyard's).
subjects() {
  local prefix='(typeinfo name|typeinfo|vtable|VTT|guard variable) for '
  prefix+='|(non-)?virtual thunk to |construction vtable for .*-in-'
  sed -E "s/^($prefix)//" |
    awk '{
      n = $0; p = index(n, "("); head = p ? substr(n, 1, p - 1) : n
      depth = 0; last = 0
      for (i = 1; i <= length(head); i++) {
        c = substr(head, i, 1)
        if (c == "<") depth++; else if (c == ">") depth--; else if (c == " " && depth == 0) last = i
      }
      print (last ? substr(n, last + 1) : n) "\t" $0
    }'
}
foreign=$(printf '%s\n' "$symbols" | subjects |
  grep -vE '^(trainyard::|google::protobuf::Arena::CreateMaybeMessage<trainyard::config::'$(
    )'|descriptor_table_pipeline_2eproto'$'\t'')' |
  cut -f2)
[[ -n "$foreign" ]] &&
  fail "$(printf '%s\n' "$foreign" | wc -l) symbols are not Trainyard's own" \
    "(template instantiations of std::, boost::, ...):" &&
  printf '%s\n' "$foreign" | head -20

# A here-string, not a pipe: grep -q stops reading at the match, and with pipefail the writer's
# SIGPIPE would fail the check.
grep -qx 'typeinfo for trainyard::Error' <<<"$symbols" ||
  fail "typeinfo for trainyard::Error is not exported"

((status == 0)) && echo "PASS"
exit $status
