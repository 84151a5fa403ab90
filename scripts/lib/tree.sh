# shellcheck shell=bash
# check_tree: the checks scripts/test.sh makes of the files of the checkout it runs in (a git
# checkout; elsewhere it checks nothing). Source it, then call check_tree DIR; it prints what is
# wrong and returns 1, or returns 0.
GOIMPORTS_VERSION=v0.52.0
MODULE=github.com/pseudotrigger/pseudotrigger
MAX_TRACKED_BYTES=1048576

# _present CMD...: the NUL-separated file names CMD prints that are files in the work tree (a
# tracked file deleted and not yet committed is not).
_present() {
  local f
  "$@" | while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done
}

check_tree() {
  local dir=$1 bad=0 out
  git -C "$dir" rev-parse --is-inside-work-tree >/dev/null 2>&1 || return 0
  # Imports in three groups: the standard library, third-party modules, this module.
  out=$(cd "$dir" && _present git ls-files -z '*.go' | xargs -0 -r go run "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION" -local "$MODULE" -l) || return 1
  if [ -n "$out" ]; then
    echo "imports not grouped as the standard library, third-party modules, then $MODULE (goimports -local $MODULE -w FILE moves them; merge the groups it leaves):" $out
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
