# shellcheck shell=bash
# check_tree: the checks scripts/test.sh makes of the files of the checkout it runs in (a git
# checkout; elsewhere it checks nothing). Source it, then call check_tree DIR; it prints what is
# wrong and returns 1, or returns 0.
GOIMPORTS_VERSION=v0.52.0
MODULE=github.com/pseudotrigger/pseudotrigger
MAX_TRACKED_BYTES=1048576

# _groups (awk) prints each Go file whose (first) import block's groups are not the standard
# library, third-party modules, then the module, one group each, in that order.
_groups='
  FNR == 1 { block = 0; done = 0; last = 0; cur = 0; bad = 0 }
  /^import \($/ && !done { block = 1; next }
  block && /^\)/ { block = 0; done = 1; if (bad) print FILENAME; next }
  block && /^[[:space:]]*$/ { if (cur) last = cur; cur = 0; next }
  block && /"/ {
    path = $0; sub(/^[^"]*"/, "", path); sub(/".*/, "", path)
    first = path; sub(/\/.*/, "", first)
    class = index(path, module) == 1 ? 3 : (index(first, ".") ? 2 : 1)
    if ((cur && class != cur) || (!cur && class <= last)) bad = 1
    cur = class
  }'

# _present CMD...: the NUL-separated file names CMD prints that are files in the work tree (a
# tracked file deleted and not yet committed is not).
_present() {
  local f
  "$@" | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
}

check_tree() {
  local dir=$1 bad=0 out
  git -C "$dir" rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  # Imports in three groups: the standard library, third-party modules, this module. goimports
  # sorts within a group and moves a stray import into a group of its own; _groups finds groups
  # out of that order or split in two.
  out=$(cd "$dir" && {
    _present git ls-files -z '*.go' | xargs -0 -r go run "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION" -local "$MODULE" -l
    _present git ls-files -z '*.go' | xargs -0 -r awk -v module="$MODULE" "$_groups"
  } | sort -u | tr '\n' ' ' | sed 's/ $//') || return 1
  if [ -n "$out" ]; then
    echo "imports not grouped as the standard library, third-party modules, then $MODULE, or not as goimports formats them (goimports -local $MODULE -w FILE; then merge the groups it leaves):" $out
    bad=1
  fi
  # No tracked file over 1 MB: a build output (a binary, a coverage profile) that a commit took in.
  out=$(cd "$dir" && _present git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk -v max="$MAX_TRACKED_BYTES" '$1 > max { n = $1; sub(/^[0-9]+ /, ""); print $0 " (" n " bytes)" }')
  if [ -n "$out" ]; then
    echo "tracked files over 1 MB (a build output? git rm --cached it and add it to .gitignore): $out"
    bad=1
  fi
  return "$bad"
}
