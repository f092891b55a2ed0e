#!/usr/bin/env bash
# Builds the Pulumi CLI (a Go program) from the Go module proxy when it is not cached yet, and
# prints the binary's path. The engine is needed by the Automation-API lifecycle tests
# (tests/backends/test_stacks.py); it is cached outside the clone so a fresh clone reuses it.
# A plain `go install ...@version` is refused (it asks the proxy for the version list), so the
# exact module is downloaded, copied out of the read-only module cache, its `replace => ../sdk`
# line dropped, and built with the version string the Python Automation API checks.
# One library is replaced: the password-strength estimator (two copies, zxcvbn-go), whose
# frequency tables took 70 of the 130 ms of every CLI start; the CLI asks it only whether a
# value given to `pulumi config set` without --secret or --plaintext looks like a secret, and
# the stand-in says every value does (such a `config set` is refused, never stored in clear).
# The tests start the CLI about 400 times: 0.16 -> 0.075 CPU-seconds each.
set -euo pipefail

version="${PULUMI_ENGINE_VERSION:-v3.259.0}"
cache="${YBSCALE_CACHE:-$HOME/.cache/ybscale}/pulumi-$version-nozxcvbn"
bin="$cache/pulumi"
if [ -x "$bin" ] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi

go=$(command -v go || echo /usr/local/go/bin/go)
[ -x "$go" ] || { echo "pulumi.sh: Go is needed to build the Pulumi engine (install golang)" >&2; exit 1; }

work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 143' TERM INT HUP  # stopped (.ci/run stops it when CI fails first): clean up too
export GOMODCACHE="${GOMODCACHE:-$("$go" env GOMODCACHE)}"
export GOFLAGS=-mod=mod
# the compiler collects garbage less often: one build from empty caches on 2 cores took 226.7 s
# and 415 CPU-seconds with GOGC=400 against 241.9 s and 453 with Go's default (100)
export GOGC="${GOGC:-400}"
module="github.com/pulumi/pulumi/pkg/v3@$version"
echo "pulumi.sh: downloading $module" >&2
dir=$(cd "$work" && "$go" mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "pulumi.sh: go mod download $module gave no directory" >&2; exit 1; }
cp -r "$dir" "$work/pkg"
chmod -R u+w "$work/pkg"
sed -i '/=>[[:space:]]*\.\.\/sdk/d' "$work/pkg/go.mod"
for owner in nbutton23 ccojocar; do  # the password-strength stand-in (see the top)
  mkdir "$work/zxcvbn-$owner"
  printf 'module github.com/%s/zxcvbn-go\n\ngo 1.20\n' "$owner" >"$work/zxcvbn-$owner/go.mod"
  cat >"$work/zxcvbn-$owner/zxcvbn.go" <<'GO'
// Package zxcvbn stands in for the password-strength estimator (.ci/pulumi.sh).
package zxcvbn

import "math"

// Match is the part of the estimator's result the CLI reads.
type Match struct{ Entropy float64 }

// PasswordStrength rates every value as a secret.
func PasswordStrength(password string, userInputs []string) Match {
	return Match{Entropy: math.Inf(1)}
}
GO
  (cd "$work/pkg" && "$go" mod edit -replace "github.com/$owner/zxcvbn-go=../zxcvbn-$owner")
done
echo "pulumi.sh: building the Pulumi CLI $version (several minutes on 2 cores)" >&2
mkdir -p "$cache"
# no debug information (compiler -dwarf=false, linker -s -w): a panic still prints its stack;
# from an empty build cache on 2 cores 186.5 s and 350 CPU-seconds against 196.4 s and 379 with
# it (the same start-up, `pulumi version` 0.13 s either way)
(cd "$work/pkg" && "$go" build -o "$work/pulumi" -gcflags=all=-dwarf=false \
  -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
  ./cmd/pulumi)
mv "$work/pulumi" "$bin"
"$bin" version >&2
echo "$bin"
