#!/usr/bin/env bash
# The `doc_commands` test: the shell commands README.md and docs/*.md show are commands that
# work with this build, not text that drifts.
#
# Every ```sh block carries a marker on the line before it, and this script treats it so:
#   <!-- test: run -->     the block runs as written, `set -euo pipefail`, in a scratch
#                          directory holding links to the checkout's configs/, docs/, sdk/, tests/
#                          and packaging/ and `build` (the build tree), with the build's bin/ first
#                          on PATH and every `/tmp/` in the block moved under the scratch
#                          directory. Such blocks must take seconds.
#   <!-- test: check -->   each `trainyard` (or `build/bin/trainyard`) command in it is checked
#                          without doing its work: `train` and `train_and_evaluate` run with
#                          --print_config added (flags, config, plugins and class options
#                          checked, nothing trained); every other command must exist and accept
#                          each --flag given (its --help lists it). Lines that are not trainyard
#                          commands (apt-get, cmake, cpack, mpirun's own arguments) are not run.
#   <!-- test: flags -->   as check, but `train` and `train_and_evaluate` too are checked by
#                          their --help only (for commands with placeholders such as a config F).
#   <!-- command: tests --> README.md's test command: it must be, line for line, the command
#                          at the end of .ci/run (after "# The README's test command:").
# A ```sh block without a marker fails the test, and so does a relative link to a file that
# does not exist, and a README.md longer than 150 lines (it is the landing page; the rest
# belongs in docs/).
#
#   check_doc_commands.sh SOURCE_DIR BUILD_DIR
set -uo pipefail

src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
trainyard=$build/bin/trainyard
[ -x "$trainyard" ] || { echo "FAILED: $trainyard is not built" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/doc_commands.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
for d in configs docs sdk tests packaging; do ln -s "$src/$d" "$scratch/$d"; done
ln -s "$build" "$scratch/build"
mkdir -p "$scratch/tmp"
export PATH="$build/bin:$PATH"

status=0
fail() {
  echo "FAILED: $*" >&2
  status=1
}
ran=0
checked=0
compared=0

# The README's test command against .ci/run's last command.
readme_tests=""
ci_tests=$(sed -n "/^# The README's test command:\$/,\$p" "$src/.ci/run" | tail -n +2)

# `trainyard ARGS` checked without doing its work ($1: check or flags, $2: the command from
# `trainyard` on, $3: where it is shown).
check_trainyard_command() {
  local mode=$1 cmd=$2 where=$3
  local -a words
  read -ra words <<<"$cmd"
  local sub=${words[1]:-}
  [ -n "$sub" ] || { fail "$where: a trainyard command without a command"; return; }
  local -a subcommand=("$sub")
  case "$sub" in
    data | plugins | config) subcommand+=("${words[2]:-}") ;;
  esac
  if [ "$mode" = check ] && { [ "$sub" = train ] || [ "$sub" = train_and_evaluate ]; }; then
    local out
    if ! out=$(cd "$scratch" && bash -c "${cmd/#build\/bin\/trainyard/trainyard} --print_config" 2>&1 </dev/null); then
      fail "$where: \`$cmd --print_config\` failed:"$'\n'"$(tail -n 5 <<<"$out")"
    else
      echo "checked $where: ${cmd/#build\/bin\/trainyard/trainyard} --print_config"
    fi
    checked=$((checked + 1))
    return
  fi
  local help
  if ! help=$("$trainyard" "${subcommand[@]}" --help 2>&1 </dev/null); then
    fail "$where: \`trainyard ${subcommand[*]} --help\` failed:"$'\n'"$(tail -n 5 <<<"$help")"
    return
  fi
  local flag
  for flag in $(grep -oE '(^|[[:space:]])--[A-Za-z0-9_.]+' <<<"$cmd" | tr -d '[:space:]' | sed 's/--/ --/g'); do
    if ! grep -qE -- "(^|[^A-Za-z0-9_.-])${flag//./\\.}([^A-Za-z0-9_.]|\$)" <<<"$help"; then
      fail "$where: \`trainyard ${subcommand[*]}\` does not take $flag (its --help does not list it)"
    fi
  done
  echo "checked $where: the flags of trainyard ${subcommand[*]}"
  checked=$((checked + 1))
}

# A block's text with continuations joined, one command line per line.
join_lines() {
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' <<<"$1"
}

check_block() {
  local mode=$1 block=$2 where=$3
  local line segment
  while IFS= read -r line; do
    line=$(sed -E 's/[[:space:]]+#.*$//; s/^#.*$//' <<<"$line")
    # Split the line at && and ;, then take each part from its `trainyard` word on.
    while IFS= read -r segment; do
      if [[ "$segment" =~ (^|[[:space:]])((build/bin/)?trainyard([[:space:]].*)?)$ ]]; then
        check_trainyard_command "$mode" "${BASH_REMATCH[2]}" "$where"
      fi
    done < <(sed -e 's/&&/\n/g; s/;/\n/g' <<<"$line")
  done < <(join_lines "$block")
}

run_block() {
  local block=$1 where=$2 out
  block=${block//\/tmp\//$scratch/tmp/}
  if ! out=$(cd "$scratch" && timeout 300 bash -euo pipefail -c "$block" 2>&1 </dev/null); then
    fail "$where: the block failed:"$'\n'"$(tail -n 15 <<<"$out")"
  else
    echo "ran $where"
  fi
  ran=$((ran + 1))
}

docs=("$src/README.md" "$src"/docs/*.md)
for doc in "${docs[@]}"; do
  rel=${doc#"$src"/}
  marker=""
  in_block=no
  block=""
  start=0
  line_no=0
  while IFS= read -r line || [ -n "$line" ]; do
    line_no=$((line_no + 1))
    if [ "$in_block" = yes ]; then
      if [[ "$line" == '```' ]]; then
        in_block=no
        case "$marker" in
          run) run_block "$block" "$rel:$start" ;;
          check | flags) check_block "$marker" "$block" "$rel:$start" ;;
          command-tests)
            compared=$((compared + 1))
            if [ "$rel" != README.md ]; then
              fail "$rel:$start: the tests command is README.md's"
            elif [ "$block" != "$ci_tests" ]; then
              fail "$rel:$start: README's test command is not .ci/run's:"$'\n'"$(diff <(echo "$block") <(echo "$ci_tests"))"
            fi
            readme_tests=$block
            ;;
          *) fail "$rel:$start: a \`\`\`sh block without a <!-- test: run|check|flags --> marker" ;;
        esac
        marker=""
      else
        block+="${block:+$'\n'}$line"
      fi
    elif [[ "$line" =~ ^\<!--\ test:\ (run|check|flags)\ --\>$ ]]; then
      marker=${BASH_REMATCH[1]}
    elif [[ "$line" == '<!-- command: tests -->' ]]; then
      marker=command-tests
    elif [[ "$line" == '```sh' ]]; then
      in_block=yes
      block=""
      start=$line_no
    elif [ -n "$line" ]; then
      marker=""
    fi
  done <"$doc"

  # Relative links resolve.
  dir=$(dirname "$doc")
  while IFS= read -r target; do
    target=${target%%#*}
    [ -z "$target" ] && continue
    [ -e "$dir/$target" ] || fail "$rel: the link to $target leads nowhere"
  done < <(grep -oE '\]\([^)]+\)' "$doc" | sed -E 's/^\]\((.*)\)$/\1/' | grep -vE '^[a-z]+:')
done

readme_lines=$(wc -l <"$src/README.md")
[ "$readme_lines" -le 150 ] ||
  fail "README.md has $readme_lines lines; it is a landing page of at most 150 (move the rest to docs/)"
[ -n "$readme_tests" ] || fail "README.md has no <!-- command: tests --> block"
[ -n "$ci_tests" ] || fail ".ci/run has no command after \"# The README's test command:\""
[ "$ran" -gt 0 ] && [ "$checked" -gt 0 ] || fail "no blocks run ($ran) or commands checked ($checked)"
[ "$status" = 0 ] &&
  echo "doc_commands: $ran blocks ran, $checked trainyard commands checked, README's test command is .ci/run's"
exit "$status"
