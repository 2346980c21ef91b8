#!/bin/sh
# plm_rsh_agent for multihost_netns.sh: Open MPI runs it as it would run ssh,
# `netns_agent.sh HOST COMMAND...`, to start its daemon on HOST. Here a host is a network
# namespace on this machine: TRAINYARD_NETNS_HOSTS maps each host name to one
# ("hostA=ns1 hostB=ns2"). The command runs, as ssh would run it, through a shell inside that
# namespace, with its own hostname (a UTS namespace) so that each "host" also looks like one.
host=$1
shift
ns=
for pair in $TRAINYARD_NETNS_HOSTS; do
  [ "${pair%%=*}" = "$host" ] && ns=${pair#*=}
done
if [ -z "$ns" ]; then
  echo "netns_agent.sh: host '$host' is not in TRAINYARD_NETNS_HOSTS ('$TRAINYARD_NETNS_HOSTS')" >&2
  exit 255
fi
# shellcheck disable=SC2016 # expanded by the inner shell
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
