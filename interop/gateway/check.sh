#!/usr/bin/env bash
# The task gateway (`mcp-tasks serve --upstream` / `--upstream-url`) in front of real
# third-party servers, driven by our client (the mcp-tasks binary, 2026-07-28 with the
# Tasks extension):
#
#   * @modelcontextprotocol/server-everything 2026.8.31 (a 2025-11-25 server with legacy
#     tasks) over stdio, behind a gateway on stdio, and over its Streamable HTTP behind a
#     gateway on HTTP: trigger-long-running-operation becomes a task whose status follows
#     the progress notifications, trigger-elicitation-request becomes input_required
#     answered with tasks/update, echo passes through synchronously (--tasks
#     echo=forbidden), simulate-research-query (its own legacy task) is awaited and its
#     elicitation relayed, Ctrl-C cancels; over HTTP, server-everything restarted mid-task
#     (its sessions lost) fails that task saying so and the next call works; a gateway on
#     SQLite killed or drained while it follows server-everything's task (which the
#     TypeScript SDK v1 keeps for its session) takes the session over after its restart
#     and follows the task to its end, and so does a replica on Redis after the other's drain;
#   * the fastmcp-tasks fixture server of interop/fastmcp (the extension, poll only) over
#     HTTP behind a gateway on HTTP: its tasks awaited and relayed (slow, ask_name with
#     its `<taskId>:<hex>` input keys, tool_error's isError, mrtr_then_task's MRTR round),
#     greet passed through, and tasks/cancel sent on (seen in the fixture's trace); a
#     gateway on SQLite killed mid-task follows the same fastmcp task after its restart, and
#     on two gateway replicas on one redis-server a task's input asked on A is answered on B.
#
# Usage: check.sh MCP_TASKS_BIN PYTHON
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
#   PYTHON         a python with fastmcp[tasks] (interop/.venv/bin/python, as interop/run makes)
# Needs node and interop/node_modules (npm ci in interop/, as interop/run does).
# Env: ONLY=everything-stdio|everything-http|fastmcp runs one part.
#
# Prints "PASS name" / "FAIL name: why" per check, "# ..." notes, and exits 1 if any
# check failed, 64 on bad usage (a missing peer included: never a silent skip).

set -u

if [ $# -ne 2 ]; then
  sed -n "24,28p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
PY=$2
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
EVERYTHING=$HERE/../node_modules/@modelcontextprotocol/server-everything/dist/index.js
FASTMCP=$HERE/../fastmcp/server.py
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 64; }
[ -f "$EVERYTHING" ] || { echo "no server-everything at $EVERYTHING (npm ci in interop/)" >&2; exit 64; }
command -v node >/dev/null || { echo "no node on PATH" >&2; exit 64; }
"$PY" -c 'import fastmcp' 2>/dev/null || { echo "no fastmcp in $PY (pip install -r interop/fastmcp/requirements.txt)" >&2; exit 64; }

# pass, fail, fail_log, expect, finish, temp_dir, start_bg, start_server, stop_bg,
# wait_for, free_port (its EXIT trap stops the servers and removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK gateway-check
export MCP_TASKS_JOURNAL=$WORK/journal.sqlite3

# gateway_http NAME ARGS...: starts `mcp-tasks serve --http` with ARGS; sets GATEWAY_URL.
gateway_http() {
  local name=$1
  shift
  start_server GATEWAY_URL "the gateway starts/$name" "$WORK/$name" \
    "$BIN" serve --http 127.0.0.1:0 --store memory --poll-interval 100 "$@"
}

# everything_http LOG PORT: starts server-everything on its Streamable HTTP on PORT (it
# prints "listening on port" to LOG.err); sets EVERYTHING_PID.
everything_http() {
  start_bg "$1" env PORT="$2" node -r "$HERE/../everything/loopback.cjs" "$EVERYTHING" streamableHttp
  EVERYTHING_PID=$BG_PID
}

# start_redis NAME: starts a redis-server on a free port for the gateway replicas of
# NAME; sets REDIS_URL.
start_redis() {
  local redis_port
  redis_port=$(free_port)
  start_bg "$WORK/redis-$1" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" \
    --appendonly no
  REDIS_URL=redis://127.0.0.1:$redis_port/0
  redis_up() { redis-cli -p "$redis_port" ping 2>/dev/null | grep -q PONG; }
  wait_for 10 redis_up && return 0
  fail "redis-server starts/$1" "$(tail -n 5 "$WORK/redis-$1.err")"
  return 1
}

# gateway_replica NAME UPSTREAM_URL: a gateway replica on $REDIS_URL in front of
# UPSTREAM_URL (1 s drains, 2 s leases); sets GATEWAY_URL and BG_PID.
gateway_replica() {
  start_server GATEWAY_URL "gateway replica $1 starts" "$WORK/$1" \
    "$BIN" serve --http 127.0.0.1:0 --store "$REDIS_URL" --poll-interval 100 \
    --lease-period 2000 --drain-timeout 1 --upstream-url "$2"
}

everything_checks() {
  local tr=$1
  shift
  local out=$WORK/$tr.json rc

  "$BIN" call "$@" --json trigger-long-running-operation --arg duration=2 --arg steps=4 \
    >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "trigger-long-running-operation becomes a task/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and d.get("taskId") and "Long running operation completed" in t'

  "$BIN" call "$@" trigger-long-running-operation --arg duration=2 --arg steps=4 \
    >"$WORK/$tr.txt" 2>"$WORK/$tr.err"; rc=$?
  if [ "$rc" -eq 0 ] && grep -q "working 1/4" "$WORK/$tr.err" && grep -q "working 3/4" "$WORK/$tr.err"; then
    pass "its status follows the progress notifications/$tr"
  else
    fail "its status follows the progress notifications/$tr" "exit $rc: $(head -c 400 "$WORK/$tr.err")"
  fi

  "$BIN" call "$@" --json trigger-elicitation-request --answer name=Ada >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "trigger-elicitation-request is input_required answered with tasks/update/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and d.get("taskId") and "Name: Ada" in t'

  "$BIN" call "$@" --json trigger-elicitation-request --input fail >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "the elicitation is the gateway task's input request/$tr" "$out" $rc 4 \
    'd["status"] == "input_required" and
     [r["method"] for r in d["result"]["inputRequests"].values()] == ["elicitation/create"] and
     all(k.startswith("upstream-") for k in d["result"]["inputRequests"])'

  "$BIN" call "$@" --json echo --arg message=hi >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "echo passes through synchronously/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and t == "Echo: hi" and "taskId" not in d'

  "$BIN" call "$@" --json simulate-research-query --arg topic=python --arg ambiguous=true \
    --answer interpretation=snake >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "its own legacy task is awaited and its elicitation relayed/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and "**Clarification**: snake" in t'

  "$BIN" call "$@" --json trigger-long-running-operation --arg duration=30 --arg steps=30 \
    >"$out" 2>"$WORK/$tr.err" &
  local pid=$!
  sleep 3
  kill -INT "$pid"
  wait "$pid"; rc=$?
  expect "Ctrl-C cancels the gateway task/$tr" "$out" $rc 3 \
    'd["status"] == "cancelled" and d.get("taskId")'
}

if [ -z "${ONLY:-}" ] || [ "$ONLY" = everything-stdio ]; then
  gateway="$BIN serve --stdio --store memory --poll-interval 100 --upstream 'node $EVERYTHING stdio' --tasks echo=forbidden"
  echo "# stdio: $BIN call --stdio \"$gateway\""
  everything_checks everything-stdio --stdio "$gateway"
fi

if [ -z "${ONLY:-}" ] || [ "$ONLY" = everything-http ]; then
  port=$(free_port)
  everything_http "$WORK/everything-http-server" "$port"
  if ! wait_for 10 grep -q "listening on port" "$WORK/everything-http-server.err"; then
    fail_log "server-everything starts on HTTP" "$WORK/everything-http-server.err"
  elif gateway_http everything-gateway --upstream-url "http://127.0.0.1:$port/mcp" --tasks echo=forbidden; then
    echo "# http: $BIN call --url $GATEWAY_URL (gateway in front of http://127.0.0.1:$port/mcp)"
    everything_checks everything-http --url "$GATEWAY_URL"

    # server-everything restarted: its sessions are gone. The task running on the old
    # session fails saying so (the gateway's health ping gives the session up), and the
    # next call works on a new session.
    out=$WORK/restart.json
    "$BIN" call --url "$GATEWAY_URL" --json trigger-long-running-operation --arg duration=30 \
      --arg steps=30 >"$out" 2>"$WORK/restart.err" &
    cpid=$!
    sleep 2
    stop_bg "$EVERYTHING_PID"
    everything_http "$WORK/everything-http-server2" "$port"
    wait "$cpid"; rc=$?
    expect "a restarted upstream fails the task it cut off, saying so/everything-http" "$out" $rc 2 \
      'd["status"] == "failed" and d.get("taskId") and "exited or crashed, or stopped answering" in d["error"]["message"]'
    echo_again() {
      "$BIN" call --url "$GATEWAY_URL" --json echo --arg message=again >"$out" 2>"$WORK/restart.err"; rc=$?
      [ "$rc" -eq 0 ]
    }
    wait_for --every 0.5 25 echo_again
    expect "the next call works on a new session/everything-http" "$out" $rc 0 't == "Echo: again"'

    # A gateway on SQLite killed while it follows server-everything's own (2025-11-25)
    # task, which the TypeScript SDK v1 keeps for the session that made it only: started
    # again, the gateway takes that session over and follows the task to its end; the same
    # after a drain (SIGTERM) that left the task for the next start.
    gport=$(free_port)
    sqlite_gateway() {
      start_server GATEWAY_URL "the gateway on SQLite starts/$1" "$WORK/$1" \
        "$BIN" serve --http "127.0.0.1:$gport" --store "sqlite:$WORK/everything-gateway.db" \
        --poll-interval 100 --upstream-url "http://127.0.0.1:$port/mcp"
    }
    if sqlite_gateway everything-sqlite; then
      first=$BG_PID
      "$BIN" call --url "$GATEWAY_URL" --no-wait simulate-research-query --arg topic=rust \
        >"$WORK/research.id" 2>"$WORK/research.err"
      sleep 1
      stop_bg "$first" KILL
      if sqlite_gateway everything-sqlite-again; then
        "$BIN" wait --url "$GATEWAY_URL" --json "$(tail -n 1 "$WORK/research.id")" >"$out" \
          2>"$WORK/research.werr"; rc=$?
        expect "a gateway killed mid-task follows the session's task again after its restart/everything-http" \
          "$out" $rc 0 'd["status"] == "completed" and "simulated research report" in t'
        "$BIN" call --url "$GATEWAY_URL" --no-wait simulate-research-query --arg topic=go \
          >"$WORK/research.id" 2>"$WORK/research.err"
        sleep 0.5
        stop_bg "$BG_PID" TERM
        if sqlite_gateway everything-sqlite-third; then
          "$BIN" wait --url "$GATEWAY_URL" --json "$(tail -n 1 "$WORK/research.id")" >"$out" \
            2>"$WORK/research.werr"; rc=$?
          expect "a drained gateway's task is followed again after its restart/everything-http" \
            "$out" $rc 0 'd["status"] == "completed" and "simulated research report" in t'
        fi
      fi
    fi

    # Two gateway replicas on one redis-server: A drains (SIGTERM) while it follows
    # server-everything's task; B takes the task over and follows it on A's session.
    if start_redis everything && gateway_replica everything-a "http://127.0.0.1:$port/mcp" &&
      a_url=$GATEWAY_URL && a_pid=$BG_PID &&
      gateway_replica everything-b "http://127.0.0.1:$port/mcp"; then
      "$BIN" call --url "$a_url" --no-wait simulate-research-query --arg topic=zig \
        >"$WORK/research.id" 2>"$WORK/research.err"
      sleep 0.5
      stop_bg "$a_pid" TERM
      "$BIN" wait --url "$GATEWAY_URL" --json "$(tail -n 1 "$WORK/research.id")" >"$out" \
        2>"$WORK/research.werr"; rc=$?
      expect "a task handed over by a draining replica is followed on its session/everything-http" \
        "$out" $rc 0 'd["status"] == "completed" and "simulated research report" in t'
    fi
  fi
fi

if [ -z "${ONLY:-}" ] || [ "$ONLY" = fastmcp ]; then
  trace=$WORK/fastmcp-trace.jsonl
  : >"$trace"
  upstream=''  # set by start_server
  if start_server upstream "the fastmcp server starts" "$WORK/fastmcp" \
      env FIXTURE_TRACE="$trace" FIXTURE_POLL_MS=100 "$PY" "$FASTMCP" http 127.0.0.1:0 &&
    gateway_http fastmcp-gateway --upstream-url "$upstream" --tasks greet=forbidden; then
    echo "# fastmcp: $BIN call --url $GATEWAY_URL (gateway in front of $upstream)"
    out=$WORK/fastmcp.json
    "$BIN" call --url "$GATEWAY_URL" --json slow --arg seconds=0.3 >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "its task is awaited and relayed/fastmcp" "$out" $rc 0 \
      'd["status"] == "completed" and d.get("taskId") and t == "slept 0.3 s"'

    "$BIN" call --url "$GATEWAY_URL" --json ask_name --answer name=Ada >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "its in-task elicitation is relayed under the gateway's keys/fastmcp" "$out" $rc 0 \
      'd["status"] == "completed" and t == "Hello, Ada!"'

    "$BIN" call --url "$GATEWAY_URL" --json ask_name --input fail >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "no upstream task id in the relayed input keys/fastmcp" "$out" $rc 4 \
      'd["status"] == "input_required" and
       all(k.startswith("upstream-task-") and ":" not in k for k in d["result"]["inputRequests"])'

    "$BIN" call --url "$GATEWAY_URL" --json tool_error >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "isError completes the task/fastmcp" "$out" $rc 1 \
      'd["status"] == "completed" and t == "tool error"'

    "$BIN" call --url "$GATEWAY_URL" --json mrtr_then_task --answer name=Bob >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "an MRTR round before its task is relayed/fastmcp" "$out" $rc 0 \
      'd["status"] == "completed" and t == "Hello, Bob!"'

    "$BIN" call --url "$GATEWAY_URL" --json greet --arg name=Cy >"$out" 2>"$WORK/fastmcp.cerr"; rc=$?
    expect "greet passes through synchronously/fastmcp" "$out" $rc 0 \
      'd["status"] == "completed" and t == "Hello, Cy!" and "taskId" not in d'

    "$BIN" call --url "$GATEWAY_URL" --json cancellable >"$out" 2>"$WORK/fastmcp.cerr" &
    cpid=$!
    sleep 2
    kill -INT "$cpid"
    wait "$cpid"; rc=$?
    expect "Ctrl-C cancels the gateway task/fastmcp" "$out" $rc 3 'd["status"] == "cancelled"'
    cancel_traced() {
      [ "$(python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if l.strip() and json.loads(l).get("event") == "tasks/cancel"))' "$trace")" -gt 0 ] 2>/dev/null
    }
    if wait_for 5 cancel_traced; then
      pass "tasks/cancel is sent on to the fastmcp task/fastmcp"
    else
      fail "tasks/cancel is sent on to the fastmcp task/fastmcp" "no tasks/cancel in the fixture's trace"
    fi

    # A gateway on SQLite killed (SIGKILL) while it follows a fastmcp task, started again
    # on the same file and port: it follows the same task to its end.
    port=$(free_port)
    restart_gateway() {
      start_server GATEWAY_URL "the gateway on SQLite starts/$1" "$WORK/$1" \
        "$BIN" serve --http "127.0.0.1:$port" --store "sqlite:$WORK/gateway.db" \
        --poll-interval 100 --upstream-url "$upstream"
    }
    if restart_gateway fastmcp-sqlite; then
      first=$BG_PID
      "$BIN" call --url "$GATEWAY_URL" --no-wait slow --arg seconds=4 >"$WORK/slow.id" 2>"$WORK/slow.err"
      sleep 1
      stop_bg "$first" KILL
      if restart_gateway fastmcp-sqlite-again; then
        "$BIN" wait --url "$GATEWAY_URL" --json "$(tail -n 1 "$WORK/slow.id")" >"$out" \
          2>"$WORK/fastmcp.werr"; rc=$?
        expect "a gateway killed mid-task follows the fastmcp task again after its restart/fastmcp" \
          "$out" $rc 0 'd["status"] == "completed" and t == "slept 4 s"'
      fi
    fi

    # Two gateway replicas on one redis-server: a fastmcp task that asks for input,
    # called on A, is answered and read on B.
    if start_redis fastmcp && gateway_replica fastmcp-a "$upstream" && a_url=$GATEWAY_URL &&
      gateway_replica fastmcp-b "$upstream"; then
      "$BIN" call --url "$a_url" --no-wait ask_name >"$WORK/ask.id" 2>"$WORK/ask.err"
      "$BIN" wait --url "$GATEWAY_URL" --json --answer name=Ada "$(tail -n 1 "$WORK/ask.id")" \
        >"$out" 2>"$WORK/ask.werr"; rc=$?
      expect "input asked on replica A is answered on replica B/fastmcp" "$out" $rc 0 \
        'd["status"] == "completed" and t == "Hello, Ada!"'
    fi
  fi
fi

finish
