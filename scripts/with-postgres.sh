#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL pointing at a PostgreSQL server.
# When TEST_DATABASE_URL is already set, the command runs against it unchanged. Otherwise a
# throwaway cluster is created in a temporary folder on a free port, started as an
# unprivileged user (PostgreSQL refuses to run as root), and removed when the command ends.
# The cluster trades durability for speed (fsync off) unless PG_DURABLE=1: benchmarks run on
# a cluster configured as production would be (fsync, synchronous_commit, full_page_writes on).
set -euo pipefail

if [[ -n "${TEST_DATABASE_URL:-}" ]]; then
  exec "$@"
fi

bindir=""
if command -v pg_config >/dev/null 2>&1 && [[ -x "$(pg_config --bindir)/initdb" ]]; then
  bindir="$(pg_config --bindir)"
fi
if [[ -z "$bindir" ]]; then
  bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
fi
if [[ -z "$bindir" || ! -x "$bindir/initdb" ]]; then
  echo "with-postgres: no PostgreSQL server found. Install it (Debian: apt-get install -y postgresql) or set TEST_DATABASE_URL." >&2
  exit 1
fi

dir="$(mktemp -d /tmp/lifeline-pg.XXXXXX)"
run_as=()
if [[ "$(id -u)" == "0" ]]; then
  user=postgres
  id -u "$user" >/dev/null 2>&1 || user=nobody
  chown "$user" "$dir"
  run_as=(runuser -u "$user" --)
fi

port=""
for _ in $(seq 1 50); do
  candidate=$(( 20000 + RANDOM % 20000 ))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then port=$candidate; break; fi
done
[[ -n "$port" ]] || { echo "with-postgres: no free port" >&2; exit 1; }

cleanup() {
  "${run_as[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"${run_as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
[[ "${PG_DURABLE:-}" == "1" ]] && durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
"${run_as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 $durability -c max_connections=400 -c shared_buffers=128MB ${PG_OPTS:-}" \
  start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }

export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
echo "with-postgres: throwaway PostgreSQL on 127.0.0.1:$port ($([[ "${PG_DURABLE:-}" == "1" ]] && echo "durable: fsync on" || echo "fsync off"))" >&2
set +e
"$@"
status=$?
set -e
exit $status
