"""A fastmcp-tasks (fastmcp[tasks]==4.1.4) fixture server for interop tests.

Usage:
    python server.py stdio
    python server.py http 127.0.0.1:PORT     # PORT may be 0 (an ephemeral port)

Over HTTP the endpoint is /mcp. Once the server accepts requests it prints one line
on stdout, `listening on http://127.0.0.1:PORT/mcp` (with the real port), and
flushes; readers wait for that line. Logs go to stderr.

Tools (task policy per fastmcp's TaskConfig):

    slow {seconds}     optional  completes with "slept S s"
    cancellable        optional  sleeps until it is cancelled (tasks/cancel)
    tool_error         required  completes with isError: true, text "tool error"
    ask_name           required  in-task elicitation form (fastmcp's guard pattern:
                                 the body returns an InputRequiredResult, the task
                                 parks in input_required with keys `<taskId>:<hex>`,
                                 tasks/update re-runs the body), then "Hello, NAME!"
    mrtr_then_task     optional  first a synchronous MRTR InputRequiredResult asking
                                 for a name; the retry carrying the answer becomes a
                                 task that completes with "Hello, NAME!" (needs the
                                 TasksExtension subclass below)
    required_only      required  -32021 without the extension; completes "required ok"
    greet {name}       forbidden always synchronous, "Hello, NAME!"
    slow_sync {seconds} forbidden always synchronous: traced "slow_sync ran" as each run
                                 starts, then "slept S s" after `seconds`

The Docket backend is the in-process memory:// default (one process, no Redis).

Environment:
    FIXTURE_POLL_MS   pollIntervalMs the tasks advertise (default 200; fastmcp's own is 5000)
    FIXTURE_TRACE     a file; each tools/call, tasks/get, tasks/update and tasks/cancel
                      the server sees is appended as one JSON line (whether the call
                      declared the Tasks extension, input keys, -32021s, task ids, the
                      Mcp-Name header of tasks/*), so tests can check the server's side
    FIXTURE_LOG_LEVEL uvicorn's log level over HTTP (default warning)
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from datetime import timedelta
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.dependencies import get_http_request
from fastmcp.utilities.tasks import TASKS_EXTENSION_ID, TaskConfig
from fastmcp_tasks import TasksExtension
from fastmcp_tasks.creation import create_task
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# Fast polls for tests: fastmcp's default pollIntervalMs is 5000.
POLL = timedelta(milliseconds=int(os.environ.get("FIXTURE_POLL_MS", "200")))


def task_config(mode: str) -> TaskConfig:
    return TaskConfig(mode=mode, poll_interval=POLL)  # type: ignore[arg-type]


def trace(event: str, **fields: Any) -> None:
    """Appends one JSON line to $FIXTURE_TRACE (if set): what the server saw."""
    path = os.environ.get("FIXTURE_TRACE")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"t": round(time.time(), 3), "event": event, **fields}) + "\n")


NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}


def ask_for_name(message: str) -> mcp_types.InputRequiredResult:
    """An InputRequiredResult with one elicitation form (tool key "name")."""
    return mcp_types.InputRequiredResult(
        input_requests={
            "name": mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(
                    message=message, requested_schema=NAME_SCHEMA
                )
            )
        }
    )


def answered_name(responses: Any) -> tuple[str | None, str | None]:
    """(name, None) for an accepted form, (None, action) for decline/cancel,
    (None, None) when the "name" key was not answered."""
    if not responses or "name" not in responses:
        return None, None
    answer = responses["name"]
    action = getattr(answer, "action", None)
    content = getattr(answer, "content", None) or {}
    if action == "accept" and isinstance(content.get("name"), str):
        return content["name"], None
    return None, action or "invalid"


class MrtrThenTaskExtension(TasksExtension):
    """TasksExtension that lets `mrtr_then_task` finish its MRTR round first.

    Stock fastmcp-tasks decides "task or not" before the tool body runs, so an
    optional/required tool called with the extension declared becomes a task on
    the very first round and can never answer with a synchronous
    InputRequiredResult (SEP-2663 2.12: finish MRTR before creating the task).
    Here, for `mrtr_then_task` only: a round without a usable answer runs the body
    in the foreground (it returns the InputRequiredResult); the retry carrying the
    answer becomes a task, with the answer passed on as the tool's `name` argument
    (a worker leg has no wire request, so it cannot read the MRTR responses).
    """

    async def intercept_tool_call(self, params, context, call_next):  # type: ignore[override]
        rc = context.request_context
        opted_in = (
            rc is not None
            and rc.protocol_version in MODERN_PROTOCOL_VERSIONS
            and context.client_extension_settings(TASKS_EXTENSION_ID) is not None
        )
        responses = context.input_responses
        trace(
            "tools/call",
            tool=params.name,
            declared_tasks=opted_in,
            input_response_keys=sorted(responses or {}),
        )
        if params.name != "mrtr_then_task":
            try:
                outcome = await super().intercept_tool_call(params, context, call_next)
            except Exception as error:
                trace("tools/call error", tool=params.name, code=getattr(getattr(error, "error", None), "code", None), message=str(error))
                raise
        else:
            name, _declined = answered_name(responses)
            if name is None or not opted_in:
                # MRTR round (or a client without the extension): run in the foreground.
                outcome = await call_next()
            else:
                tool = await context.fastmcp.get_tool(params.name)
                arguments = dict(params.arguments or {})
                arguments["name"] = name
                outcome = await create_task(tool, arguments, context)
        trace(
            "tools/call answered",
            tool=params.name,
            outcome=type(outcome).__name__,
            task_id=getattr(outcome, "task_id", None),
        )
        return outcome

    async def _handle_get(self, ctx, params):  # type: ignore[override]
        trace("tasks/get", task_id=params.task_id, mcp_name=mcp_name_header())
        return await super()._handle_get(ctx, params)

    async def _handle_update(self, ctx, params):  # type: ignore[override]
        trace(
            "tasks/update",
            task_id=params.task_id,
            keys=sorted(params.input_responses or {}),
            mcp_name=mcp_name_header(),
        )
        return await super()._handle_update(ctx, params)

    async def _handle_cancel(self, ctx, params):  # type: ignore[override]
        trace("tasks/cancel", task_id=params.task_id, mcp_name=mcp_name_header())
        return await super()._handle_cancel(ctx, params)


def mcp_name_header() -> str | None:
    """The request's Mcp-Name header over HTTP ("<stdio>" on stdio). fastmcp-tasks
    accepts a missing one and rejects a mismatch with -32020."""
    try:
        return get_http_request().headers.get("mcp-name")
    except RuntimeError:
        return "<stdio>"


mcp = FastMCP("fastmcp-tasks-fixture")
mcp.add_extension(MrtrThenTaskExtension())


@mcp.tool(task=task_config("optional"))
async def slow(seconds: float = 1.0) -> str:
    """Sleeps `seconds`, then completes with "slept S s". A task when the client
    declares the Tasks extension."""
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


@mcp.tool(task=task_config("optional"))
async def cancellable() -> str:
    """Runs until it is cancelled (tasks/cancel); gives up after an hour."""
    await asyncio.sleep(3600)
    return "not cancelled"


@mcp.tool(task=task_config("required"))
async def tool_error() -> str:
    """Always a task; completes with a tool result that has isError: true ("tool error")."""
    raise ToolError("tool error")


@mcp.tool(task=task_config("required"))
async def ask_name(ctx: Context) -> Any:
    """Always a task; asks for a name with an elicitation form inside the task
    (guard pattern), then completes with "Hello, NAME!"."""
    name, declined = answered_name(ctx.input_responses)
    if name is not None:
        return f"Hello, {name}!"
    if declined is not None:
        return f"No name given ({declined})"
    return ask_for_name("What is your name?")


@mcp.tool(task=task_config("optional"))
async def mrtr_then_task(ctx: Context, name: str | None = None) -> Any:
    """First a synchronous MRTR round asking for a name (input key "name"); the retry
    that carries the answer becomes a task that completes with "Hello, NAME!".
    `name` is filled in by the server from the MRTR answer; do not pass it."""
    if name:
        await asyncio.sleep(0.2)  # a little real task work
        return f"Hello, {name}!"
    answer, declined = answered_name(ctx.input_responses)
    if answer is not None:  # a client without the extension: answer synchronously
        return f"Hello, {answer}!"
    if declined is not None:
        return f"No name given ({declined})"
    return ask_for_name("What is your name? (MRTR, before the task)")


@mcp.tool(task=task_config("required"))
async def required_only() -> str:
    """Always a task (-32021 without the Tasks extension); completes with "required ok"."""
    await asyncio.sleep(0.1)
    return "required ok"


@mcp.tool(task=task_config("forbidden"))
async def greet(name: str = "world") -> str:
    """Always synchronous; answers "Hello, NAME!"."""
    return f"Hello, {name}!"


@mcp.tool(task=task_config("forbidden"))
async def slow_sync(seconds: float = 1.0) -> str:
    """Always synchronous (a tool with a side effect, say a payment): each run is traced
    as "slow_sync ran" when it starts; sleeps `seconds`, then answers "slept S s"."""
    trace("slow_sync ran", seconds=seconds)
    await asyncio.sleep(seconds)
    return f"slept {seconds:g} s"


async def serve_http(host: str, port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = mcp.http_app(path="/mcp", stateless_http=True, json_response=True)
    config = uvicorn.Config(
        app, log_level=os.environ.get("FIXTURE_LOG_LEVEL", "warning"), lifespan="on"
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.02)
        print(f"listening on http://{host}:{port}/mcp", flush=True)

    async with mcp._lifespan_manager():  # what run_http_async does around uvicorn
        announcer = asyncio.create_task(announce())
        try:
            await server.serve(sockets=[sock])
        finally:
            announcer.cancel()


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "stdio":
        mcp.run(transport="stdio", show_banner=False, log_level="WARNING")
        return 0
    if len(argv) >= 3 and argv[1] == "http":
        host, _, port = argv[2].rpartition(":")
        asyncio.run(serve_http(host or "127.0.0.1", int(port)))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
