#!/usr/bin/env bash
# OUR client (the mcp-tasks binary) against @modelcontextprotocol/server-everything
# 2026.8.31, a 2025-11-25 server with the experimental (legacy) tasks, over stdio
# and over its Streamable HTTP (a stateful session, bound to 127.0.0.1).
#
# Usage: check.sh MCP_TASKS_BIN
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
# Needs node and interop/node_modules (npm ci in interop/, as interop/run does).
# Env: ONLY=stdio|http runs one transport.
#
# Prints "PASS name" / "FAIL name: why" per check (names end in /stdio or /http),
# "# ..." notes, and exits 1 if any check failed, 64 on bad usage.
#
# Evidence that a call was or was not task-augmented: on stdio, wiretap.py logs every
# line our client sent, and the checks read `params.task` of each tools/call; on both
# transports, server-everything refuses a task-augmented call of a tool whose
# taskSupport is forbidden (-32602 "Invalid task creation result") and answers a plain
# call of its task tool with an error result ("requires task augmentation"), so each
# tool answering as itself shows the call had the right form.
#
# Tools (from its tools/list): simulate-research-query has taskSupport "required"
# (four 1 s stages; with ambiguous: true and a client that declares elicitation, it
# asks which interpretation is meant); echo and get-sum have taskSupport "forbidden".
# Every task lives in the session that made it, so get/wait/cancel by id from a new
# process cannot reach it; cancel is checked with Ctrl-C during the call, and the
# binary's get/wait/cancel against a 2025-11-25 server run in its own tests
# (crates/mcp-tasks-cli/tests/it/call_2025_11_25.rs).

set -u

if [ $# -ne 1 ]; then
  sed -n '6,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
EVERYTHING=$HERE/../node_modules/@modelcontextprotocol/server-everything/dist/index.js
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 64; }
[ -f "$EVERYTHING" ] || { echo "no server-everything at $EVERYTHING (npm ci in interop/)" >&2; exit 64; }
command -v node >/dev/null || { echo "no node on PATH" >&2; exit 64; }

# pass, fail, fail_log, expect, finish, temp_dir, start_bg, wait_for, free_port (its EXIT
# trap stops the server and removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK everything-check

# sent WIRE PYTHON-EXPRESSION: evaluates over `calls` = the tools/call requests in WIRE.
sent() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
calls = []
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("method") == "tools/call":
        calls.append(m["params"])
v = eval(sys.argv[2])
print("" if v is None else v if isinstance(v, str) else json.dumps(v))
EOF
}

checks() {
  local tr=$1
  shift
  local out=$WORK/$tr.json rc
  "$BIN" discover "$@" --json >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "discover: the 2025-11-25 era and its task methods/$tr" "$out" $rc 0 \
    'd["protocolVersion"] == "2025-11-25" and d["taskEra"] == "legacy" and d["tasks"] is False and
     all(m in d["taskMethods"] for m in ["tasks/get", "tasks/result", "tasks/cancel"])'

  "$BIN" call "$@" --json simulate-research-query --arg topic=rust >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "a required tool runs as a task to completion/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and d.get("taskId") and "Research Report: rust" in t'

  "$BIN" call "$@" --json simulate-research-query --arg topic=python --arg ambiguous=true \
    --answer interpretation=snake >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "its elicitation is answered (from --answer)/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and "**Clarification**: snake" in t'

  "$BIN" call "$@" --json simulate-research-query --arg topic=python --arg ambiguous=true \
    --input fail >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "an elicitation left unanswered is reported/$tr" "$out" $rc 4 \
    'd["status"] == "input_required" and
     [r["method"] for r in d["result"]["inputRequests"].values()] == ["elicitation/create"]'

  "$BIN" call "$@" --json echo --arg message=hi >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "a plain tool stays a plain call/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and t == "Echo: hi" and "taskId" not in d'

  "$BIN" call "$@" --json get-sum --arg a=2 --arg b=3 >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "a forbidden tool is not task-augmented/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and t == "The sum of 2 and 3 is 5." and "taskId" not in d'

  # Ctrl-C while the task runs: the binary sends tasks/cancel and reports how it ended.
  "$BIN" call "$@" --json simulate-research-query --arg topic=stop >"$out" 2>"$WORK/$tr.err" &
  local pid=$!
  sleep 2.5
  kill -INT "$pid"
  wait "$pid"; rc=$?
  expect "Ctrl-C cancels the task with tasks/cancel/$tr" "$out" $rc 3 \
    'd["status"] == "cancelled" and d.get("taskId")'
}

if [ "${ONLY:-stdio}" = stdio ]; then
  wire=$WORK/wire.jsonl
  : >"$wire"
  checks stdio --stdio "python3 $HERE/wiretap.py $wire -- node $EVERYTHING stdio"
  research=$(sent "$wire" '[("task" in c) for c in calls if c["name"] == "simulate-research-query"]')
  plain=$(sent "$wire" '[("task" in c) for c in calls if c["name"] in ("echo", "get-sum")]')
  if [ "$research" = "[true, true, true, true]" ] && [ "$plain" = "[false, false]" ]; then
    pass "on the wire: params.task on every task-tool call, on no other call/stdio"
  else
    fail "on the wire/stdio" "params.task on research calls: $research, on echo and get-sum: $plain"
  fi
fi

if [ "${ONLY:-http}" = http ]; then
  port=$(free_port)
  start_bg "$WORK/http-server" env PORT="$port" node -r "$HERE/loopback.cjs" "$EVERYTHING" streamableHttp
  if ! wait_for 10 grep -q "listening on port" "$WORK/http-server.err"; then
    fail_log "server-everything starts on HTTP" "$WORK/http-server.err"
  else
    checks http --url "http://127.0.0.1:$port/mcp"
  fi
fi

finish
