#!/usr/bin/env bash
# Prints `go test -bench` output as a table: benchmark, then each reported metric.
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); line=sprintf("%-45s", name)
  for (i=3; i<NF; i+=2) line=line sprintf("  %12s %-14s", $i, $(i+1))
  print line; next
}
/^(ok|FAIL|PASS|goos|goarch|pkg|cpu|\?)/ { next }
{ print }
'
