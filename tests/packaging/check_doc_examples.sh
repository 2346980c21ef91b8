#!/usr/bin/env bash
# The `doc_examples` test: the code the author docs show is the template's code, not a copy that
# can drift. Every fenced block that follows a line `<!-- example: template_plugin.cc -->` in
# sdk/docs/CONTRACT.md, README.md and docs/*.md must appear, line for line and contiguous, in
# sdk/template/template_plugin.cc (which tests/packaging builds, checks with
# trainyard-conformance and trains against the installed packages). Likewise a block after
# `<!-- example: run_export.c -->` must be in apps/infer/examples/run_export.c (the C inference
# library's example, which the tests run and tests/packaging builds against the packages).
#
#   check_doc_examples.sh SOURCE_DIR
set -euo pipefail

src=$1
template_file=$src/sdk/template/template_plugin.cc
template=$(<"$template_file")
infer_example_file=$src/apps/infer/examples/run_export.c
infer_example=$(<"$infer_example_file")
status=0
checked=0
for doc in "$src/sdk/docs/CONTRACT.md" "$src/README.md" "$src"/docs/*.md; do
  in_block=no
  want=no
  block=""
  start=0
  line_no=0
  while IFS= read -r line || [ -n "$line" ]; do
    line_no=$((line_no + 1))
    if [ "$in_block" = yes ]; then
      if [[ "$line" == '```' ]]; then
        in_block=no
        checked=$((checked + 1))
        if [[ "$source" != *"$block"* ]]; then
          echo "FAILED: ${doc#"$src"/}:$start: this example is not in ${source_file#"$src"/} as it" \
               "is shown; copy it from there again (or change both)" >&2
          status=1
        fi
      else
        block+="${block:+$'\n'}$line"
      fi
    elif [[ "$line" == '<!-- example: template_plugin.cc -->' ]]; then
      want=yes
      source=$template
      source_file=$template_file
    elif [[ "$line" == '<!-- example: run_export.c -->' ]]; then
      want=yes
      source=$infer_example
      source_file=$infer_example_file
    elif [ "$want" = yes ] && [[ "$line" == '```'* ]]; then
      in_block=yes
      want=no
      block=""
      start=$line_no
    fi
  done <"$doc"
done
[ "$checked" -gt 0 ] || { echo "FAILED: no example blocks found" >&2; exit 1; }
[ "$status" = 0 ] && echo "doc_examples: $checked examples match their sources"
exit "$status"
