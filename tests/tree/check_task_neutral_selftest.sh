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

# shellcheck source=planted.sh
source "$src/tests/tree/planted.sh"

allow "the copy as it is (and a blank line)" core/src/train/training_loop.cc ''

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
allow "a comment naming a task" core/src/train/training_loop.cc \
  '// unlike the yt8m task, this one needs no SSDMetaArch'
finish
