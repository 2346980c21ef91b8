#!/bin/bash
# Several hosts on one machine (issue 41): two network namespaces joined by a veth pair are two
# "hosts", hostA (10.77.0.1) and hostB (10.77.0.2). `mpirun -H hostA,hostB -np 2` runs in hostA's
# namespace and starts its daemons through netns_agent.sh (plm_rsh_agent), which enters the
# host's namespace as ssh would log in to it; Open MPI's TCP transport (btl tcp,self) and its
# out-of-band channel use the veth link only. train_dir is shared through the filesystem.
#  (a) the two hosts train to what one process trains on the concatenated batches (the eval's
#      GAP and loss within 1e-4, as distributed.sh), and the gradients crossed the link;
#  (b) hostB's link cut while training (`ip link set ... down`) stops the job within the
#      collective timeout (--MpiCollective.timeout_secs) with an error naming rank 1, mpirun
#      exits non-zero, and the last checkpoint in train_dir evaluates and resumes.
# The namespaces (unique names per run) are created here and removed on exit. Without the
# privilege to create them (root or CAP_NET_ADMIN) the test skips (77), saying why.
#
# usage: multihost_netns.sh TRAINYARD MPIRUN WORKDIR
set -u
host=$1 mpirun=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
agent=$here/netns_agent.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset TF_CONFIG

skip() {
  echo "SKIP: $*"
  exit 77
}
for tool in ip unshare; do
  if ! command -v "$tool" >/dev/null; then
    # packaging/test-depends installs them: under CI their absence is a failure.
    [ "${CI:-}" = true ] && { echo "FAIL: '$tool' is not installed (iproute2, util-linux)"; exit 1; }
    skip "'$tool' is not installed (iproute2, util-linux)"
  fi
done

# Unique per run: the pid and a random suffix (names of at most 15 characters for the links).
tag=$$$RANDOM
tag=${tag: -8}
ns_a=tyA$tag ns_b=tyB$tag link_a=tyA$tag link_b=tyB$tag
cleanup() {
  local ns pid
  for ns in "$ns_a" "$ns_b"; do
    # The daemons and ranks still inside (a cut link can leave hostB's behind), then the
    # namespace; the veth pair goes with it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns delete "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
if ! why=$(ip netns add "$ns_a" 2>&1); then
  skip "cannot create a network namespace (needs root or CAP_NET_ADMIN; running as uid $(id -u)): $why"
fi
if ! why=$( (ip netns add "$ns_b" &&
  ip link add "$link_a" netns "$ns_a" type veth peer name "$link_b" netns "$ns_b" &&
  ip -n "$ns_a" addr add 10.77.0.1/24 dev "$link_a" &&
  ip -n "$ns_b" addr add 10.77.0.2/24 dev "$link_b" &&
  for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up || exit 1; done &&
  ip -n "$ns_a" link set "$link_a" up && ip -n "$ns_b" link set "$link_b" up &&
  for ns in "$ns_a" "$ns_b"; do
    ip netns exec "$ns" sh -c 'echo 4 >/proc/sys/net/ipv4/tcp_retries2' || exit 1
  done) 2>&1); then
  skip "cannot join two network namespaces by a veth pair: $why"
fi
# net.ipv4.tcp_retries2 is set in the namespaces only (the machine's own is untouched): once
# the ranks have stopped, mpirun waits for hostB's daemon over the cut link until TCP gives up on
# it, some 15 minutes at Linux's default of 15 retransmissions, some 13 s at 4
# (docs/distributed_and_gpus.md).
# Until both ends report the link up.
for _ in $(seq 50); do
  ip -n "$ns_a" link show "$link_a" | grep -q "state UP" &&
    ip -n "$ns_b" link show "$link_b" | grep -q "state UP" && break
  sleep 0.1
done
export TRAINYARD_NETNS_HOSTS="hostA=$ns_a hostB=$ns_b"

rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# mpirun on hostA and hostB, started in hostA's namespace, over the veth link only.
# shellcheck disable=SC2054 # -H takes a comma-separated list
hosts_mpirun=(ip netns exec "$ns_a" "$mpirun" -H hostA,hostB -np 2 --mca plm_rsh_agent "$agent"
  --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24)
# link_bytes: the bytes hostB's end of the link has sent.
link_bytes() { ip netns exec "$ns_b" cat "/sys/class/net/$link_b/statistics/tx_bytes"; }

"$host" data synth-yt8m --output_dir data --num_videos 640 --num_classes 10 >synth.log 2>&1 ||
  fail "synth-yt8m: $(tail -n 3 synth.log)"
# One file that two replicas split by record, as in distributed.sh.
mkdir -p one
cat data/train-*.tfrecord >one/train.tfrecord
cat >input.config <<'CONFIG'
train_input_reader { shuffle: false deterministic: true num_readers: 1 num_epochs: 0 }
CONFIG
common=(--pipeline_config_path input.config --train_data_pattern "$work/one/train.tfrecord"
  --num_classes 10 --feature_names mean_rgb --feature_sizes 1024 --seed 7
  --log_every_n_steps 5 --export_model_steps 1000000 --model MoeModel)
eval_line() {
  "$host" eval --train_dir "$1" --eval_data_pattern 'data/validate-*.tfrecord' --run_once \
    --num_readers 1 --batch_size 64 2>&1 | grep -E "GAP|gap" | tail -n 1
}
number() { echo "$2" | sed -E "s/.*$1[^0-9-]*(-?[0-9.e+-]+).*/\1/"; }
close() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'; }

# --- (a) 2 hosts of batch 8 == 1 process of 16 ---
before=$(link_bytes)
timeout 120 "${hosts_mpirun[@]}" "$host" train "${common[@]}" --train_dir "$work/two" --batch_size 8 \
  --max_steps 20 >two.log 2>&1 || fail "mpirun -H hostA,hostB train: $(tail -n 8 two.log)"
after=$(link_bytes)
grep -q "data parallel: 2 replicas of batch_size 8" two.log ||
  fail "the chief does not log 2 replicas: $(head -n 5 two.log)"
# MoeModel's gradients are some 100 KB a step: 20 steps send megabytes from hostB.
sent=$((after - before))
echo "hostB sent $sent bytes over the veth link during the 20 steps"
[ "$sent" -gt 1000000 ] || fail "hostB sent only $sent bytes over its link: the ranks did not talk through it"
timeout 120 "$host" train "${common[@]}" --train_dir single --batch_size 16 --max_steps 20 \
  >single.log 2>&1 || fail "single process train: $(tail -n 5 single.log)"
two_eval=$(eval_line two)
single_eval=$(eval_line single)
echo "2 hosts:   $two_eval"
echo "1 process: $single_eval"
for metric in GAP Loss; do
  a=$(number "$metric" "$two_eval") b=$(number "$metric" "$single_eval")
  if [ -z "$a" ] || [ -z "$b" ] || ! close "$a" "$b" 1e-4; then
    fail "$metric of 2 hosts ($a) differs from one process on the concatenated batch ($b)"
  fi
done

# --- (b) hostB's link cut while training ---
timeout_secs=3
timeout 120 "${hosts_mpirun[@]}" "$host" train "${common[@]}" --train_dir "$work/cut" --batch_size 8 \
  --max_steps 100000 --save_interval_secs 0.2 --MpiCollective.timeout_secs=$timeout_secs \
  >cut.log 2>&1 &
job=$!
for _ in $(seq 600); do
  ls cut/model.ckpt-*.index >/dev/null 2>&1 && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if ls cut/model.ckpt-*.index >/dev/null 2>&1 && kill -0 "$job" 2>/dev/null; then
  sleep 0.5
  ip -n "$ns_b" link set "$link_b" down || fail "could not set hostB's link down"
  start=$SECONDS
  wait "$job"
  status=$?
  took=$((SECONDS - start))
  echo "the job stopped $took s after hostB's link was cut (exit $status)"
  [ "$status" -ne 0 ] || fail "the job whose link was cut exited 0"
  [ "$status" -ne 124 ] || fail "the job did not stop after hostB's link was cut (killed by timeout)"
  # timeout_secs without progress, at most as long listening for the other ranks, then
  # mpirun's few seconds of retransmissions to hostB's daemon (tcp_retries2 above), with room
  # for a loaded machine.
  [ "$took" -le $((2 * timeout_secs + 45)) ] ||
    fail "the job took $took s to stop (timeout_secs $timeout_secs)"
  grep -q "rank 1 never reached it" cut.log ||
    fail "the chief's error does not name rank 1: $(grep -i error cut.log | head -n 3)"
  # The last checkpoint is whole: it evaluates, and training resumes from it.
  latest=$(sed -nE 's/^model_checkpoint_path: "(.*)"/\1/p' cut/checkpoint)
  [ -n "$latest" ] || fail "no checkpoint recorded in cut/checkpoint: $(cat cut/checkpoint)"
  step=${latest##*-}
  [ -n "$(eval_line cut)" ] || fail "the last checkpoint ($latest) does not evaluate"
  timeout 120 "$host" train "${common[@]}" --train_dir cut --batch_size 16 \
    --max_steps $((step + 1)) >cut_resume.log 2>&1 ||
    fail "training from the last checkpoint: $(tail -n 5 cut_resume.log)"
  grep -q "restoring from cut/${latest##*/} at step $step" cut_resume.log ||
    fail "the resumed run did not restore $latest: $(head -n 3 cut_resume.log)"
else
  fail "no checkpoint before the cut: $(tail -n 5 cut.log)"
  kill "$job" 2>/dev/null
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "multihost_netns: all checks passed"
