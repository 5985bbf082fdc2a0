#!/usr/bin/env python3
"""Instructions per live creation, counted by callgrind (not by the clock: the machines are shared).

Serve one peer of the peers bench under callgrind, then run this against it:

    MCP_TASKS_PEERS_SERVE=4 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        target/release/deps/peers-HASH &        # 4: ours, memory; 1: the lean anchor
    python3 crates/mcp-tasks/benches/creations.py http://127.0.0.1:PORT/mcp PID

It sends WARM (200) creations of the `live` tool to warm the server, zeroes callgrind's counters
(`callgrind_control -z PID`), sends COUNT (2,000) creations from CONNECTIONS (16) keep-alive
connections, checks each answer is a task, waits 1.5 s for the last tools to complete, dumps
(`callgrind_control -d PID`) and prints the dump's total over COUNT.
"""
import glob
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

url, pid = sys.argv[1], sys.argv[2]
warm = int(os.environ.get("WARM", "200"))
count = int(os.environ.get("COUNT", "2000"))
connections = int(os.environ.get("CONNECTIONS", "16"))
parsed = urllib.parse.urlparse(url)
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}
BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "live", "arguments": {}, "_meta": META}})
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "live",
}


def send(n, failures):
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    for _ in range(n):
        conn.request("POST", parsed.path, BODY, HEADERS)
        reply = conn.getresponse().read()
        answer = json.loads(reply)
        if answer.get("result", {}).get("resultType") != "task":
            failures.append(reply[:200])


def drive(total):
    failures, threads = [], []
    for k in range(connections):
        share = total // connections + (1 if k < total % connections else 0)
        threads.append(threading.Thread(target=send, args=(share, failures)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        sys.exit(f"{len(failures)} answers were not tasks, e.g. {failures[0]!r}")


drive(warm)
time.sleep(0.5)
subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
drive(count)
time.sleep(1.5)
before = set(glob.glob("/tmp/cg.*"))
subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
time.sleep(0.5)
dumps = sorted(set(glob.glob("/tmp/cg.*")) - before, key=os.path.getmtime) or sorted(
    glob.glob("/tmp/cg.*"), key=os.path.getmtime)
total = 0
for line in open(dumps[-1]):
    if line.startswith("summary:") or line.startswith("totals:"):
        total = int(line.split()[1])
print(f"{total / count:,.0f} instructions per live creation ({count} creations, {dumps[-1]})")
