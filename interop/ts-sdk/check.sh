#!/usr/bin/env bash
# OUR client (the mcp-tasks binary) against a 2025-11-25 task server written on the
# official TypeScript SDK v1 (@modelcontextprotocol/sdk 1.32.2, its experimental tasks:
# registerToolTask, InMemoryTaskStore, InMemoryTaskMessageQueue), served over Streamable
# HTTP with plain JSON answers (enableJsonResponse: true) in a stateful session, bound to
# 127.0.0.1 (interop/ts-sdk/server.mjs).
#
# Usage: check.sh MCP_TASKS_BIN
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
# Needs node and interop/node_modules (npm ci in interop/, as interop/run does).
#
# Prints "PASS name" / "FAIL name: why" per check, "# ..." notes, and exits 1 if any
# check failed, 64 on bad usage.
#
# Evidence: the server logs every POST it answered (method, tool, whether params.task
# was sent, the answer's status and Content-Type; no task ids), and the checks read
# that log: every answer to a request was an application/json body (none SSE), the task
# tools were called with params.task and the plain one without. The server sends its
# elicitation on the session's GET stream with the related-task _meta (server.mjs says
# why not through tasks/result); that --answer reaches it shows the client tied it to the
# task's wait (the CLI's own handler would decline it). Every task lives in the
# session that made it, so cancel is checked with Ctrl-C during the call (the binary
# sends tasks/cancel on the same connection); `mcp-tasks cancel ID` from a new process
# would open a new session, where the server does not know the task.

set -u

if [ $# -ne 1 ]; then
  sed -n '8,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
SDK=$HERE/../node_modules/@modelcontextprotocol/sdk/package.json
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 64; }
[ -f "$SDK" ] || { echo "no @modelcontextprotocol/sdk in interop/node_modules (npm ci in interop/)" >&2; exit 64; }
command -v node >/dev/null || { echo "no node on PATH" >&2; exit 64; }
echo "# @modelcontextprotocol/sdk $(node -p "require('$SDK').version"), node $(node --version)"

# pass, fail, fail_log, expect, finish, temp_dir, start_bg, wait_for, free_port (its EXIT
# trap stops the server and removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK ts-sdk-check

# posts PYTHON-EXPRESSION: evaluates over `posts` = the server's log of answered POSTs.
posts() {
  python3 - "$WORK/server.out" "$1" <<'EOF'
import json, sys
posts = []
for line in open(sys.argv[1]):
    try:
        posts.append(json.loads(line))
    except ValueError:
        continue
v = eval(sys.argv[2])
print("" if v is None else v if isinstance(v, str) else json.dumps(v))
EOF
}

port=$(free_port)
start_bg "$WORK/server" env PORT="$port" node "$HERE/server.mjs"
if ! wait_for 10 grep -q "^listening on" "$WORK/server.out"; then
  fail_log "the TypeScript SDK server starts" "$WORK/server.err"
  finish
fi
URL="http://127.0.0.1:$port/mcp"
out=$WORK/out.json

"$BIN" discover --url "$URL" --json >"$out" 2>"$out.err"; rc=$?
expect "discover: the 2025-11-25 era and its task methods" "$out" $rc 0 \
  'd["protocolVersion"] == "2025-11-25" and d["taskEra"] == "legacy" and d["tasks"] is False and
   d["taskMethods"] == ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"]'

"$BIN" call --url "$URL" --json slow_report --arg topic=rust >"$out" 2>"$out.err"; rc=$?
expect "a required tool runs as a task to completion" "$out" $rc 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "Report: rust"'

"$BIN" call --url "$URL" --json confirm_action --arg action=deploy \
  --answer confirm=true --answer note=ok >"$out" 2>"$out.err"; rc=$?
expect "its elicitation form is answered (from --answer)" "$out" $rc 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "Confirmed: deploy (ok)"'

"$BIN" call --url "$URL" --json confirm_action --arg action=ship --input accept >"$out" 2>"$out.err"; rc=$?
expect "its elicitation form is accepted with its defaults (--input accept)" "$out" $rc 0 \
  'd["status"] == "completed" and t == "Confirmed: ship (no note)"'

"$BIN" call --url "$URL" --json confirm_action --arg action=drop --input decline >"$out" 2>"$out.err"; rc=$?
expect "its elicitation is declined (--input decline)" "$out" $rc 0 \
  'd["status"] == "completed" and t == "Not confirmed: drop (decline)"'

"$BIN" call --url "$URL" --json confirm_action --arg action=wait --input fail >"$out" 2>"$out.err"; rc=$?
expect "an elicitation left unanswered is reported" "$out" $rc 4 \
  'd["status"] == "input_required" and
   [r["method"] for r in d["result"]["inputRequests"].values()] == ["elicitation/create"]'

"$BIN" call --url "$URL" --json failing_job >"$out" 2>"$out.err"; rc=$?
expect "a tool result with isError: true is a failed task" "$out" $rc 2 \
  'd["status"] == "failed" and d.get("taskId") and d["result"]["isError"] is True and t == "the job failed"'

"$BIN" call --url "$URL" --json echo --arg message=hi >"$out" 2>"$out.err"; rc=$?
expect "a plain tool stays a plain call" "$out" $rc 0 \
  'd["status"] == "completed" and t == "Echo: hi" and "taskId" not in d'

# Ctrl-C while the task runs: the binary sends tasks/cancel and reports how it ended.
"$BIN" call --url "$URL" --json slow_report --arg topic=stop --arg ms=20000 >"$out" 2>"$out.err" &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"; rc=$?
expect "Ctrl-C cancels the task with tasks/cancel" "$out" $rc 3 \
  'd["status"] == "cancelled" and d.get("taskId")'

# What the server saw and how it answered.
shapes=$(posts 'sorted({p["contentType"] for p in posts if p["method"] and not p["method"].startswith("notifications/")})')
if [ "$shapes" = '["application/json"]' ]; then
  pass "on the wire: every request was answered with a plain JSON body"
else
  fail "on the wire: answers" "Content-Types of the answers to requests: $shapes"
fi
calls=$(posts '[(p["tool"], p["task"]) for p in posts if p["method"] == "tools/call" and p["status"] == 200]')
want='[["slow_report", true], ["confirm_action", true], ["confirm_action", true], ["confirm_action", true], ["confirm_action", true], ["failing_job", true], ["echo", false], ["slow_report", true]]'
if [ "$calls" = "$want" ]; then
  pass "on the wire: params.task on every task-tool call (required and optional), on no other call"
else
  fail "on the wire: tools/call" "(tool, params.task) of each call: $calls"
fi
methods=$(posts 'sorted({p["method"] for p in posts if p["method"] and p["method"].startswith("tasks/")})')
if [ "$methods" = '["tasks/cancel", "tasks/get", "tasks/result"]' ]; then
  pass "on the wire: tasks/get polled, tasks/result fetched, tasks/cancel sent"
else
  fail "on the wire: tasks/*" "methods: $methods"
fi

finish
