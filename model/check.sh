#!/usr/bin/env bash
# Checks the model (model/lease.pml) with spin, then the negative controls, which must fail.
# Prints spin's state counts and, for the controls, the first steps of their trails.
set -euo pipefail
cd "$(dirname "$0")"
command -v spin >/dev/null || { echo "spin is not installed (Debian: apt-get install spin)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "gcc is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp lease.pml "$work/"
cd "$work"

verify() { # verify NAME DEFINES...: compile and run pan; prints its summary; returns pan's verdict
  local name=$1; shift
  rm -f pan* lease.pml.trail
  spin "$@" -a lease.pml >/dev/null
  gcc -O2 -DVECTORSZ=2048 -DCOLLAPSE -o pan pan.c 2>/dev/null
  ./pan -a -m2000000 -N mutex >"$name.out" 2>&1 || true
  local errors states
  errors=$(awk '/errors:/ {print $NF}' "$name.out" | tail -1)
  states=$(awk '/states, stored/ {print $1}' "$name.out" | tail -1)
  printf '%-28s errors: %s  states stored: %s\n' "$name" "$errors" "$states"
  [ "$errors" = 0 ]
}

echo "spin $(spin -V | awk '{print $3}')"
verify "model (-N mutex + asserts)" || { cat model*.out >&2; echo "the model FAILED" >&2; exit 1; }
for control in NO_CAS PREEMPT; do
  if verify "control -D$control" -D"$control"; then
    echo "negative control -D$control was NOT refuted: the model cannot tell" >&2
    exit 1
  fi
  echo "  trail (spin -t -p, first steps):"
  spin -t -p -D"$control" lease.pml 2>/dev/null | grep -E "proc .*(Worker|Clock)|assertion violated|acceptance cycle" | head -8 | sed 's/^/    /'
done
echo "model checked; both negative controls refuted"
