#!/usr/bin/env bash
# check_task_neutral.sh fails on each kind of violation it is there for: a copy of core/,
# apps/trainyard/ and the source lists passes, then each planted violation in the copy fails it
# with its message.
# Usage: check_task_neutral_selftest.sh SOURCE_DIR
set -u
src=${1:?usage: check_task_neutral_selftest.sh SOURCE_DIR}
check="$src/tests/tree/check_task_neutral.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fresh_copy() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree/apps"
  cp -r "$src/core" "$work/tree/core"
  cp -r "$src/apps/trainyard" "$work/tree/apps/trainyard"
  mkdir -p "$work/tree/pkg" "$work/tree/backends" "$work/tree/plugins/tasks"
}

status=0
fresh_copy
if ! out=$(bash "$check" "$work/tree" 2>&1); then
  echo "FAIL: the unchanged copy does not pass: $out"
  status=1
fi

# shellcheck source=planted.sh
source "$src/tests/tree/planted.sh"

plant "a task's model class in the core" core/src/train/training_loop.cc \
  'static const char* kModel = "SSDMetaArch";' "core/src/train/training_loop.cc names a task"
plant "a task's config message in the host" apps/trainyard/train_command.cc \
  'static void probe(const trainyard::od::TrainEvalPipelineConfig&) {}' \
  "apps/trainyard/train_command.cc names a task"
plant "a task's feature in the host's flags" apps/trainyard/command_flags.cc \
  'static const char* kNames = "mean_rgb";' "apps/trainyard/command_flags.cc names a task"
plant "a task's name in a config proto" core/proto/pipeline.proto \
  'message Probe { optional string task = 1 [default = "detection"]; }' \
  "core/proto/pipeline.proto names a task"
plant "a task's source outside plugins/tasks" core/src/train/ranking_task.cc \
  '// a task' "core/src/train/ranking_task.cc is a task's source outside plugins/tasks/"
# A comment may name a task.
fresh_copy
printf '%s\n' '// unlike the yt8m task, this one needs no SSDMetaArch' \
  >>"$work/tree/core/src/train/training_loop.cc"
if ! out=$(bash "$check" "$work/tree" 2>&1); then
  echo "FAIL: a comment naming a task failed the check: $out"
  status=1
fi

if [[ $status -eq 0 ]]; then echo "PASS: every planted violation fails the check"; fi
exit $status
