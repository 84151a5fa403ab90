#!/usr/bin/env bash
# Looks for example values in a Bicep parameters file: the shipped example poller's server and
# database (contoso..., 'shop') and the EDIT-ME placeholders pollerctl new writes; comment lines do
# not count. Prints them to stderr and exits 1 when there are any, 0 when none, 2 on bad usage.
# Used by scripts/deploy.sh and by azd's preprovision hook (scripts/azd-preprovision.sh).
# Usage: scripts/check-params.sh FILE
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/check-params.sh FILE" >&2; exit 2; }
params=$1
[ -f "$params" ] || { echo "check-params.sh: parameters file $params not found" >&2; exit 2; }
examples=$(grep -n -E "contoso|database:[[:space:]]*'shop'|EDIT-ME" "$params" | grep -v -E '^[0-9]+:[[:space:]]*//' || true)
[ -n "$examples" ] || exit 0
{
  echo "$params still holds example values:"
  printf '%s\n' "$examples" | sed 's/^\([0-9]*\):[[:space:]]*/  line \1: /'
  echo "  Edit each poller's driver, server and database (or connection) to your own source."
} >&2
exit 1
