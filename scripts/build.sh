#!/usr/bin/env bash
# Builds the custom handler to bin/handler for this machine, or for Azure with
#   GOOS=linux GOARCH=amd64 BUILD_DIR=.dist/bin scripts/build.sh
# (BUILD_DIR, default bin: where the binaries go; scripts/publish.sh builds Azure's into its
# staging folder, so that bin/handler stays this machine's, the one func start runs).
# More commands go to the same folder with the same flags, in the same go build (what they share
# is compiled once, and later builds of any of them find it in Go's build cache):
#   scripts/build.sh ./cmd/devhost ./cmd/pollerctl
# BUILD_PROGRESS=1 says how many packages have been compiled so far: on a terminal in one line it
# rewrites, otherwise every 5 s, then every 30 s (a first build on a fresh machine compiles
# several hundred: a few minutes; later builds take seconds).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,11s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-bin}
mkdir -p "$dir"
# The version --version prints and the state document records (internal/version): the build info's
# VCS data when go build has it; these -X values when it has none (a build outside git, or with
# -buildvcs=false), from git when there is one, else from SOURCE_REVISION (e.g. a CI variable).
pkg=github.com/pseudotrigger/pseudotrigger/internal/version
rev=$(git rev-parse HEAD 2>/dev/null || echo "${SOURCE_REVISION:-}")
at=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || true)
dirty=false
if [ -n "$(git status --porcelain 2>/dev/null | head -1)" ]; then dirty=true; fi
flags=(-trimpath -ldflags "-s -w -X $pkg.revision=$rev -X $pkg.time=$at -X $pkg.modified=$dirty")
if [ $# -eq 0 ]; then
  out=(-o "$dir/handler")
else
  out=(-o "$dir/")
fi

if [ -z "${BUILD_PROGRESS:-}" ]; then
  CGO_ENABLED=0 go build "${flags[@]}" "${out[@]}" ./cmd/handler "$@"
else
  # go build -v names each package as it compiles it; they are counted, not listed. Anything
  # else it prints (a compile error) is passed on as it is.
  total=$(CGO_ENABLED=0 go list -deps ./cmd/handler "$@" 2>/dev/null | grep -c . || true)
  start=$SECONDS
  set +e
  CGO_ENABLED=0 go build -v "${flags[@]}" "${out[@]}" ./cmd/handler "$@" 2>&1 | {
    n=0 last=$SECONDS pkg="" every=5 tty=""
    [ -t 2 ] && tty=1
    while IFS= read -r line; do
      if [[ $line =~ ^[A-Za-z0-9._~/-]+$ ]]; then
        n=$((n + 1)) pkg=$line
        if [ -n "$tty" ]; then # one line, rewritten
          printf '\r  ... %d of at most %d packages compiled (%ds; now %s)\033[K' "$n" "$total" "$((SECONDS - start))" "$pkg" >&2
        elif ((SECONDS - last >= every)); then
          printf '  ... %d of at most %d packages compiled (%ds; now %s)\n' "$n" "$total" "$((SECONDS - start))" "$pkg" >&2
          last=$SECONDS
          # A few lines, not hundreds: every 5 s for the first half minute, then every 30 s.
          ((SECONDS - start < 30)) || every=30
        fi
      else
        [ -z "$tty" ] || printf '\r\033[K' >&2
        printf '%s\n' "$line" >&2
      fi
    done
    [ -z "$tty" ] || printf '\r\033[K' >&2
    if ((n > 0)); then
      printf '  compiled %d packages in %ds (the rest came from the build cache)\n' "$n" "$((SECONDS - start))" >&2
    else
      printf '  nothing to compile: everything came from the build cache\n' >&2
    fi
  }
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || exit "$rc"
fi
built=$dir/handler
for p in "$@"; do built+=", $dir/${p##*/}"; done
echo "built $built (${GOOS:-$(go env GOOS)}/${GOARCH:-$(go env GOARCH)}): $("$dir/handler" --version 2>/dev/null || echo "handler rev ${rev:-unknown}")"
