# shellcheck shell=bash
# run CMD ARGS...: runs the command, or with dry set (dry=1) prints it as `+ CMD ARGS...`, quoting
# the arguments a shell would need quoted. Shared by deploy.sh and publish.sh, so that a dry run
# prints exactly the commands a real run makes.
run() {
  if [ -n "${dry:-}" ]; then
    local a line="+"
    for a in "$@"; do
      case "$a" in
        *[!A-Za-z0-9_./:=@,+-]*|"") line="$line '$a'" ;;
        *) line="$line $a" ;;
      esac
    done
    printf '%s\n' "$line"
  else
    "$@"
  fi
}
