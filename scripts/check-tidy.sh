#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum; leaves both as they were.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'cp "$tmp/go.mod" go.mod; cp "$tmp/go.sum" go.sum; rm -rf "$tmp"' EXIT
cp go.mod go.sum "$tmp/"
${GO:-go} mod tidy
if ! diff -u "$tmp/go.mod" go.mod || ! diff -u "$tmp/go.sum" go.sum; then
  echo "check-tidy: go.mod/go.sum are not tidy; run 'go mod tidy' and commit the result" >&2
  exit 1
fi
echo "check-tidy: go.mod and go.sum are tidy"
