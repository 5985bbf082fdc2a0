#!/usr/bin/env bash
# OUR client (the mcp-tasks binary) against the fastmcp-tasks fixture server (server.py),
# over stdio and over Streamable HTTP.
#
# Usage: our_client_check.sh MCP_TASKS_BIN PYTHON
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
#   PYTHON         a python with fastmcp[tasks]==4.1.4 (requirements.txt), e.g. /tmp/fmvenv/bin/python
# Env: ONLY=stdio|http runs one transport.
#      RETRY_CHECK=1 builds retry_check/ (a tiny client of our library, cargo, its own
#      target dir $RETRY_CHECK_TARGET, default /tmp/fastmcp-retry-check-target) and
#      checks that TasksClient::call_and_await, told not to declare the extension,
#      gets fastmcp's -32021 and retries with it; RETRY_CHECK_BIN=PATH uses a built one.
#
# Prints "PASS name" / "FAIL name: why" per check (names end in /stdio or /http),
# "# ..." notes, and exits 1 if any check failed, 64 on bad usage.
#
# Evidence from the server side comes from server.py's FIXTURE_TRACE file: one JSON
# line per tools/call (whether it declared the Tasks extension, its inputResponses
# keys, what it answered), tasks/update (the keys) and tasks/cancel.

set -u

if [ $# -ne 2 ]; then
  sed -n '5,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
PY=$2
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
case $PY in */*) PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
SERVER=$HERE/server.py
[ -x "$BIN" ] || command -v "$BIN" >/dev/null || { echo "no executable $BIN" >&2; exit 64; }
"$PY" -c 'import fastmcp_tasks' 2>/dev/null || { echo "$PY cannot import fastmcp_tasks" >&2; exit 64; }

# pass, fail, json, finish, temp_dir, start_bg, listening, wait_for (its EXIT trap stops
# the server and removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK our-client-check

export FIXTURE_TRACE=$WORK/trace.jsonl
export FIXTURE_POLL_MS=100
: >"$FIXTURE_TRACE"

# trace 'STMT; ...; EXPR' [SINCE]: evaluates over `ev` = trace events (lines after line SINCE).
trace() {
  "$PY" - "$FIXTURE_TRACE" "$1" "${2:-0}" <<'EOF'
import json, sys, re
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[int(sys.argv[3]):] if l.strip()]
*stmts, expr = sys.argv[2].split("; ")
for stmt in stmts:
    exec(stmt)
v = eval(expr)
print("" if v is None else v if isinstance(v, str) else json.dumps(v))
EOF
}
mark() { wc -l <"$FIXTURE_TRACE" | tr -d ' '; }

# run NAME ARGS...: runs `BIN ARGS... --json` with TARGET, stdout to $WORK/NAME.json,
# stderr to $WORK/NAME.err; sets RC.
run() {
  local name=$1; shift
  "$BIN" "$@" "${TARGET[@]}" --json >"$WORK/$name.json" 2>"$WORK/$name.err"
  RC=$?
}
# task_created SINCE: whether the trace shows a task created (after line SINCE).
task_created() { [ -n "$(trace '[e for e in ev if e.get("outcome")=="CreateTaskResult"] or None' "$1")" ]; }
# input_required NAME ID: `get ID` into $WORK/NAME.json (see run); whether it is input_required.
input_required() {
  run "$1" get "$2"
  [ "$(json "$WORK/$1.json" 'd.get("status")')" = input_required ]
}
why() { echo "exit $RC, stdout $(head -c 300 "$WORK/$1.json"), stderr $(grep -v 'fail to close sink' "$WORK/$1.err" | tail -n 2 | head -c 300)"; }

checks() {
  local tr=$1 m name id keys

  # --- lifecycle: a task from working to completed -------------------------------
  name=lifecycle; m=$(mark)
  run "$name-$tr" call slow --arg seconds=0.3 --timeout 30
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 'd.get("status")')" = completed ] \
    && [ "$(json "$WORK/$name-$tr.json" 't')" = "slept 0.3 s" ] \
    && [ -n "$(json "$WORK/$name-$tr.json" 'd.get("taskId")')" ] \
    && [ "$(trace '[e["outcome"] for e in ev if e["event"]=="tools/call answered"]' "$m")" = '["CreateTaskResult"]' ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr"); trace $(trace '[e.get("outcome") for e in ev]' "$m")"
  fi

  # call listens by default: fastmcp answers subscriptions/listen with -32601, so we
  # fall back to polling; --listen insists and ends with exit 70 and that error.
  name=listen-fallback
  run "$name-$tr" call slow --arg seconds=0.2 --timeout 30
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "slept 0.2 s" ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr")"
  fi
  name=listen-insisted
  run "$name-$tr" call slow --arg seconds=0.2 --listen --timeout 30
  if [ "$RC" = 70 ] && [ "$(json "$WORK/$name-$tr.json" '(d.get("error") or {}).get("code")')" = -32601 ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr")"
  fi

  # --- cancel ----------------------------------------------------------------------
  if [ "$tr" = http ]; then
    name=cancel; m=$(mark)
    id=$("$BIN" call cancellable "${TARGET[@]}" --no-wait 2>"$WORK/$name-nowait.err")
    RC=$?
    if [ "$RC" != 0 ] || [ -z "$id" ]; then
      fail "$name/$tr" "call --no-wait: exit $RC, id '$id', $(tail -n 1 "$WORK/$name-nowait.err")"
    else
      run "$name-get-$tr" get "$id"
      local before
      before=$(json "$WORK/$name-get-$tr.json" 'd.get("status")')
      run "$name-$tr" cancel "$id"
      local rc_cancel=$RC
      run "$name-after-$tr" get "$id"
      if [ "$before" = working ] && [ "$rc_cancel" = 3 ] \
        && [ "$(json "$WORK/$name-$tr.json" 'd.get("status")')" = cancelled ] \
        && [ "$(json "$WORK/$name-after-$tr.json" 'd.get("status")')" = cancelled ] \
        && [ "$(trace '[e["event"] for e in ev if e["event"]=="tasks/cancel"]' "$m")" = '["tasks/cancel"]' ]; then
        pass "$name/$tr"
      else
        fail "$name/$tr" "before '$before', cancel exit $rc_cancel $(head -c 200 "$WORK/$name-$tr.json"), after $(head -c 200 "$WORK/$name-after-$tr.json")"
      fi
    fi
  fi
  # Ctrl-C during `call` cancels the task (the only way over stdio: each invocation
  # starts its own server process, so --no-wait then cancel cannot meet the same task).
  name=cancel-sigint; m=$(mark)
  "$BIN" call cancellable "${TARGET[@]}" --json >"$WORK/$name-$tr.json" 2>"$WORK/$name-$tr.err" &
  local pid=$!
  wait_for 10 task_created "$m"
  sleep 0.3
  kill -INT "$pid" 2>/dev/null
  wait "$pid"; RC=$?
  if [ "$RC" = 3 ] && [ "$(json "$WORK/$name-$tr.json" 'd.get("status")')" = cancelled ] \
    && [ "$(trace '[e["event"] for e in ev if e["event"]=="tasks/cancel"]' "$m")" = '["tasks/cancel"]' ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr"); trace $(trace '[e["event"] for e in ev]' "$m")"
  fi

  # --- isError: a completed task whose result has isError: true ----------------------
  name=is-error
  run "$name-$tr" call tool_error --timeout 30
  if [ "$RC" = 1 ] && [ "$(json "$WORK/$name-$tr.json" 'd.get("status")')" = completed ] \
    && [ "$(json "$WORK/$name-$tr.json" 'res.get("isError")')" = true ] \
    && [ "$(json "$WORK/$name-$tr.json" 't')" = "tool error" ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr")"
  fi

  # --- input inside the task: fastmcp's guard pattern, keys <taskId>:<hex> ---------------
  name=input; m=$(mark)
  run "$name-$tr" call ask_name --answer name=Ada --timeout 30
  id=$(json "$WORK/$name-$tr.json" 'd.get("taskId")')
  keys=$(trace '[k for e in ev if e["event"]=="tasks/update" for k in e["keys"]]' "$m")
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "Hello, Ada!" ] \
    && [ "$(trace "[bool(re.fullmatch(re.escape('$id') + ':[0-9a-f]{16}', k)) for e in ev if e['event']=='tasks/update' for k in e['keys']]" "$m")" = '[true]' ]; then
    pass "$name/$tr"
    echo "# $name/$tr: tasks/update answered key $keys"
  else
    fail "$name/$tr" "$(why "$name-$tr"); tasks/update keys $keys"
  fi
  # Unanswered (no terminal, no --answer): exit 4, status input_required.
  name=input-unanswered
  run "$name-$tr" call ask_name --timeout 30
  if [ "$RC" = 4 ] && [ "$(json "$WORK/$name-$tr.json" 'd.get("status")')" = input_required ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr")"
  fi
  if [ "$tr" = http ]; then
    # --no-wait, look at the parked task with `get`, answer it with `wait --answer`.
    name=input-get-wait
    id=$("$BIN" call ask_name "${TARGET[@]}" --no-wait 2>"$WORK/$name-nowait.err")
    wait_for 5 input_required "$name-get-$tr" "$id"
    # `get --json` of an input_required task: {"status", "taskId", "result": {"inputRequests"}}
    local shape
    shape=$(json "$WORK/$name-get-$tr.json" "[__import__('re').fullmatch(__import__('re').escape(d['taskId']) + ':[0-9a-f]{16}', k) is not None for k in (res.get('inputRequests') or {})]")
    run "$name-$tr" wait "$id" --answer name=Ada --timeout 30
    if [ "$shape" = '[true]' ] && [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "Hello, Ada!" ]; then
      pass "$name/$tr"
      echo "# $name/$tr: get showed input_required with inputRequests keys $(json "$WORK/$name-get-$tr.json" 'sorted(res.get("inputRequests") or {})')"
    else
      fail "$name/$tr" "get: $(head -c 400 "$WORK/$name-get-$tr.json"); wait: $(why "$name-$tr")"
    fi
  fi

  # --- an MRTR round, then a task -----------------------------------------------------
  name=mrtr-then-task; m=$(mark)
  run "$name-$tr" call mrtr_then_task --answer name=Bo --timeout 30
  local rounds
  rounds=$(trace 'calls = [e for e in ev if e["event"].startswith("tools/call")]; [[e["input_response_keys"], e2["outcome"]] for e, e2 in zip(calls[::2], calls[1::2])]' "$m")
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "Hello, Bo!" ] \
    && [ -n "$(json "$WORK/$name-$tr.json" 'd.get("taskId")')" ] \
    && [ "$rounds" = '[[[], "InputRequiredToolResult"], [["name"], "CreateTaskResult"]]' ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr"); rounds $rounds"
  fi

  # --- a required-task tool ---------------------------------------------------------
  name=required; m=$(mark)
  run "$name-$tr" call required_only --timeout 30
  local declared
  declared=$(trace '[e["declared_tasks"] for e in ev if e["event"]=="tools/call"]' "$m")
  local errors
  errors=$(trace '[e.get("code") for e in ev if e["event"]=="tools/call error"]' "$m")
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "required ok" ]; then
    pass "$name/$tr"
    if [ "$declared" = '[true]' ]; then
      echo "# $name/$tr: our CLI declared the Tasks extension on its first tools/call, so no -32021 happened (tools/call declared_tasks: $declared)"
    else
      echo "# $name/$tr: tools/call declared_tasks $declared, errors $errors (a -32021 then a retry with the extension)"
    fi
  else
    fail "$name/$tr" "$(why "$name-$tr"); declared $declared errors $errors"
  fi

  # --- the library's -32021 retry (our CLI always declares the extension) ---------
  if [ -n "$RETRY_BIN" ]; then
    name=lib-retry-32021; m=$(mark)
    "$RETRY_BIN" "${TARGET[@]}" required_only >"$WORK/$name-$tr.json" 2>"$WORK/$name-$tr.err"
    RC=$?
    local seen
    seen=$(trace '[e["declared_tasks"] if e["event"]=="tools/call" else e.get("code", e.get("outcome")) for e in ev if e["event"].startswith("tools/call")]' "$m")
    if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 'd.get("text")')" = "required ok" ] \
      && [ "$seen" = '[false, -32021, true, "CreateTaskResult"]' ]; then
      pass "$name/$tr"
      echo "# $name/$tr: server saw tools/call undeclared -> -32021, then declared -> task ($seen)"
    else
      fail "$name/$tr" "exit $RC $(head -c 200 "$WORK/$name-$tr.json") $(tail -n 2 "$WORK/$name-$tr.err" | head -c 300); server saw $seen"
    fi
  fi

  # --- always synchronous ---------------------------------------------------------------
  name=sync
  run "$name-$tr" call greet --arg name=Ada --timeout 30
  if [ "$RC" = 0 ] && [ "$(json "$WORK/$name-$tr.json" 't')" = "Hello, Ada!" ] \
    && [ -z "$(json "$WORK/$name-$tr.json" 'd.get("taskId")')" ]; then
    pass "$name/$tr"
  else
    fail "$name/$tr" "$(why "$name-$tr")"
  fi
}

RETRY_BIN=${RETRY_CHECK_BIN:-}
if [ -z "$RETRY_BIN" ] && [ "${RETRY_CHECK:-0}" = 1 ]; then
  RT=${RETRY_CHECK_TARGET:-${TMPDIR:-/tmp}/fastmcp-retry-check-target}
  echo "# building $HERE/retry_check (cargo, --target-dir $RT)"
  if cargo build -q --manifest-path "$HERE/retry_check/Cargo.toml" --target-dir "$RT" >"$WORK/cargo.log" 2>&1; then
    RETRY_BIN=$RT/debug/fastmcp-retry-check
  else
    fail "lib-retry-build" "$(tail -n 5 "$WORK/cargo.log")"
  fi
fi
[ -n "$RETRY_BIN" ] || echo "# lib-retry-32021: skipped (RETRY_CHECK=1 or RETRY_CHECK_BIN=PATH runs it)"

# --- stdio ---------------------------------------------------------------------------------
if [ "${ONLY:-stdio}" = stdio ]; then
  echo "# stdio: $BIN call --stdio '$PY $SERVER stdio'"
  TARGET=(--stdio "$PY $SERVER stdio")
  checks stdio
fi

# --- Streamable HTTP -----------------------------------------------------------------------
if [ "${ONLY:-http}" = http ]; then
  start_bg "$WORK/server" "$PY" "$SERVER" http 127.0.0.1:0
  URL=$(listening "$WORK/server.out" "$BG_PID" 20)
  if [ -z "$URL" ]; then
    fail "start/http" "server.py http printed no 'listening on' line: $(tail -n 3 "$WORK/server.err")"
  else
    echo "# http: $BIN call --url $URL"
    TARGET=(--url "$URL")
    HTTP_MARK=$(mark)
    checks http

    # One call, one run (issue 50): a synchronous tool of 70 s called with --timeout 240
    # returns its result, run once (a 60 s per-request timeout used to cut the call and
    # send it again under an idempotency key fastmcp knows nothing of: four runs, no
    # answer). fastmcp declares no idempotency extension, so nothing is sent twice.
    name=slow-sync-70s; m=$(mark)
    started=$(date +%s)
    run "$name" call slow_sync --arg seconds=70 --timeout 240
    took=$(( $(date +%s) - started ))
    runs=$(trace 'len([e for e in ev if e["event"] == "slow_sync ran"])' "$m")
    if [ "$RC" = 0 ] && [ "$(json "$WORK/$name.json" 't')" = "slept 70 s" ] && [ "$runs" = 1 ]; then
      pass "$name/http"
      echo "# $name/http: the result after ${took}s, the tool ran $runs time(s)"
    else
      fail "$name/http" "runs $runs, took ${took}s, $(why "$name")"
    fi
    # Past --timeout before any task exists: exit 5, no task status, "taskId": null,
    # and the call is not sent again.
    name=slow-sync-timeout; m=$(mark)
    run "$name" call slow_sync --arg seconds=6 --timeout 2
    runs=$(trace 'len([e for e in ev if e["event"] == "slow_sync ran"])' "$m")
    if [ "$RC" = 5 ] && [ "$(json "$WORK/$name.json" 'd.get("status")')" = timeout ] \
      && [ "$(json "$WORK/$name.json" '"taskId" in d and d["taskId"] is None')" = true ] \
      && [ "$runs" = 1 ]; then
      pass "$name/http"
    else
      fail "$name/http" "runs $runs, $(why "$name")"
    fi
    sleep 5  # the abandoned run ends before the next check

    # Our client sends Mcp-Name: <taskId> on every tasks/* over HTTP (fastmcp accepts a
    # missing one, so only the trace shows it).
    bad=$(trace '[[e["event"], e["mcp_name"]] for e in ev if e["event"].startswith("tasks/") and e.get("mcp_name") != e["task_id"]]' "$HTTP_MARK")
    count=$(trace 'len([e for e in ev if e["event"].startswith("tasks/")])' "$HTTP_MARK")
    if [ "$bad" = '[]' ] && [ "$count" -gt 0 ]; then
      pass "mcp-name-sent/http"
      echo "# mcp-name-sent/http: all $count tasks/* requests carried Mcp-Name = their taskId"
    else
      fail "mcp-name-sent/http" "of $count tasks/* requests, these lacked a matching Mcp-Name: $(echo "$bad" | head -c 300)"
    fi

    # The fixture itself: a tools/call without the extension gets -32021 (raw HTTP).
    body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"required_only","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
    code=$(curl -s -o "$WORK/raw.json" -w '%{http_code}' -X POST "$URL" \
      -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: required_only' \
      --data "$body")
    if [ "$(json "$WORK/raw.json" '(d.get("error") or {}).get("code")')" = -32021 ] \
      && [ "$(json "$WORK/raw.json" '"io.modelcontextprotocol/tasks" in (((d.get("error") or {}).get("data") or {}).get("requiredCapabilities") or {}).get("extensions", {})')" = true ]; then
      pass "fixture-required-undeclared-32021/http"
      echo "# raw tools/call required_only without the extension: HTTP $code $(head -c 300 "$WORK/raw.json")"
    else
      fail "fixture-required-undeclared-32021/http" "HTTP $code $(head -c 300 "$WORK/raw.json")"
    fi
  fi
fi

finish
