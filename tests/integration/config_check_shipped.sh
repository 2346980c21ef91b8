#!/bin/sh
# `trainyard config check` of a shipped config passes. config check builds the run's parts, and
# the readers of the detection configs read their label maps: a config that names
# /tmp/synth_shapes (docs/object_detection.md's `trainyard data synth-shapes --output_dir /tmp/synth_shapes`)
# (or /tmp/synth_shapes_masks, written with --masks) is checked with its paths moved to a small
# synth-shapes set written here.
# usage: config_check_shipped.sh TRAINYARD CONFIG WORKDIR
set -eu
host=$1 config=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
checked=$config
if grep -q /tmp/synth_shapes "$config"; then
  # /tmp/synth_shapes_masks: the same with --masks (the Mask R-CNN recipe).
  masks=
  grep -q /tmp/synth_shapes_masks "$config" && masks=--masks
  "$host" data synth-shapes --output_dir "$work/data" --num_images 2 --num_val_images 1 \
    --image_size 32 --num_shards 1 $masks >"$work/synth.log" 2>&1 || { cat "$work/synth.log"; exit 1; }
  checked="$work/$(basename "$config")"
  sed -e "s|/tmp/synth_shapes_masks|$work/data|g" -e "s|/tmp/synth_shapes|$work/data|g" \
    "$config" >"$checked"
fi
"$host" config check "$checked"
