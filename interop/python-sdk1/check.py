"""The official Python SDK 1.x (`mcp==1.30.0`, protocol 2025-11-25) as a host that declares
NO tasks, against `mcp-tasks serve --task-tools` (issue 52): the task tools `tasks_wait`,
`tasks_status`, `tasks_cancel`, `tasks_answer` and `tasks_list` a task-less caller drives a
long tool with.

Usage:
    python check.py stdio MCP_TASKS_BIN FASTMCP_PYTHON
    python check.py http  MCP_TASKS_BIN FASTMCP_PYTHON
(MCP_TASKS_BIN: target/debug/mcp-tasks; FASTMCP_PYTHON: a python with fastmcp, interop/.venv/bin/python,
for the plain fastmcp upstream of the gateway check. Run it with a python that has mcp 1.30.0:
interop/.venv-sdk1/bin/python, as interop/run makes it.)

Every session is a bare `ClientSession(read, write)` (no callbacks: it declares neither tasks nor
elicitation) unless a check says otherwise. Checks (names end in /stdio or /http):

  listing        tools/list shows the five task tools (and confirm_action, a task-only tool,
                 not as `required`); a `serve` without --task-tools shows none of them
  handle         sleep 10 s with --task-tools-wait 2: the call returns after the window with a
                 handle (structuredContent.taskId, status working, not isError, the _meta
                 handle); tasks_wait for 1 s gives the handle again, for 20 s the tool's own result
  fast           sleep 50 ms: the same result (model_dump) as from a serve without --task-tools
  cancel         sleep 60 s -> handle; tasks_cancel; tasks_status says cancelled; tasks_wait too
  answer         confirm_action -> input_required with inputRequests; tasks_answer with an
                 accepted form built from the requested schema; tasks_wait -> its result
  host-cancel    the same call followed by notifications/cancelled for it (as a host that says
                 so, inside the window): the task is cancelled (not left in tasks_list)
  elicit         a session with elicitation_callback=: confirm_action (and tasks_wait on a
                 handle) completes, the callback having been asked
  elicit-slow    the same with a user slower than the window (the callback answers after
                 WINDOW + 1.5 s): the late answer answers the task, the user is asked once
  list           tasks_list lists the caller's unfinished task
  host-timeout   a call the SDK gives up on before the window (read timeout 1 s; it sends no
                 notifications/cancelled) leaves its task running, and tasks_list finds it
  foreign        (http) a second caller (--auth-tokens, two tokens) gets the same isError
                 answer from tasks_status / tasks_cancel on the first caller's id as on a
                 made-up id, and the task is not cancelled
  restart-TERM, restart-KILL
                 (http) long_job (~10 s) on --store sqlite:FILE, serve stopped mid-task (SIGTERM,
                 then as a second case SIGKILL) and started again on the same store and port:
                 tasks_wait in a new session gives the result or an honest failed/cancelled,
                 never "unknown task", never a hang (says which)
  gateway        serve --task-tools --upstream '<plain fastmcp server>': nap 10 s -> handle ->
                 tasks_wait -> "slept 10 s"

Prints "PASS name (S s)" / "FAIL name: why" per check and "# ..." notes, exits 1 if any check
failed, 64 on bad usage.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from typing import Any, AsyncIterator, Awaitable, Callable

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError

TASK_TOOLS = {"tasks_wait", "tasks_status", "tasks_cancel", "tasks_answer", "tasks_list"}
HANDLE_META = "io.github.mcp-tasks/handle"
WINDOW = 2  # --task-tools-wait of the main server, seconds
# A host's patience for a call that should come back as a handle after the window: a server
# that runs the tool to its end instead makes the call time out (McpError), not hang the check.
PATIENCE = WINDOW + 8
TOKENS = {"alice": "alice-secret-token", "bob": "bob-secret-token"}
HERE = os.path.dirname(os.path.abspath(__file__))
PLAIN_SERVER = os.path.join(HERE, "..", "fastmcp", "plain_server.py")

failures = 0


class DeleteWarnings(logging.Filter):
    """Counts the SDK's "Session termination failed: 202" warnings instead of printing each: it
    wants 200 or 204 (or 405) for the session's DELETE, and the server says 202 Accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Session termination failed: 2"):
            self.seen.append(message)
            return False
        return True


delete_warnings = DeleteWarnings()
logging.getLogger("mcp.client.streamable_http").addFilter(delete_warnings)


def report(name: str, ok: bool, why: str = "", seconds: float | None = None) -> None:
    global failures
    if ok:
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        print(f"PASS {name}{took}", flush=True)
    else:
        failures += 1
        print(f"FAIL {name}: {why}", flush=True)


def note(text: str) -> None:
    print(f"# {text}", flush=True)


def text_of(result: types.CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def dump(result: Any) -> str:
    """A result as the JSON the server sent (camelCase, no nulls), cut short."""
    try:
        body = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    except AttributeError:
        body = result
    return json.dumps(body)[:600]


def structured(result: types.CallToolResult) -> dict[str, Any]:
    return result.structuredContent or {}


class CheckFailed(Exception):
    pass


def why(error: BaseException) -> str:
    """What failed, out of the ExceptionGroups the SDK's task groups wrap it in."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, CheckFailed):
        return str(error)
    if isinstance(error, TimeoutError):
        return f"timed out: {error!r}"
    return f"{type(error).__name__}: {error!r}"[:800]


def expect(condition: bool, why: str) -> None:
    if not condition:
        raise CheckFailed(why)


async def check(name: str, body: Callable[[], Awaitable[None]], timeout: float) -> None:
    started = time.monotonic()
    try:
        with anyio.fail_after(timeout):
            await body()
    except TimeoutError:
        report(name, False, f"no end in {timeout} s")
    except BaseException as error:  # noqa: BLE001 (an ExceptionGroup from the transports too)
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        report(name, False, why(error))
    else:
        report(name, True, seconds=time.monotonic() - started)


# --------------------------------------------------------------------------- servers


class Server:
    """`mcp-tasks serve --http ...` in a process group of its own; stdout and stderr to files."""

    def __init__(self, work: str, name: str, argv: list[str]) -> None:
        self.name = name
        self.out = os.path.join(work, f"{name}.out")
        self.err = os.path.join(work, f"{name}.err")
        with open(self.out, "ab") as out, open(self.err, "ab") as err:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.url = ""

    async def listening(self, seconds: float = 30) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with open(self.out, errors="replace") as handle:
                urls = re.findall(r"^listening on (\S+)", handle.read(), re.M)
            if urls:
                self.url = urls[-1]
                return self.url
            if self.process.poll() is not None:
                break
            await anyio.sleep(0.1)
        raise CheckFailed(f"{self.name} did not start: {self.tail()}")

    def tail(self, lines: int = 5) -> str:
        try:
            with open(self.err, errors="replace") as handle:
                return " | ".join(handle.read().splitlines()[-lines:])
        except OSError:
            return ""

    async def stop(self, sig: int = signal.SIGTERM, grace: float = 10) -> float:
        """Sends SIG to the group; KILL after GRACE s. Returns how long it took to exit."""
        started = time.monotonic()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)
            deadline = started + grace
            while self.process.poll() is None and time.monotonic() < deadline:
                await anyio.sleep(0.05)
        took = time.monotonic() - started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        return took


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --------------------------------------------------------------------------- sessions


class Target:
    """How to reach one server: a `serve --stdio` command line (a process per session) or a URL."""

    def __init__(self, binary: str, errlog: str, args: list[str] | None = None, url: str = "") -> None:
        self.binary = binary
        self.errlog = errlog
        self.args = args or []
        self.url = url

    @contextlib.asynccontextmanager
    async def session(
        self, token: str | None = "alice", elicitation_callback: Any = None
    ) -> AsyncIterator[ClientSession]:
        async with contextlib.AsyncExitStack() as stack:
            if self.url:
                headers = {"Authorization": f"Bearer {TOKENS[token]}"} if token else {}
                http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
                read, write, _ = await stack.enter_async_context(
                    streamable_http_client(self.url, http_client=http)
                )
            else:
                errlog = stack.enter_context(open(self.errlog, "a"))
                params = StdioServerParameters(
                    command=self.binary, args=["serve", "--stdio", *self.args]
                )
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            kwargs: dict[str, Any] = {"read_timeout_seconds": timedelta(seconds=60)}
            if elicitation_callback is not None:
                kwargs["elicitation_callback"] = elicitation_callback
            session = await stack.enter_async_context(ClientSession(read, write, **kwargs))
            await session.initialize()
            yield session


async def call(
    session: ClientSession, name: str, args: dict[str, Any], patience: float = 60
) -> tuple[types.CallToolResult, float]:
    """call_tool with a host's patience; returns the result and how long it took."""
    started = time.monotonic()
    result = await session.call_tool(name, args, read_timeout_seconds=timedelta(seconds=patience))
    return result, time.monotonic() - started


def is_handle(
    result: types.CallToolResult, statuses: tuple[str, ...] = ("working",), meta: bool = True
) -> str:
    """The task id of a handle result (contract: structuredContent and _meta), else CheckFailed.
    META false: tasks_wait's handle again, which the server sends without the _meta handle."""
    body = structured(result)
    expect(not result.isError, f"isError: {dump(result)}")
    expect(isinstance(body.get("taskId"), str) and body["taskId"], f"no structuredContent.taskId: {dump(result)}")
    expect(body.get("status") in statuses, f"status {body.get('status')!r}, wanted {statuses}: {dump(result)}")
    # The contract has "next": "tasks_wait" always; the server names tasks_answer while the task
    # waits for input (the tool the caller needs next), which is taken too.
    nexts = ("tasks_wait", "tasks_answer") if body.get("status") == "input_required" else ("tasks_wait",)
    expect(body.get("next") in nexts, f"next {body.get('next')!r}: {dump(result)}")
    handle = (result.meta or {}).get(HANDLE_META) or {}
    if meta or handle:
        expect(handle.get("taskId") == body["taskId"], f"_meta {HANDLE_META} {handle}: {dump(result)}")
    text = text_of(result)
    expect(body["taskId"] in text and "tasks_wait" in text, f"text does not name the id and tasks_wait: {text!r}")
    return body["taskId"]


def form_answer(schema: dict[str, Any]) -> dict[str, Any]:
    """An accepted form's content for an elicitation's requestedSchema: yes to every field."""
    content: dict[str, Any] = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        if kind == "boolean":
            content[key] = True
        elif prop.get("enum"):
            content[key] = prop["enum"][0]
        elif kind in ("integer", "number"):
            content[key] = prop.get("default", prop.get("minimum", 1))
        else:
            content[key] = prop.get("default", "yes")
    return content


# --------------------------------------------------------------------------- the checks


async def common_checks(tr: str, on: Target, off: Target) -> None:
    """Checks 1-6 (and tasks_list) on one transport."""
    try:
        await session_checks(tr, on, off)
    except BaseException as error:  # noqa: BLE001 (the session itself failed)
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        report(f"session/{tr}", False, why(error))
    await check(f"elicit/{tr}", elicit_check(on), 40)
    await check(f"elicit-slow/{tr}", slow_elicit_check(on), 40)


async def session_checks(tr: str, on: Target, off: Target) -> None:
    """The checks one bare session runs, one after the other."""
    async with on.session() as session:

        async def listing() -> None:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            missing = TASK_TOOLS - set(tools)
            expect(not missing, f"tools/list lacks {sorted(missing)}: {sorted(tools)}")
            confirm = tools.get("confirm_action")
            expect(confirm is not None, f"no confirm_action: {sorted(tools)}")
            support = confirm.execution.taskSupport if confirm.execution else None
            expect(support != "required", f"confirm_action listed taskSupport {support!r}")
            with_schema = [name for name in ("sleep", "long_job", "confirm_action") if tools[name].outputSchema]
            expect(not with_schema, f"listed with an outputSchema: {with_schema}")
            note(f"tools/list with --task-tools: {', '.join(sorted(tools))}; confirm_action taskSupport {support!r}")
            async with off.session() as plain:
                names = {tool.name for tool in (await plain.list_tools()).tools}
            expect(not (TASK_TOOLS & names), f"listed without --task-tools: {sorted(TASK_TOOLS & names)}")

        async def handle() -> None:
            result, took = await call(session, "sleep", {"ms": 10000}, PATIENCE)
            task_id = is_handle(result)
            expect(took < 6, f"the handle came after {took:.1f} s (window {WINDOW} s)")
            note(f"sleep 10 s: handle after {took:.1f} s, suggestedWaitSeconds "
                 f"{structured(result).get('suggestedWaitSeconds')}, text {text_of(result)!r}")
            # Not done within timeoutSeconds: the handle again.
            again, waited = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 1})
            expect(is_handle(again, meta=False) == task_id, f"tasks_wait 1 s: {dump(again)}")
            if HANDLE_META not in (again.meta or {}):
                note(f"tasks_wait's handle again has no _meta {HANDLE_META} (the call's handle has it)")
            expect(0.8 < waited < 4, f"tasks_wait with timeoutSeconds 1 took {waited:.1f} s")
            done, waited = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 20})
            expect(not done.isError and text_of(done) == "slept 10000 ms", f"tasks_wait: {dump(done)}")
            note(f"tasks_wait 1 s gave the handle again; tasks_wait 20 s the result after {waited:.1f} s more")

        async def fast() -> None:
            result, _ = await call(session, "sleep", {"ms": 50})
            async with off.session() as plain:
                plain_result, _ = await call(plain, "sleep", {"ms": 50})
            expect(result.model_dump() == plain_result.model_dump(),
                   f"with task tools {dump(result)} != without {dump(plain_result)}")

        async def cancel() -> None:
            result, _ = await call(session, "sleep", {"ms": 60000}, PATIENCE)
            task_id = is_handle(result)
            cancelled, _ = await call(session, "tasks_cancel", {"taskId": task_id})
            expect(not cancelled.isError, f"tasks_cancel: {dump(cancelled)}")
            expect(structured(cancelled).get("taskId") == task_id, f"tasks_cancel: {dump(cancelled)}")
            status: dict[str, Any] = {}
            for _ in range(30):  # the cancel may take a moment to land
                state, _ = await call(session, "tasks_status", {"taskId": task_id})
                expect(not state.isError, f"tasks_status: {dump(state)}")
                status = structured(state)
                if status.get("status") == "cancelled":
                    break
                await anyio.sleep(0.1)
            expect(status.get("status") == "cancelled", f"tasks_status: {status}")
            final, _ = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 5})
            expect(final.isError and structured(final).get("status") == "cancelled", f"tasks_wait: {dump(final)}")

        async def answer() -> None:
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            schema = tools["confirm_action"].inputSchema
            args = {"action": "ship it"} if "action" in (schema.get("properties") or {}) else {}
            result, took = await call(session, "confirm_action", args, PATIENCE)
            task_id = is_handle(result, ("working", "input_required"))
            body = structured(result)
            note(f"confirm_action: status {body.get('status')} after {took:.1f} s, next {body.get('next')!r}")
            for _ in range(50):
                if body.get("status") == "input_required":
                    break
                await anyio.sleep(0.1)
                state, _ = await call(session, "tasks_status", {"taskId": task_id})
                body = structured(state)
            expect(body.get("status") == "input_required", f"never input_required: {body}")
            requests = body.get("inputRequests") or {}
            expect(requests, f"no inputRequests: {body}")
            answers = {}
            for key, request in requests.items():
                expect(request.get("method") == "elicitation/create", f"inputRequests[{key}]: {request}")
                form = form_answer((request.get("params") or {}).get("requestedSchema") or {})
                answers[key] = {"action": "accept", "content": form}
            note(f"inputRequests keys {sorted(requests)}; answers {json.dumps(answers)}")
            answered, _ = await call(session, "tasks_answer", {"taskId": task_id, "answers": answers})
            expect(not answered.isError and structured(answered).get("taskId") == task_id,
                   f"tasks_answer: {dump(answered)}")
            done, _ = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 20})
            want = f"confirmed: {args.get('action', 'run the demo')}"
            expect(not done.isError and text_of(done) == want, f"tasks_wait: {dump(done)} (wanted {want!r})")

        async def listed() -> None:
            result, _ = await call(session, "sleep", {"ms": 60000}, PATIENCE)
            task_id = is_handle(result)
            tasks, _ = await call(session, "tasks_list", {})
            rows = structured(tasks).get("tasks")
            expect(isinstance(rows, list), f"tasks_list: {dump(tasks)}")
            mine = [row for row in rows if row.get("taskId") == task_id]
            expect(mine and mine[0].get("status") == "working", f"tasks_list: {dump(tasks)}")
            await call(session, "tasks_cancel", {"taskId": task_id})

        async def host_timeout() -> None:
            # Python SDK 1.x gives up on its read timeout without notifications/cancelled: a
            # host with less patience than the window never sees the handle. The task runs on,
            # and tasks_list finds it.
            before = {row["taskId"] for row in structured((await call(session, "tasks_list", {}))[0]).get("tasks", [])}
            try:
                result, took = await call(session, "sleep", {"ms": 60000}, 1)
                raise CheckFailed(f"no timeout: {dump(result)} after {took:.1f} s")
            except McpError as error:
                expect("Timed out" in str(error), f"{error!r}")
            await anyio.sleep(WINDOW)
            rows = structured((await call(session, "tasks_list", {}))[0]).get("tasks", [])
            new = [row for row in rows if row["taskId"] not in before]
            expect(len(new) == 1 and new[0].get("tool") == "sleep" and new[0].get("status") == "working",
                   f"tasks_list after the host's timeout: {rows}")
            await call(session, "tasks_cancel", {"taskId": new[0]["taskId"]})
            note("host-timeout: a call given up after 1 s (window 2 s) left its task running, found by tasks_list")

        async def host_cancel() -> None:
            # A host that says so when it gives up (as the TypeScript SDK does on its timeout):
            # notifications/cancelled for the call, inside the window, cancels the task.
            before = {row["taskId"] for row in structured((await call(session, "tasks_list", {}))[0]).get("tasks", [])}
            request_id = session._request_id  # the id the next request gets (ClientSession's counter)
            try:
                await call(session, "sleep", {"ms": 60000}, 1)
                raise CheckFailed("no timeout")
            except McpError:
                pass
            await session.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="the host gave up"))))
            await anyio.sleep(WINDOW)
            rows = structured((await call(session, "tasks_list", {}))[0]).get("tasks", [])
            left = [row for row in rows if row["taskId"] not in before]
            expect(not left, f"the call cancelled at 1 s (window {WINDOW} s) left unfinished: {left}")

        await check(f"listing/{tr}", listing, 30)
        await check(f"handle/{tr}", handle, 40)
        await check(f"fast/{tr}", fast, 30)
        await check(f"cancel/{tr}", cancel, 30)
        await check(f"answer/{tr}", answer, 40)
        await check(f"list/{tr}", listed, 20)
        await check(f"host-timeout/{tr}", host_timeout, 20)
        await check(f"host-cancel/{tr}", host_cancel, 20)



def elicit_check(on: Target) -> Callable[[], Awaitable[None]]:
    """Input on the connection: a session with elicitation_callback= that accepts."""

    async def elicit() -> None:
        asked: list[types.ElicitRequestParams] = []

        async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params)
            schema = getattr(params, "requestedSchema", None) or {}
            return types.ElicitResult(action="accept", content=form_answer(schema))

        async with on.session(elicitation_callback=accept) as session:
            result, took = await call(session, "confirm_action", {"action": "deploy"}, PATIENCE)
            how = f"the call itself after {took:.1f} s"
            if structured(result).get("taskId") and structured(result).get("next") == "tasks_wait":
                task_id = is_handle(result, ("working", "input_required"))
                result, waited = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 20})
                how = f"a handle after {took:.1f} s, then tasks_wait after {waited:.1f} s"
            expect(not result.isError and text_of(result) == "confirmed: deploy", f"result: {dump(result)}")
            expect(asked, "the elicitation callback was never called")
            note(f"elicit: answered on the connection ({len(asked)} elicitation(s)); {how}")

    return elicit


def slow_elicit_check(on: Target) -> Callable[[], Awaitable[None]]:
    """Input on the connection from a user slower than the window: the answer comes after the
    call's window has ended (the handle sent); it must answer the task, asked once."""

    async def elicit_slow() -> None:
        asked: list[float] = []
        started = time.monotonic()

        async def slow_accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(time.monotonic() - started)
            await anyio.sleep(WINDOW + 1.5)  # a person reading the form
            schema = getattr(params, "requestedSchema", None) or {}
            return types.ElicitResult(action="accept", content=form_answer(schema))

        async with on.session(elicitation_callback=slow_accept) as session:
            result, took = await call(session, "confirm_action", {"action": "think it over"}, PATIENCE)
            body = structured(result)
            steps = [f"the call: {body.get('status') or text_of(result)!r} after {took:.1f} s"]
            if body.get("taskId") and body.get("next") in ("tasks_wait", "tasks_answer"):
                task_id = body["taskId"]
                await anyio.sleep(0.5)  # the answer went out before the call's result was read
                state, _ = await call(session, "tasks_status", {"taskId": task_id})
                steps.append(f"tasks_status after the answer: {structured(state).get('status')}")
                result, waited = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 20})
                steps.append(f"tasks_wait: {text_of(result)!r} after {waited:.1f} s")
            how = "; ".join(steps)
            expect(not result.isError and text_of(result) == "confirmed: think it over", f"{how}: {dump(result)}")
            expect(len(asked) == 1, f"the user was asked {len(asked)} times (at "
                   f"{', '.join(f'{t:.1f}' for t in asked)} s), the first answer lost: {how}")
            note(f"elicit-slow: asked once; {how}")

    return elicit_slow


async def foreign_check(on: Target) -> None:
    async def body() -> None:
        async with on.session("alice") as alice, on.session("bob") as bob:
            result, _ = await call(alice, "sleep", {"ms": 60000}, PATIENCE)
            task_id = is_handle(result)
            made_up = "0" * (len(task_id) - 4) + "beef"
            for tool in ("tasks_status", "tasks_cancel"):
                theirs, _ = await call(bob, tool, {"taskId": task_id})
                unknown, _ = await call(bob, tool, {"taskId": made_up})
                expect(theirs.isError and unknown.isError, f"{tool}: {dump(theirs)} / {dump(unknown)}")
                same = lambda r, i: dump(r).replace(i, "ID")  # noqa: E731 (the id left out)
                expect(same(theirs, task_id) == same(unknown, made_up),
                       f"{tool} differs: on the other caller's id {dump(theirs)}; on a made-up id {dump(unknown)}")
            state, _ = await call(alice, "tasks_status", {"taskId": task_id})
            expect(structured(state).get("status") == "working", f"alice's task after bob: {dump(state)}")
            note(f"bob's answer: {text_of(theirs)!r}")
            await call(alice, "tasks_cancel", {"taskId": task_id})

    await check("foreign/http", body, 30)


async def restart_check(binary: str, work: str, tokens: str, sig: int) -> None:
    name = f"restart-{signal.Signals(sig).name[3:]}/http"
    store = os.path.join(work, f"restart-{sig}.db")
    port = free_port()
    argv = [binary, "serve", "--http", f"127.0.0.1:{port}", "--store", f"sqlite:{store}",
            "--auth-tokens", tokens, "--task-tools", "--task-tools-wait", "1",
            # A stop mid-task: the default 30 s of drain on SIGTERM would let the job finish.
            "--drain-timeout", "1", "--poll-interval", "100"]
    servers: list[Server] = []

    async def body() -> None:
        first = Server(work, f"restart-{sig}-a", argv)
        servers.append(first)
        url = await first.listening()
        target = Target(binary, "", url=url)
        async with target.session() as session:
            result, took = await call(session, "long_job", {"steps": 10, "step_ms": 1000}, PATIENCE)
            task_id = is_handle(result)
            await anyio.sleep(2)
            state, _ = await call(session, "tasks_status", {"taskId": task_id})
            before = structured(state)
        stopped = await first.stop(sig)
        note(f"{name}: handle after {took:.1f} s; before the stop: {before.get('status')} "
             f"{before.get('statusMessage')!r}; serve exited {stopped:.1f} s after {signal.Signals(sig).name} "
             f"(code {first.process.returncode})")
        second = Server(work, f"restart-{sig}-b", argv)
        servers.append(second)
        await second.listening()
        async with target.session() as session:
            state, _ = await call(session, "tasks_status", {"taskId": task_id})
            note(f"{name}: after the restart tasks_status says {json.dumps(structured(state))}")
            started = time.monotonic()
            done, _ = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 25})
            waited = time.monotonic() - started
        outcome = structured(done)
        text = text_of(done)
        if not done.isError and text == "done: 10 steps":
            note(f"{name}: RESUMED: tasks_wait gave the tool's result after {waited:.1f} s")
        elif done.isError and outcome.get("status") in ("failed", "cancelled"):
            note(f"{name}: ENDED HONESTLY ({outcome.get('status')}): {text!r}")
        else:
            raise CheckFailed(f"tasks_wait after the restart ({waited:.1f} s): {dump(done)}")

    try:
        await check(name, body, 60)
    finally:
        for server in servers:
            await server.stop(signal.SIGKILL, 1)
        if failures:
            for server in servers:
                note(f"{server.name} stderr: {server.tail(3)}")


async def gateway_check(tr: str, binary: str, work: str, fastmcp_python: str) -> None:
    upstream = f"{fastmcp_python} {PLAIN_SERVER} stdio"
    args = ["--store", "memory", "--poll-interval", "100", "--task-tools", "--task-tools-wait",
            str(WINDOW), "--upstream", upstream]
    server = None

    async def body() -> None:
        nonlocal server
        if tr == "http":
            server = Server(work, "gateway", [binary, "serve", "--http", "127.0.0.1:0", *args])
            target = Target(binary, "", url=await server.listening())
        else:
            target = Target(binary, os.path.join(work, "gateway-stdio.err"), args)
        async with target.session(token=None) as session:
            names = [tool.name for tool in (await session.list_tools()).tools]
            nap = [n for n in names if n == "nap" or n.endswith("__nap")]
            expect(len(nap) == 1 and TASK_TOOLS <= set(names), f"tools/list: {names}")
            note(f"gateway/{tr}: the upstream's nap is listed as {nap[0]!r}")
            result, took = await call(session, nap[0], {"seconds": 10}, PATIENCE)
            task_id = is_handle(result)
            done, waited = await call(session, "tasks_wait", {"taskId": task_id, "timeoutSeconds": 20})
            expect(not done.isError and text_of(done) == "slept 10 s", f"tasks_wait: {dump(done)}")
            note(f"gateway/{tr}: handle after {took:.1f} s, result {waited:.1f} s later")

    try:
        await check(f"gateway/{tr}", body, 45)
    finally:
        if server is not None:
            await server.stop()


async def main_async(tr: str, binary: str, fastmcp_python: str) -> None:
    with tempfile.TemporaryDirectory(prefix="python-sdk1-check-") as work:
        common = ["--store", "memory", "--poll-interval", "100"]
        tools_on = [*common, "--task-tools", "--task-tools-wait", str(WINDOW)]
        servers: list[Server] = []
        try:
            if tr == "stdio":
                on = Target(binary, os.path.join(work, "on.err"), tools_on)
                off = Target(binary, os.path.join(work, "off.err"), common)
                note(f"stdio: a ClientSession per `{binary} serve --stdio {' '.join(tools_on)}`")
            else:
                tokens = os.path.join(work, "tokens.txt")
                with open(tokens, "w") as handle:
                    handle.write("".join(f"{token} {label}\n" for label, token in TOKENS.items()))
                os.chmod(tokens, 0o600)  # else serve warns that others may read it
                servers.append(Server(work, "on", [binary, "serve", "--http", "127.0.0.1:0", *tools_on,
                                                   "--auth-tokens", tokens]))
                servers.append(Server(work, "off", [binary, "serve", "--http", "127.0.0.1:0", *common]))
                on = Target(binary, "", url=await servers[0].listening())
                off = Target(binary, "", url=await servers[1].listening())
                note(f"http: {on.url} (serve {' '.join(tools_on)} --auth-tokens: alice, bob); "
                     f"{off.url} without --task-tools")
            await common_checks(tr, on, off)
            if tr == "http":
                await foreign_check(on)
                await restart_check(binary, work, tokens, signal.SIGTERM)
                await restart_check(binary, work, tokens, signal.SIGKILL)
            await gateway_check(tr, binary, work, fastmcp_python)
        finally:
            for server in servers:
                await server.stop()
            if failures:
                for name in ("on.err", "off.err", "gateway-stdio.err", "gateway.err"):
                    path = os.path.join(work, name)
                    if os.path.exists(path):
                        with open(path, errors="replace") as handle:
                            lines = handle.read().splitlines()[-5:]
                        for line in lines:
                            note(f"{name}: {line}")


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in ("stdio", "http"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 64
    tr, binary, fastmcp_python = argv[1:]
    binary = os.path.abspath(binary) if os.sep in binary else binary
    if not os.access(binary, os.X_OK):
        print(f"no executable {binary}", file=sys.stderr)
        return 64
    if subprocess.run([fastmcp_python, "-c", "import fastmcp"], capture_output=True).returncode:
        print(f"no fastmcp in {fastmcp_python} (pip install -r interop/fastmcp/requirements.txt)",
              file=sys.stderr)
        return 64
    started = time.monotonic()
    anyio.run(main_async, tr, binary, fastmcp_python)
    if delete_warnings.seen:
        note(f"the SDK warned {delete_warnings.seen[0]!r} {len(delete_warnings.seen)} times: the server "
             "answers a session's DELETE with 202, the SDK expects 200 or 204 (harmless)")
    verdict = "all checks passed" if failures == 0 else f"{failures} check(s) failed"
    note(f"{verdict} in {time.monotonic() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
