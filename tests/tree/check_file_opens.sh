#!/usr/bin/env bash
# Every file a user names is opened through trainyard/user_file.h (open_user_file,
# read_user_file): a FIFO, directory or device refused before it is read, the size bounded. This
# fails on a std::ifstream, std::fstream or fopen in the product's sources (core, pkg, plugins,
# backends, apps), and on an ::open for reading without O_NONBLOCK (a FIFO would block in it)
# other than of a directory (O_DIRECTORY).
#
# usage: check_file_opens.sh SOURCE_DIR
set -u
root=$1
cd "$root" || exit 2
dirs=(core pkg plugins backends apps)
found=$(grep -rnE 'std::(i|)fstream[ <({]|\bfopen\(' --include='*.cc' --include='*.h' "${dirs[@]}")
opens=$(grep -rnE '::open\([^;]*O_RDONLY' --include='*.cc' --include='*.h' "${dirs[@]}" |
  grep -vE 'O_NONBLOCK|O_DIRECTORY')
status=0
if [ -n "$found" ]; then
  echo "FAIL: files opened for reading outside trainyard/user_file.h:"
  echo "$found"
  status=1
fi
if [ -n "$opens" ]; then
  echo "FAIL: ::open for reading without O_NONBLOCK (a FIFO blocks in it):"
  echo "$opens"
  status=1
fi
[ $status -eq 0 ] && echo "PASS: every file the product reads is opened through user_file.h"
exit $status
