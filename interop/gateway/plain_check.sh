#!/usr/bin/env bash
# The task gateway (`mcp-tasks serve --upstream` / `--upstream-url`) in front of a plain
# fastmcp 4.1.4 server WITHOUT the Tasks extension (interop/fastmcp/plain_server.py), driven
# by our client (the mcp-tasks binary). fastmcp speaks both eras and refuses, on each, the
# other era's way of asking for input: ctx.elicit() (a server-initiated request) only works on
# a 2025-era session, an MRTR round (a tool returning an InputRequiredResult) only on
# 2026-07-28. Through the gateway both become the task's input_required, answered with
# tasks/update; the roots given with --upstream-root are what the server reads for its session
# at start-up; greet passes through synchronously (--tasks greet=forbidden).
#
#   * stdio: a gateway on stdio (`mcp-tasks call --stdio 'mcp-tasks serve --stdio
#     --upstream "python plain_server.py stdio" ...'`), a fresh one per call;
#   * http: the server on its Streamable HTTP (stateful sessions) behind a gateway on HTTP;
#     also two MRTR rounds answered one `mcp-tasks wait` at a time, and a task cancelled
#     while its MRTR round waits for input.
#
# Usage: plain_check.sh MCP_TASKS_BIN PYTHON
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
#   PYTHON         a python with fastmcp (interop/.venv/bin/python, as interop/run makes)
# Env: ONLY=stdio|http runs one part.
#
# Prints "PASS name" / "FAIL name: why" per check, "# ..." notes, and exits 1 if any
# check failed, 64 on bad usage (a missing peer included: never a silent skip).

set -u

if [ $# -ne 2 ]; then
  sed -n "17,20p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
PY=$2
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
SERVER=$HERE/../fastmcp/plain_server.py
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 64; }
"$PY" -c 'import fastmcp' 2>/dev/null || { echo "no fastmcp in $PY (pip install -r interop/fastmcp/requirements.txt)" >&2; exit 64; }

# json, expect, finish, temp_dir, start_server (its EXIT trap stops the servers and
# removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK gateway-plain-check
export MCP_TASKS_JOURNAL=$WORK/journal.sqlite3
mkdir -p "$WORK/roots/projects" "$WORK/roots/my docs"
ROOTS=(--upstream-root "$WORK/roots/projects" --upstream-root "$WORK/roots/my docs")
export WANT_ROOTS="roots: file://$WORK/roots/projects, file://$WORK/roots/my%20docs"

# checks TRANSPORT CONNECT-ARGS...: the checks both transports share.
checks() {
  local tr=$1
  shift
  local out=$WORK/$tr.json rc

  "$BIN" call "$@" --json ask_push --answer value=Ada >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "ctx.elicit (a server-initiated request) is the task's input, answered/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and d.get("taskId") and t == "Hello, Ada!"'

  "$BIN" call "$@" --json ask_push --input fail >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "ctx.elicit is an elicitation/create input request of the gateway task/$tr" "$out" $rc 4 \
    'd["status"] == "input_required" and [r["method"] for r in reqs.values()] == ["elicitation/create"]
     and all(k.startswith("upstream-") for k in reqs)'

  "$BIN" call "$@" --json ask_mrtr --answer name=Bo >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "an MRTR round is the task's input, answered, the call retried/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and d.get("taskId") and t == "Hello, Bo!"'

  "$BIN" call "$@" --json ask_mrtr --input fail >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "the MRTR round is the gateway task's input request, under the gateway's keys/$tr" "$out" $rc 4 \
    'd["status"] == "input_required" and
     [r["params"]["message"] for r in reqs.values()] == ["What is your name? (MRTR)"] and
     all(k.startswith("upstream-") for k in reqs)'

  "$BIN" call "$@" --json startup_roots >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "the roots it read for its session are --upstream-root's/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and t.startswith(env["WANT_ROOTS"] + " (read ")'

  "$BIN" call "$@" --json greet --arg name=Cy >"$out" 2>"$WORK/$tr.err"; rc=$?
  expect "greet passes through synchronously/$tr" "$out" $rc 0 \
    'd["status"] == "completed" and t == "Hello, Cy!" and "taskId" not in d'
}

if [ -z "${ONLY:-}" ] || [ "$ONLY" = stdio ]; then
  gateway="$BIN serve --stdio --store memory --poll-interval 100 --upstream '$PY $SERVER stdio' --tasks greet=forbidden"
  gateway+=" --upstream-root '$WORK/roots/projects' --upstream-root '$WORK/roots/my docs'"
  echo "# stdio: $BIN call --stdio \"$gateway\""
  checks stdio --stdio "$gateway"
fi

if [ -z "${ONLY:-}" ] || [ "$ONLY" = http ]; then
  upstream='' url=''  # set by start_server
  if start_server upstream "the fastmcp server starts" "$WORK/server" "$PY" "$SERVER" http 127.0.0.1:0 &&
    start_server url "the gateway starts" "$WORK/gateway" "$BIN" serve --http 127.0.0.1:0 --store memory \
      --poll-interval 100 --upstream-url "$upstream" --tasks greet=forbidden "${ROOTS[@]}"; then
    echo "# http: $BIN call --url $url (gateway in front of $upstream)"
    checks http --url "$url"
    out=$WORK/rounds.json

    # Two MRTR rounds (a name, then a colour, the name kept in the upstream's
    # requestState), answered one `wait` at a time: the CLI takes only --answers that
    # fit the round in front of it.
    "$BIN" call --url "$url" --json ask_mrtr_twice --input fail >"$out" 2>"$WORK/rounds.err"; rc=$?
    expect "round 1 of 2 is the task's input/http" "$out" $rc 4 \
      'd["status"] == "input_required" and
       [r["params"]["message"] for r in reqs.values()] == ["What is your name? (round 1)"]'
    id=$(json "$out" 'd.get("taskId", "")')
    "$BIN" wait --url "$url" "$id" --answer name=Dee >/dev/null 2>"$WORK/rounds.err"
    "$BIN" get --url "$url" --json "$id" >"$out" 2>>"$WORK/rounds.err"; rc=$?
    expect "round 1 answered, round 2 is the task's next input/http" "$out" $rc 4 \
      'd["status"] == "input_required" and
       [r["params"]["message"] for r in reqs.values()] == ["Dee, what is your favourite colour? (round 2)"]'
    "$BIN" wait --url "$url" --json "$id" --answer colour=teal >"$out" 2>>"$WORK/rounds.err"; rc=$?
    expect "round 2 answered, the task completes/http" "$out" $rc 0 \
      'd["status"] == "completed" and t == "Dee likes teal"'

    # A task cancelled while its MRTR round waits for input.
    "$BIN" call --url "$url" --json ask_mrtr --input fail >"$out" 2>"$WORK/rounds.err"
    id=$(json "$out" 'd.get("taskId", "")')
    "$BIN" cancel --url "$url" --json "$id" >"$out" 2>>"$WORK/rounds.err"; rc=$?
    expect "a task cancelled during its MRTR round is cancelled/http" "$out" $rc 3 \
      'd["status"] == "cancelled"'
  fi
fi

finish
