# What the self-tests of the tree checks share (sourced, not run): plant NAME FILE LINE MESSAGE
# appends LINE to FILE in a fresh copy of the tree (the sourcing script's fresh_copy, into
# $work/tree) and expects $check to fail on it saying MESSAGE; a planted violation that passes,
# or fails saying something else, sets status=1.

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
