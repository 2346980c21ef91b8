#!/bin/sh
# The wait policy the cpu backend's OpenMP threads get (core/include/trainyard/core/
# compute_threads.h), as libgomp itself reports it (OMP_DISPLAY_ENV=verbose, printed when the
# cpu backend plugin loads libgomp): the host bounds the spinning by default, and a user's
# OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
#
#   compute_thread_wait.sh HOST SPIN_COUNT
host=$1
spin=$2
status=0
case $spin in
  '' | *[!0-9]*) echo "FAIL: no spin count given (compute_threads.h's kComputeThreadSpinCount)"; exit 1 ;;
esac

check() {  # NAME EXPECTED-LINE... -- ENV...
  name=$1
  shift
  expected=""
  while [ "$1" != "--" ]; do
    expected="$expected$1
"
    shift
  done
  shift
  shown=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$@" \
    "$host" plugins describe cpu 2>&1 | grep -E "^ *(OMP_WAIT_POLICY|GOMP_SPINCOUNT) = ")
  for line in $(printf '%s' "$expected" | tr ' ' '#'); do
    want=$(printf '%s' "$line" | tr '#' ' ')
    if ! printf '%s\n' "$shown" | grep -qxF "  $want"; then
      echo "FAIL: $name: libgomp did not show '$want'; it showed:"
      printf '%s\n' "$shown"
      status=1
      return
    fi
  done
  echo "PASS: $name"
}

check "the host's default" "GOMP_SPINCOUNT = '$spin'" --
check "the user's GOMP_SPINCOUNT" "GOMP_SPINCOUNT = '777'" -- GOMP_SPINCOUNT=777
check "the user's OMP_WAIT_POLICY=active" "OMP_WAIT_POLICY = 'ACTIVE'" \
  "GOMP_SPINCOUNT = '30000000000'" -- OMP_WAIT_POLICY=active
check "the user's OMP_WAIT_POLICY=passive" "GOMP_SPINCOUNT = '0'" -- OMP_WAIT_POLICY=passive
exit $status
