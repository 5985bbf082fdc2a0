# shellcheck shell=bash
# Shared by the interop check scripts and interop/run (source it, from bash): PASS/FAIL
# lines, their count and the exit status; the JSON that `mcp-tasks call --json` printed,
# read with Python expressions; background servers and temp dirs that go away when the
# script exits, however it exits; and the waits (a "listening on URL" line, a condition).
#
# Sourcing it installs `trap cleanup EXIT`: a script sourcing it sets no EXIT trap of its
# own (it would replace this one), and starts its servers with start_bg or start_server
# and makes its temp dirs with temp_dir so that cleanup knows them.

FAILS=0
PASSES=0
LIB_PIDS=()   # the background processes start_bg started and stop_bg has not stopped
LIB_DIRS=()   # the temp dirs temp_dir made

# pass NAME: prints "PASS NAME" and counts it.
pass() { echo "PASS $1"; PASSES=$((PASSES + 1)); }
# fail NAME WHY: prints "FAIL NAME: WHY" and counts it.
fail() { echo "FAIL $1: $2"; FAILS=$((FAILS + 1)); }

# fail_log NAME FILE [LINES]: fail NAME, the last LINES (5) lines of FILE as the reason
# (a server's log when it did not start or died).
fail_log() { fail "$1" "$(tail -n "${3:-5}" "$2" 2>/dev/null)"; }

# finish: prints "# P passed, F failed" and exits: 1 if any check failed, else 0.
finish() {
  echo "# $PASSES passed, $FAILS failed"
  [ "$FAILS" -eq 0 ] || exit 1
  exit 0
}

# json FILE PYTHON-EXPRESSION: evaluates the expression with `d` = the JSON object in FILE,
# `t` = d's concatenated result text, `reqs` = d's input requests and `env` = the
# environment; prints the value ("" for None, JSON for non-str). Runs $PY, else python3.
json() {
  "${PY:-python3}" - "$1" "$2" <<'PYTHON'
import json, os, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    d = {}
res = d.get("result") or {}
t = " ".join(c.get("text", "") for c in res.get("content", []) if isinstance(c, dict))
reqs = res.get("inputRequests") or {}
env = os.environ
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = f"<{type(e).__name__}: {e}>"
print("" if v is None else v if isinstance(v, str) else json.dumps(v))
PYTHON
}

# expect NAME OUT RC WANT COND: PASS when the exit status RC is WANT and the Python
# condition COND holds over the JSON in OUT (see json); FAIL saying which did not,
# with the start of OUT and of OUT.err when there is one.
expect() {
  local name=$1 out=$2 rc=$3 want=$4 cond=$5
  if [ "$rc" -ne "$want" ]; then
    fail "$name" "exit $rc, expected $want: $(head -c 400 "$out") $(head -c 400 "$out.err" 2>/dev/null)"
  elif [ "$(json "$out" "bool($cond)")" != "true" ]; then
    fail "$name" "not ($cond): $(head -c 400 "$out")"
  else
    pass "$name"
  fi
}

# wait_for [--every INTERVAL] SECONDS CMD...: runs CMD (a command or a function, in this
# shell, so a function may set variables) until it succeeds, INTERVAL (0.1) seconds apart,
# SECONDS/INTERVAL times at most (once at least): SECONDS is the time spent sleeping between
# the tries, CMD's own time comes on top. Returns 0 as soon as CMD succeeds, 1 if it never did.
wait_for() {
  # Locals named so that CMD, run in their scope, neither sees nor sets them by accident.
  local _lib_every=0.1 _lib_tries _lib_i
  if [ "$1" = --every ]; then _lib_every=$2; shift 2; fi
  _lib_tries=$(awk -v s="$1" -v e="$_lib_every" 'BEGIN { n = s / e; n = (n > int(n)) ? int(n) + 1 : int(n); print (n < 1) ? 1 : n }')
  shift
  for ((_lib_i = 1; _lib_i <= _lib_tries; _lib_i++)); do
    "$@" && return 0
    [ "$_lib_i" -lt "$_lib_tries" ] && sleep "$_lib_every"
  done
  return 1
}

# listening FILE PID [SECONDS]: the URL a server started as PID printed to FILE as
# "listening on URL" (waits up to SECONDS, 30, or until PID exits; "" if none).
listening() {
  wait_for "${3:-30}" _listening_or_gone "$1" "$2"
  sed -n 's/^listening on //p' "$1" 2>/dev/null | head -n 1
}
_listening_or_gone() { grep -q '^listening on ' "$1" 2>/dev/null || ! kill -0 "$2" 2>/dev/null; }

# free_port: prints a TCP port of 127.0.0.1 that was free a moment ago.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# temp_dir VAR NAME: makes a new directory ${TMPDIR:-/tmp}/NAME.XXXXXX, sets VAR to its
# path, and has cleanup remove it. Exits 1 when it cannot.
temp_dir() {
  local _lib_dir  # a name no caller's VAR has: a local VAR would hide the caller's
  _lib_dir=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX") || { echo "cannot make a temp dir" >&2; exit 1; }
  LIB_DIRS+=("$_lib_dir")
  printf -v "$1" '%s' "$_lib_dir"
}

# start_bg LOG CMD...: starts CMD in the background in a process group of its own
# (setsid), its stdout to LOG.out and its stderr to LOG.err, and records it for cleanup.
# Sets BG_PID to its PID, which is also its process group's id (`kill -- -PID` reaches
# the children it started too). CMD is a command, not a function or an assignment:
# `start_bg LOG env PORT=1234 node server.js`.
start_bg() {
  local log=$1
  shift
  setsid "$@" >"$log.out" 2>"$log.err" &
  BG_PID=$!
  LIB_PIDS+=("$BG_PID")
}

# start_server VAR NAME LOG CMD...: start_bg LOG CMD..., then waits (listening, 30 s) for
# its "listening on URL" line in LOG.out and sets VAR to the URL. If none comes (or the
# process exits first): FAIL NAME with the end of LOG.err, and returns 1. Sets BG_PID.
start_server() {
  # Locals named so that no caller's VAR is one of them (it would set the local instead).
  local _lib_var=$1 _lib_name=$2 _lib_log=$3 _lib_url
  shift 3
  start_bg "$_lib_log" "$@"
  _lib_url=$(listening "$_lib_log.out" "$BG_PID")
  printf -v "$_lib_var" '%s' "$_lib_url"
  [ -n "$_lib_url" ] && return 0
  fail_log "$_lib_name" "$_lib_log.err"
  return 1
}

# stop_bg PID [SIGNAL]: stops the process group of PID (started by start_bg): SIGNAL (TERM),
# then KILL to what is left of the group after STOP_GRACE seconds; waits for PID to exit
# and forgets it (cleanup will not stop it again).
stop_bg() {
  local pid=$1 p kept=()
  _lib_stop "${2:-TERM}" "$pid"
  for p in ${LIB_PIDS[@]+"${LIB_PIDS[@]}"}; do [ "$p" = "$pid" ] || kept+=("$p"); done
  LIB_PIDS=(${kept[@]+"${kept[@]}"})
}

# How long a stopped server may take to exit before its group gets KILL: mcp-tasks serve
# drains on TERM for up to 30 s (its --drain-timeout) while tasks run, and a check's
# outcome never depends on that drain.
STOP_GRACE=${STOP_GRACE:-10}

# _lib_stop SIGNAL PID...: sends SIGNAL to each PID's process group (to PID alone if it
# leads none), waits up to STOP_GRACE seconds for them all to exit, sends KILL to each
# group (whatever of it is left), and reaps the PIDs.
_lib_stop() {
  local sig=$1 pid
  shift
  for pid in "$@"; do kill -"$sig" -- "-$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null; done
  wait_for "$STOP_GRACE" _lib_all_gone "$@"
  for pid in "$@"; do kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null; done
  for pid in "$@"; do wait "$pid" 2>/dev/null; done
}
_lib_all_gone() {
  local pid
  for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 1; done
  return 0
}

# cleanup: the EXIT trap. Stops every process group start_bg started and stop_bg did not
# (TERM, KILL after STOP_GRACE seconds), then removes every temp_dir. The script's exit
# status is kept.
cleanup() {
  local dir
  [ "${#LIB_PIDS[@]}" -eq 0 ] || _lib_stop TERM "${LIB_PIDS[@]}"
  LIB_PIDS=()
  for dir in ${LIB_DIRS[@]+"${LIB_DIRS[@]}"}; do rm -rf "$dir"; done
  LIB_DIRS=()
}
trap cleanup EXIT
