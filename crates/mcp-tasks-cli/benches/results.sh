#!/usr/bin/env bash
# What `mcp-tasks serve --http` costs while TASKS tasks each try to return
# BYTES bytes (RELIABILITY.md, section 7): the server is a gateway in front
# of `plain-upstream` (crates/mcp-tasks-conformance), whose `big` tool
# answers a text of `bytes` bytes; TASKS `mcp-tasks call --no-wait big` run
# at once, and the server's VmRSS is sampled every 100 ms from then until
# its /metrics count every task ended; VmHWM is read at the end.
#
#   cargo build --release -p mcp-tasks-cli -p mcp-tasks-conformance --bins
#   bash crates/mcp-tasks-cli/benches/results.sh target/release 100 104857600 memory
#   bash crates/mcp-tasks-cli/benches/results.sh target/release 16 104857600 memory --max-result-bytes 0
#
# usage: results.sh BIN_DIR TASKS BYTES STORE [serve flags...]
set -u
dir=$1 tasks=$2 bytes=$3 store=$4
shift 4
out=$(mktemp -d)
"$dir/mcp-tasks" serve --http 127.0.0.1:0 --admin 127.0.0.1:0 --store "$store" \
  --poll-interval 200 --upstream "$dir/plain-upstream" "$@" >"$out/serve.out" 2>"$out/serve.err" &
pid=$!
for _ in $(seq 100); do
  grep -q "operator listener" "$out/serve.out" 2>/dev/null && break
  sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$out/serve.out")
admin=$(sed -n 's/^operator listener on //p' "$out/serve.out")
rss() { awk '/VmRSS|VmHWM/ {printf "%s %d MiB  ", $1, $2 / 1024}' "/proc/$pid/status"; }
ended() { curl -s "$admin/metrics" | awk '/^mcp_tasks_tasks_ended_total/ {n += $NF} END {print n + 0}'; }
echo "started: $(rss)"
start=$(date +%s.%N)
for i in $(seq "$tasks"); do
  MCP_TASKS_JOURNAL="$out/journal$i.db" "$dir/mcp-tasks" call --url "$url" --json --no-wait \
    big --arg "bytes=$bytes" >"$out/call$i.json" 2>&1 &
done
peak=0
while :; do
  now=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
  [ "$now" -gt "$peak" ] && peak=$now
  n=$(ended)
  [ "$n" -ge "$tasks" ] && break
  sleep 0.1
done
end=$(date +%s.%N)
echo "$n tasks ended in $(echo "$end - $start" | bc) s; VmRSS peak sampled $peak MiB; $(rss)"
curl -s "$admin/metrics" | grep '^mcp_tasks_tasks_ended_total'
id=$(sed -n 's/.*"taskId": *"\([^"]*\)".*/\1/p' "$out/call1.json" | head -1)
MCP_TASKS_JOURNAL="$out/get.db" "$dir/mcp-tasks" get --url "$url" --json -- "$id" 2>/dev/null | head -c 400
echo
sleep 3
echo "3 s later: $(rss)"
kill "$pid"
wait "$pid" 2>/dev/null
rm -rf "$out"
