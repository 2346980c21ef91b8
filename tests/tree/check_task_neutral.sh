#!/usr/bin/env bash
# The core and the host know no task (issue 36, section 1): no task's name, class, reader, metric
# or file in their code lines (comments aside), and every task-specific source lives with its
# task under plugins/tasks/ (or pkg/ for the building blocks a task shares). A file that is not
# yet task-neutral would be listed below with what moves it; a file there that no longer names a
# task fails too, so the list only shrinks.
# Usage: check_task_neutral.sh SOURCE_DIR
set -u
src=${1:?usage: check_task_neutral.sh SOURCE_DIR}
cd "$src" || exit 2

pattern='yt8m|YT8M|YouTube|Hit@1|PERR|"GAP"|model_flags|FeatureReader|Logistic|Moe|lenet|'
pattern+='SSDMetaArch|FasterRCNN|DetectionReader|ImageClassificationReader|coco_detection|'
pattern+='"classification"|"detection"|mean_rgb|[^a-z_]od::|trainyard\.od\.|TrainEvalPipelineConfig'

# Not yet task-neutral, and why (empty: none).
declare -A pending=()

# The host's dataset tools write and read the originals' file formats (synth-yt8m's TFRecords,
# coco-eval's COCO JSON) and drive no task: not checked.
tools='^apps/trainyard/(data_command|data_tools|synth_shapes|coco_eval_command)\.(cc|h)$'

status=0
checked=0
while IFS= read -r -d '' f; do
  [[ "$f" =~ $tools ]] && continue
  checked=$((checked + 1))
  # Code lines only: drop whole-line comments and trailing // comments.
  hits=$(sed -e 's#^[[:space:]]*//.*$##' -e 's#[[:space:]]//.*$##' "$f" | grep -nE "$pattern")
  if [[ -n "${pending[$f]+x}" ]]; then
    if [[ -z "$hits" ]]; then
      echo "$f names no task any more: remove it from the pending list of $0"
      status=1
    fi
    continue
  fi
  if [[ -n "$hits" ]]; then
    echo "$f names a task (move it into its task under plugins/tasks/):"
    echo "$hits"
    status=1
  fi
done < <(find core apps/trainyard -type f \( -name '*.cc' -o -name '*.h' -o -name '*.proto' \) \
  -print0 | sort -z)

# A task's own sources sit with the task.
while IFS= read -r f; do
  echo "$f is a task's source outside plugins/tasks/"
  status=1
done < <(find core apps pkg backends plugins -type f \( -name '*_task.cc' -o -name '*_task.h' \) \
  -not -path 'plugins/tasks/*')

for f in "${!pending[@]}"; do
  [[ -f "$f" ]] || { echo "pending file $f is gone: update $0"; status=1; }
done
[[ $status -eq 0 ]] &&
  echo "core and host are task-neutral ($checked files; ${#pending[@]} pending, listed in $0)"
exit $status
