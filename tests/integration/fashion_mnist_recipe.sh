#!/bin/sh
# docs/classification.md's Fashion-MNIST recipe, as a user runs it: Debian's dataset-fashion-mnist converted
# with `trainyard data convert-mnist`, then configs/fashion_mnist_lenet.config trained and
# evaluated with train_and_evaluate; the test set's final accuracy must reach MIN_ACCURACY.
# Exits 77 (skipped) when the dataset package is not installed.
#
# usage: fashion_mnist_recipe.sh TRAINYARD SOURCE_DIR WORKDIR MIN_ACCURACY [FLAGS...]
set -eu
host=$1 source=$2 work=$3 min=$4
shift 4
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: $data not found (apt-get install dataset-fashion-mnist)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$host" data convert-mnist --images "$data/train-images-idx3-ubyte.gz" \
  --labels "$data/train-labels-idx1-ubyte.gz" --output "$work/train.tfrecord"
"$host" data convert-mnist --images "$data/t10k-images-idx3-ubyte.gz" \
  --labels "$data/t10k-labels-idx1-ubyte.gz" --output "$work/test.tfrecord"
sed -e "s|/tmp/fashion_mnist/|$work/|" -e "s|/tmp/fashion_mnist_lenet|$work/model|" \
  "$source/configs/fashion_mnist_lenet.config" >"$work/pipeline.config"
start=$(date +%s)
"$host" train_and_evaluate --pipeline_config_path="$work/pipeline.config" "$@" >"$work/log" 2>&1 ||
  { tail -n 30 "$work/log"; echo "FAIL: train_and_evaluate"; exit 1; }
end=$(date +%s)
grep "^Saving dict" "$work/log"
line=$(grep "^final evaluation at step" "$work/log") || { echo "FAIL: no final evaluation"; exit 1; }
accuracy=$(echo "$line" | sed -n 's/.* accuracy = \([0-9.]*\) .*/\1/p')
echo "$line ($((end - start)) s)"
if awk "BEGIN { exit !($accuracy >= $min) }"; then
  echo "PASS: test accuracy $accuracy >= $min"
else
  echo "FAIL: test accuracy $accuracy < $min"
  exit 1
fi
