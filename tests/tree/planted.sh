# What the self-tests of the tree checks share (sourced, not run), on a fresh copy of the tree
# that the sourcing script's fresh_copy makes in $work/tree, checked by $check:
#   plant NAME FILE LINE MESSAGE   appends LINE to FILE and expects the check to fail saying
#                                  MESSAGE;
#   allow NAME FILE LINE           appends LINE to FILE and expects the check to pass;
#   finish                         says PASS when every expectation held, and exits.
# An expectation that does not hold says FAIL and sets status=1.
status=0

plant() {  # NAME FILE LINE_TO_APPEND EXPECTED_MESSAGE
  fresh_copy
  mkdir -p "$(dirname "$work/tree/$2")"
  printf '%s\n' "$3" >>"$work/tree/$2"
  if out=$(bash "$check" "$work/tree" 2>&1); then
    echo "FAIL: planted $1 ($3 in $2) passed the check"
    status=1
  elif ! grep -qF -- "$4" <<<"$out"; then
    echo "FAIL: planted $1 failed without saying '$4': $out"
    status=1
  else
    echo "ok: planted $1 fails: $(grep -F -- "$4" <<<"$out" | head -1)"
  fi
}

allow() {  # NAME FILE LINE_TO_APPEND
  fresh_copy
  printf '%s\n' "$3" >>"$work/tree/$2"
  if ! out=$(bash "$check" "$work/tree" 2>&1); then
    echo "FAIL: $1 ($3 in $2) failed the check: $out"
    status=1
  fi
}

finish() {
  if [[ $status -eq 0 ]]; then echo "PASS: every planted violation fails the check"; fi
  exit $status
}
