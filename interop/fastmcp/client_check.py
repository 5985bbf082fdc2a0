"""fastmcp's own client (fastmcp[tasks]==4.1.4) against OUR server (`conformance-server`,
the fixture server of crates/mcp-tasks-conformance, on the library's task runtime).

Usage:
    python client_check.py SERVER_BIN           # stdio: SERVER_BIN --stdio --store memory --poll-interval 100
    python client_check.py SERVER_BIN --http    # Streamable HTTP: SERVER_BIN --http 127.0.0.1:0 ...
(SERVER_BIN: e.g. target/debug/conformance-server, from `cargo build -p mcp-tasks-conformance`.)

Prints one line per check, "PASS name" or "FAIL name: why" (and, over HTTP,
"EXPECTED-FAIL mcp-name: ..." for the known fastmcp client quirk), and exits 1 if
any check FAILed, 0 otherwise (EXPECTED-FAIL lines do not count as failures).

Over stdio the server runs behind `tee`, so every JSON-RPC line in both directions
is also checked (tasks/update and tasks/cancel really went out, with the Tasks
extension declared in `_meta`). Over HTTP, an httpx event hook records each POST's
headers and the HTTP status of its answer.

HTTP mode runs the checks twice: first with fastmcp's client as shipped (its
`tasks/*` requests carry no `Mcp-Name`, which our server answers with HTTP 400 and
-32020: reported as EXPECTED-FAIL), then with a request hook that adds
`Mcp-Name: <taskId>` from the body, to show that this header is the only problem.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from typing import Any, Awaitable, Callable

import httpx2
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp_tasks import call_tool_task

TASKS_EXT = "io.modelcontextprotocol/tasks"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"

failures = 0


def report(name: str, ok: bool, why: str = "") -> None:
    global failures
    if ok:
        print(f"PASS {name}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {why}", flush=True)


def text_of(result: Any) -> str:
    return " ".join(
        getattr(block, "text", "") for block in (getattr(result, "content", None) or [])
    )


class Elicitor:
    """fastmcp elicitation handler: answers confirm_delete's form with confirm=true."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, message, response_type, params, context):  # noqa: ANN001
        schema = getattr(params, "requested_schema", None) or {}
        self.seen.append((message, schema))
        return {"confirm": True}


async def check(name: str, body: Callable[[], Awaitable[None]], timeout: float = 30) -> None:
    try:
        await asyncio.wait_for(body(), timeout)
    except AssertionError as error:
        report(name, False, str(error) or "assertion failed")
    except Exception as error:  # noqa: BLE001
        report(name, False, f"{type(error).__name__}: {error}")


async def run_checks(
    make_client: Callable[[Elicitor], Client], wire: "Wire", calls_with_token: Callable[[], int]
) -> None:
    """`calls_with_token()` counts the `tools/call`s sent so far with a `progressToken`."""
    elicitor = Elicitor()
    async with make_client(elicitor) as client:

        async def tools() -> None:
            names = {tool.name for tool in await client.list_tools()}
            missing = {"slow_compute", "confirm_delete", "greet"} - names
            assert not missing, f"tools/list lacks {sorted(missing)}"
            report("tools", True)

        async def slow_compute_task() -> None:
            task = await call_tool_task(client, "slow_compute", {"seconds": 0.2, "label": "task"})
            created = task.create_result
            assert created.status == "working", f"created as {created.status}"
            assert created.ttl_ms is not None, "no ttlMs"
            final = await task.wait(timeout=15)  # polls tasks/get
            assert final.status == "completed", f"ended {final.status}: {final.error}"
            result = await task.result()
            assert text_of(result) == "task: computed in 0.2 s", f"text {text_of(result)!r}"
            report("slow_compute-task", True)

        async def slow_compute_transparent() -> None:
            # call_tool drives the task itself (fastmcp's ResultClaim for resultType "task").
            result = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "call"})
            assert text_of(result) == "call: computed in 0.2 s", f"text {text_of(result)!r}"
            report("slow_compute-call_tool", True)

        async def confirm_delete() -> None:
            task = await call_tool_task(client, "confirm_delete", {"filename": "a.txt"})
            parked = await task.wait(state="input_required", timeout=10)
            keys = sorted(parked.input_requests or {})
            assert keys == ["confirm"], f"inputRequests keys {keys}"
            result = await task.result()  # answers via the elicitation handler + tasks/update
            assert text_of(result) == "Deleted a.txt", f"text {text_of(result)!r}"
            assert elicitor.seen, "the elicitation handler was never called"
            if wire.enabled:
                updates = wire.requests("tasks/update")
                assert updates, "no tasks/update on the wire"
                params = updates[-1].get("params", {})
                responses = params.get("inputResponses", {})
                assert responses.get("confirm", {}).get("action") == "accept", (
                    f"tasks/update inputResponses {responses}"
                )
            report("confirm_delete-input", True)

        async def confirm_delete_transparent() -> None:
            result = await client.call_tool("confirm_delete", {"filename": "b.txt"})
            assert text_of(result) == "Deleted b.txt", f"text {text_of(result)!r}"
            report("confirm_delete-call_tool", True)

        async def cancel() -> None:
            task = await call_tool_task(client, "slow_compute", {"seconds": 60})
            await task.cancel()
            final = await task.wait(timeout=10)
            assert final.status == "cancelled", f"ended {final.status}"
            if wire.enabled:
                assert wire.requests("tasks/cancel"), "no tasks/cancel on the wire"
            report("cancel", True)

        async def greet() -> None:
            result = await client.call_tool("greet", {"name": "Ada"})
            assert text_of(result) == "Hello, Ada!", f"text {text_of(result)!r}"
            assert not result.is_error, "isError"
            report("greet", True)

        async def progress_token() -> None:
            # A progress handler makes fastmcp send a progressToken (as rmcp's client does
            # on every request): a synchronous call and a task answer as without one, and
            # neither sends progress (greet has none; a 2026-07-28 task never does).
            heard: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                heard.append(progress)

            before = calls_with_token()
            result = await client.call_tool("greet", {"name": "Bo"}, progress_handler=on_progress)
            assert text_of(result) == "Hello, Bo!", f"text {text_of(result)!r}"
            result = await client.call_tool(
                "slow_compute", {"seconds": 0.2, "label": "token"}, progress_handler=on_progress
            )
            assert text_of(result) == "token: computed in 0.2 s", f"text {text_of(result)!r}"
            assert heard == [], f"progress heard: {heard}"
            sent = calls_with_token() - before
            assert sent == 2, f"{sent} of the 2 tools/call carried a progressToken"
            report("progress-token", True)

        await check("tools", tools)
        await check("slow_compute-task", slow_compute_task)
        await check("slow_compute-call_tool", slow_compute_transparent)
        await check("confirm_delete-input", confirm_delete)
        await check("confirm_delete-call_tool", confirm_delete_transparent)
        await check("cancel", cancel)
        await check("greet", greet)
        await check("progress-token", progress_token)

    if wire.enabled:
        wire.check_meta()


class Wire:
    """Reads the JSON-RPC lines `tee` copied (stdio mode)."""

    def __init__(self, directory: str | None) -> None:
        self.enabled = directory is not None
        self.sent = os.path.join(directory, "client-to-server.jsonl") if directory else ""
        self.received = os.path.join(directory, "server-to-client.jsonl") if directory else ""

    @staticmethod
    def _lines(path: str) -> list[dict[str, Any]]:
        try:
            with open(path, encoding="utf-8") as handle:
                return [json.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            return []

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self._lines(self.sent) if m.get("method") == method]

    def check_meta(self) -> None:
        problems = []
        tasks_requests = [
            m for m in self._lines(self.sent) if str(m.get("method", "")).startswith("tasks/")
        ]
        for message in tasks_requests:
            meta = (message.get("params") or {}).get("_meta") or {}
            if TASKS_EXT not in ((meta.get(CAPS_KEY) or {}).get("extensions") or {}):
                problems.append(f"{message['method']} id={message.get('id')} lacks the extension")
        calls = [m for m in self._lines(self.sent) if m.get("method") == "tools/call"]
        for message in calls:
            meta = (message.get("params") or {}).get("_meta") or {}
            if TASKS_EXT not in ((meta.get(CAPS_KEY) or {}).get("extensions") or {}):
                problems.append(f"tools/call id={message.get('id')} lacks the extension")
        methods = sorted({m.get("method") for m in tasks_requests})
        if not tasks_requests:
            problems.append("no tasks/* request seen")
        report("wire-meta", not problems, "; ".join(problems[:5]))
        if not problems:
            print(
                f"# wire: {len(tasks_requests)} tasks/* requests ({', '.join(methods)}) and "
                f"{len(calls)} tools/call, all declaring the extension in _meta",
                flush=True,
            )


# --------------------------------------------------------------------------- stdio


async def stdio_mode(binary: str) -> None:
    with tempfile.TemporaryDirectory(prefix="fastmcp-client-check-") as directory:
        wire = Wire(directory)
        serve = f"{shlex.quote(binary)} --stdio --store memory --poll-interval 100"
        tap = (
            f"tee -a {shlex.quote(wire.sent)} | {serve} | tee -a {shlex.quote(wire.received)}"
        )

        def make_client(elicitor: Elicitor) -> Client:
            return Client(
                StdioTransport(command="sh", args=["-c", tap]),
                elicitation_handler=elicitor,
                timeout=30,
            )

        def calls_with_token() -> int:
            return sum(
                1
                for m in wire.requests("tools/call")
                if "progressToken" in ((m.get("params") or {}).get("_meta") or {})
            )

        print(f"# fastmcp client -> {serve} (stdio)", flush=True)
        await run_checks(make_client, wire, calls_with_token)


# --------------------------------------------------------------------------- http


class HttpLog:
    """httpx event hooks: records each POST (method, Mcp-* headers, status); optionally
    adds the `Mcp-Name: <taskId>` that fastmcp's client leaves off `tasks/*`."""

    def __init__(self, add_mcp_name: bool) -> None:
        self.add_mcp_name = add_mcp_name
        self.exchanges: list[dict[str, Any]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        try:
            body = json.loads(request.content or b"{}")
        except (ValueError, httpx2.RequestNotRead):
            body = {}
        method = body.get("method") if isinstance(body, dict) else None
        if (
            self.add_mcp_name
            and isinstance(method, str)
            and method.startswith("tasks/")
            and "mcp-name" not in request.headers
        ):
            request.headers["Mcp-Name"] = str((body.get("params") or {}).get("taskId"))
        params = (body.get("params") or {}) if isinstance(body, dict) else {}
        request.extensions["check_entry"] = entry = {
            "method": method,
            "progress_token": "progressToken" in (params.get("_meta") or {}),
            "mcp_method": request.headers.get("mcp-method"),
            "mcp_name": request.headers.get("mcp-name"),
            "status": None,
        }
        self.exchanges.append(entry)

    async def on_response(self, response: httpx2.Response) -> None:
        entry = response.request.extensions.get("check_entry")
        if entry is not None:
            entry["status"] = response.status_code
            if response.status_code >= 400:
                await response.aread()
                entry["body"] = response.text[:300]

    def factory(self):  # noqa: ANN201
        def make(headers=None, timeout=None, auth=None, **kwargs):  # noqa: ANN001, ANN003
            kwargs.setdefault("follow_redirects", True)
            return httpx2.AsyncClient(
                headers=headers,
                timeout=timeout or httpx2.Timeout(30.0, read=300.0),
                auth=auth,
                event_hooks={"request": [self.on_request], "response": [self.on_response]},
                **kwargs,
            )

        return make


def start_our_http_server(binary: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [binary, "--http", "127.0.0.1:0", "--store", "memory", "--poll-interval", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 20
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        match = re.match(r"listening on (http://\S+)", line)
        if match:
            return process, match.group(1)
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit(f"FAIL start: {binary} --http printed no 'listening on' line")


async def mcp_name_probe(url: str) -> None:
    """fastmcp's client as shipped: what happens on its first tasks/get."""
    log = HttpLog(add_mcp_name=False)
    transport = StreamableHttpTransport(url, httpx_client_factory=log.factory())
    async with Client(transport, timeout=30) as client:
        task = await call_tool_task(client, "slow_compute", {"seconds": 0.2})
        try:
            state = await task.status()
            outcome = f"tasks/get answered status={state.status}"
            rejected = False
        except Exception as error:  # noqa: BLE001
            outcome = f"tasks/get raised {type(error).__name__}: {error}"
            rejected = True
        try:
            result = await client.call_tool("slow_compute", {"seconds": 0.01})
            transparent = f"call_tool returned {text_of(result)!r}"
        except Exception as error:  # noqa: BLE001
            transparent = f"call_tool raised {type(error).__name__}: {error}"
    call = next((e for e in log.exchanges if e["method"] == "tools/call"), None)
    get = next((e for e in log.exchanges if e["method"] == "tasks/get"), None)
    print(f"# tools/call headers: Mcp-Method={call and call['mcp_method']!r} "
          f"Mcp-Name={call and call['mcp_name']!r} -> HTTP {call and call['status']}", flush=True)
    if get is not None:
        print(f"# tasks/get headers: Mcp-Method={get['mcp_method']!r} "
              f"Mcp-Name={get['mcp_name']!r} -> HTTP {get['status']} {get.get('body', '')}",
              flush=True)
    print(f"# {outcome}; transparent {transparent}", flush=True)
    if get is not None and get["mcp_name"] is None and rejected:
        # Our server tolerates a missing Mcp-Name on tasks/* (INTEROP.md, Decisions).
        report("mcp-name", False, f"fastmcp's client sends tasks/get without Mcp-Name and our "
               f"server refused it: HTTP {get['status']} ({outcome})")
    elif get is not None and get["mcp_name"] is None:
        report("mcp-name", True)
        print("# note: our server accepted tasks/get without Mcp-Name", flush=True)
    else:
        report("mcp-name", True)
        print("# note: fastmcp's client now sends Mcp-Name on tasks/get", flush=True)


async def http_mode(binary: str) -> None:
    process, url = start_our_http_server(binary)
    try:
        print(f"# fastmcp client -> {binary} --http ({url})", flush=True)
        await asyncio.wait_for(mcp_name_probe(url), 60)

        print("# again, with a request hook adding Mcp-Name: <taskId> on tasks/*", flush=True)
        log = HttpLog(add_mcp_name=True)

        def make_client(elicitor: Elicitor) -> Client:
            return Client(
                StreamableHttpTransport(url, httpx_client_factory=log.factory()),
                elicitation_handler=elicitor,
                timeout=30,
            )

        def calls_with_token() -> int:
            return sum(
                1 for e in log.exchanges if e["method"] == "tools/call" and e["progress_token"]
            )

        await run_checks(make_client, Wire(None), calls_with_token)
        bad = [e for e in log.exchanges if e["status"] is None or e["status"] >= 400]
        report(
            "http-statuses",
            not bad,
            "; ".join(f"{e['method']} -> {e['status']} {e.get('body', '')}" for e in bad[:3]),
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()


def main(argv: list[str]) -> int:
    args = [a for a in argv[1:] if not a.startswith("--")]
    flags = {a for a in argv[1:] if a.startswith("--")}
    if len(args) != 1 or flags - {"--http"}:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 64
    binary = os.path.abspath(args[0]) if os.sep in args[0] else args[0]
    asyncio.run(http_mode(binary) if "--http" in flags else stdio_mode(binary))
    print(f"# {'all checks passed' if failures == 0 else f'{failures} check(s) failed'}",
          flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
