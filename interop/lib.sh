# Shared by the interop check scripts (source it): PASS/FAIL lines and their count, the
# JSON that `mcp-tasks call --json` printed read with Python expressions, and the URL a
# server prints when it listens.

FAILS=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; FAILS=$((FAILS + 1)); }

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

# listening FILE PID: the URL a server started as PID printed to FILE as
# "listening on URL" (waits up to 30 s, or until PID exits; "" if none).
listening() {
  local url=
  for _ in $(seq 300); do
    url=$(sed -n 's/^listening on //p' "$1" 2>/dev/null | head -n 1)
    [ -n "$url" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  echo "$url"
}
