#!/usr/bin/env bash
# Prints `go test -bench` output as a table: benchmark, then each reported metric. At the end,
# Lifeline's steps/s against the River-only baseline of the same run, per database.
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); line=sprintf("%-45s", name)
  for (i=3; i<NF; i+=2) {
    line=line sprintf("  %12s %-14s", $i, $(i+1))
    if ($(i+1) == "steps/s") steps[name]=$i
  }
  print line; next
}
/^(ok|FAIL|PASS|goos|goarch|pkg|cpu|\?)/ { next }
{ print }
END {
  split("sqlite postgres", dbs, " ")
  for (k=1; k<=2; k++) {
    d=dbs[k]; l=steps["BenchmarkExecutions/" d]; r=steps["BenchmarkRiverChains/" d]
    if (l != "" && r != "" && r > 0) printf("Lifeline / River-only chains (%s): %.0f / %.0f steps/s = %.2fx\n", d, l, r, l/r)
  }
}
'
