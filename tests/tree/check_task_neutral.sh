#!/usr/bin/env bash
# The trainer's step, loop, hooks, evaluator and exporter know no task (issue 11, section 4):
# no YouTube-8M name, reader class name or metric name outside comments. What is specific to
# the YouTube-8M seed lives in core/src/tasks/yt8m_task.cc.
# Usage: check_task_neutral.sh SOURCE_DIR
set -u
src=${1:?usage: check_task_neutral.sh SOURCE_DIR}
files=(
  core/include/trainyard/core/train_step.h core/src/train_step.cc
  core/include/trainyard/core/training_loop.h core/src/training_loop.cc
  core/src/train_hooks.h core/src/train_hooks.cc
  core/include/trainyard/core/evaluator.h core/src/evaluator.cc
  core/include/trainyard/core/exporter.h core/src/exporter.cc
)
pattern='yt8m|YT8M|YouTube|Hit@1|PERR|"GAP"|mAP|model_flags|FeatureReader|Logistic|Moe'
status=0
for f in "${files[@]}"; do
  if [[ ! -f "$src/$f" ]]; then
    echo "missing $f (update tests/tree/check_task_neutral.sh when the trainer's files move)"
    status=1
    continue
  fi
  # Code lines only: drop whole-line comments and trailing // comments.
  hits=$(sed -e 's#^[[:space:]]*//.*$##' -e 's#[[:space:]]//.*$##' "$src/$f" | grep -nE "$pattern")
  if [[ -n "$hits" ]]; then
    echo "$f names a task (move it into core/src/tasks/):"
    echo "$hits"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "trainer files are task-neutral (${#files[@]} files)"
exit $status
