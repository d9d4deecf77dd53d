#!/usr/bin/env bash
# Prints `go test -bench` output as a table: benchmark, then each reported metric. At the end,
# Lifeline's steps/s against the River-only baseline of the same run, per database, and the
# dead-letter list's worst 95th percentiles against issue 8's targets.
awk '
/^Benchmark/ {
  name=$1; sub(/-[0-9]+$/, "", name); line=sprintf("%-64s", name)
  for (i=3; i<NF; i+=2) {
    line=line sprintf("  %12s %-14s", $i, $(i+1))
    if ($(i+1) == "steps/s") steps[name]=$i
    if ($(i+1) == "ms-p95") p95[name]=$i
    if ($(i+1) == "p95-ms") dp95[name]=$i
    if ($(i+1) == "us/fingerprint") fp=$i
    if ($(i+1) == "job-s") bulkjob=$i
    if ($(i+1) == "grouped-failures/s") gfails[name]=$i
    if ($(i+1) == "ungrouped-failures/s") ufails[name]=$i
    if ($(i+1) == "grouped-%") gpct[name]=$i
  }
  print line; next
}
/^(ok|FAIL|PASS|goos|goarch|pkg|cpu|\?)/ { next }
{ print }
END {
  split("sqlite postgres", dbs, " ")
  for (k=1; k<=2; k++) {
    # The River figure is the best point of its sweep (BenchmarkRiverChains/<db>/<settings>).
    d=dbs[k]; l=steps["BenchmarkExecutions/" d]; r=""; best=""
    for (name in steps) {
      q=name; if (!sub("^BenchmarkRiverChains/" d "/", "", q)) continue
      if (r == "" || steps[name] + 0 > r + 0) { r=steps[name]; best=q }
    }
    if (l != "" && r != "" && r > 0) printf("Lifeline / River-only chains at River best (%s, %s): %.0f / %.0f steps/s = %.2fx\n", d, best, l, r, l/r)
  }
  # BenchmarkBreakerCost/<db>/breakers-{on,off}: on must keep at least 90 % of off.
  for (k=1; k<=2; k++) {
    d=dbs[k]; on=steps["BenchmarkBreakerCost/" d "/breakers-on"]; off=steps["BenchmarkBreakerCost/" d "/breakers-off"]
    if (on != "" && off != "" && off > 0) printf("Breakers on / off (%s): %.0f / %.0f steps/s = %.0f%% (target >= 90%%): %s\n", d, on, off, 100*on/off, (on/off >= 0.9 ? "within" : "UNDER"))
  }
  # BenchmarkFailureBranch/<db>: grouped and ungrouped alternated; grouping adds at most 5 % (issue 22).
  for (k=1; k<=2; k++) {
    d=dbs[k]; g=gfails["BenchmarkFailureBranch/" d]; u=ufails["BenchmarkFailureBranch/" d]; p=gpct["BenchmarkFailureBranch/" d]
    if (p != "") printf("Failure branch grouped / ungrouped (%s): %.0f / %.0f failures/s, median round %.1f%% (target >= 95%%): %s\n", d, g, u, p, (p + 0 >= 95 ? "within" : "UNDER"))
  }
  # Issue 22: a fingerprint under 50 µs; a bulk retry of 10,000 items at 200/s within 60 s.
  if (fp != "") printf("Fingerprint: %s us per failure, target 50 us: %s\n", fp, (fp + 0 <= 50 ? "within" : "OVER"))
  if (bulkjob != "") printf("Bulk retry of 10,000 items at 200/s: %s s, target 60 s: %s\n", bulkjob, (bulkjob + 0 <= 60 ? "within" : "OVER"))
  # BenchmarkDeadlines/<query>: the pages and queries of issue 23 at 1,000,000 executions, 100 ms.
  worst=""; which=""
  for (name in dp95) {
    q=name; if (!sub(/^BenchmarkDeadlines\//, "", q)) continue
    if (worst == "" || dp95[name] + 0 > worst + 0) { worst=dp95[name]; which=q }
  }
  if (worst != "") printf("Deadlines p95, worst query (%s): %s ms, target 100 ms: %s\n", which, worst, (worst + 0 <= 100 ? "within" : "OVER"))
  # BenchmarkDLQList/<query>: the worst p95 of each kind against its target.
  # groups: the Problems page, the groups list and one group page (issue 22).
  split("list item search groups", kinds, " "); split("50 50 200 50", targets, " ")
  for (k=1; k<=4; k++) {
    worst=""; which=""
    for (name in p95) {
      q=name; if (!sub(/^BenchmarkDLQList\//, "", q)) continue
      if ((kinds[k] == "list" && (q ~ /^list-/ || q == "status-counts" || q == "pending-badge")) ||
          (kinds[k] == "item" && q ~ /^item/) || (kinds[k] == "search" && q ~ /^search-/) || (kinds[k] == "groups" && q ~ /^group/)) {
        if (worst == "" || p95[name] + 0 > worst + 0) { worst=p95[name]; which=q }
      }
    }
    if (worst != "") printf("DLQ %-6s p95, worst query (%s): %s ms, target %s ms: %s\n", kinds[k], which, worst, targets[k], (worst + 0 <= targets[k] ? "within" : "OVER"))
  }
}
'
