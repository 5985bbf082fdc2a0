"""A plain fastmcp (fastmcp==4.1.4) server, WITHOUT the Tasks extension, for the gateway's
interop check (interop/gateway/plain_check.sh).

Usage:
    python plain_server.py stdio
    python plain_server.py http 127.0.0.1:PORT     # PORT may be 0 (an ephemeral port)

It speaks both eras, as fastmcp does: 2026-07-28 (`server/discover`) and the 2025
handshake (`initialize`). Over HTTP the endpoint is /mcp with stateful sessions (a
2025-era session can carry server-initiated requests); once the server accepts requests
it prints `listening on http://127.0.0.1:PORT/mcp` on stdout. Logs go to stderr.

Tools, asking for input in each of the ways a fastmcp tool can:

    ask_push       ctx.elicit() (a server-initiated elicitation/create; fastmcp refuses it
                   on 2026-07-28 connections), then "Hello, NAME!"
    ask_mrtr       an MRTR round (returns an InputRequiredResult asking for a name; fastmcp
                   refuses that on 2025-era connections), then "Hello, NAME!"
    ask_mrtr_twice two MRTR rounds: a name, then (requestState carrying the name) a colour;
                   then "NAME likes COLOUR"
    roots_now      asks roots/list during the call (server-initiated), then "roots: URI, ..."
                   or "no roots"
    startup_roots  the roots this server read from the client for its session, as a
                   filesystem server does: 300 ms after `notifications/initialized` and again
                   at each `notifications/roots/list_changed`: "roots: URI, ..." (or "no
                   roots", "not asked" after 2 s), then " (read N times)"
    greet {name}   "Hello, NAME!"
    whoami {delay} the Authorization header of the HTTP request that carried this call
                   ("none" without one, and on stdio), read after sleeping DELAY seconds
                   (default 0): what an upstream that checks its callers sees
    nap {seconds}  sleeps SECONDS (default 30), then "slept S s"; a call cancelled while it
                   sleeps is counted
    naps_cancelled how many nap calls were cancelled while they slept (notifications/cancelled
                   reached the tool), e.g. "1"
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import warnings
from typing import Any

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.server.dependencies import get_http_headers

# Roots are deprecated as of 2026-07-28 (SEP-2577); the 2025 era still has them.
warnings.filterwarnings("ignore", message="The roots capability is deprecated")

mcp = FastMCP("fastmcp-plain-fixture")

NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Your name"}},
    "required": ["name"],
}
COLOUR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"colour": {"type": "string", "description": "Your favourite colour"}},
    "required": ["colour"],
}


def ask(key: str, message: str, schema: dict[str, Any], state: str | None = None) -> Any:
    """An InputRequiredResult with one elicitation form under `key`."""
    return mcp_types.InputRequiredResult(
        input_requests={
            key: mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
        },
        request_state=state,
    )


def accepted(responses: Any, key: str, field: str) -> str | None:
    """The accepted form's `field` answered under `key`, else None."""
    if not responses or key not in responses:
        return None
    answer = responses[key]
    content = getattr(answer, "content", None) or {}
    if getattr(answer, "action", None) == "accept" and isinstance(content.get(field), str):
        return content[field]
    return None


@mcp.tool
async def ask_push(ctx: Context) -> str:
    """Asks for a name with ctx.elicit (a server-initiated request), then greets."""
    answer = await ctx.elicit("What is your name?", response_type=str)
    if answer.action == "accept":
        return f"Hello, {answer.data}!"
    return f"No name given ({answer.action})"


@mcp.tool
async def ask_mrtr(ctx: Context) -> Any:
    """Asks for a name with an MRTR round (InputRequiredResult), then greets."""
    name = accepted(ctx.input_responses, "name", "name")
    if name is None:
        return ask("name", "What is your name? (MRTR)", NAME_SCHEMA)
    return f"Hello, {name}!"


@mcp.tool
async def ask_mrtr_twice(ctx: Context) -> Any:
    """Two MRTR rounds: a name, then a colour (the name kept in requestState)."""
    name = ctx.request_state
    if name is None:
        name = accepted(ctx.input_responses, "name", "name")
        if name is None:
            return ask("name", "What is your name? (round 1)", NAME_SCHEMA)
    colour = accepted(ctx.input_responses, "colour", "colour")
    if colour is None:
        return ask("colour", f"{name}, what is your favourite colour? (round 2)", COLOUR_SCHEMA, name)
    return f"{name} likes {colour}"


def roots_text(result: Any) -> str:
    uris = [str(root.uri) for root in getattr(result, "roots", [])]
    return f"roots: {', '.join(uris)}" if uris else "no roots"


@mcp.tool
async def roots_now(ctx: Context) -> str:
    """Asks the client for its roots during the call (roots/list)."""
    return roots_text(await ctx.session.list_roots())


# What roots/list answered for the session, as a filesystem server keeps its allowed
# folders, and how many times it was read.
SESSION_ROOTS: dict[str, Any] = {"text": "not asked", "reads": 0}
ROOTS_READ = asyncio.Event()


async def read_roots(session: Any) -> None:
    try:
        result = await session.list_roots()
        SESSION_ROOTS["text"] = roots_text(result)
    except Exception as error:  # noqa: BLE001 (reported in the tool's answer)
        SESSION_ROOTS["text"] = f"error: {error}"
    SESSION_ROOTS["reads"] += 1
    ROOTS_READ.set()


async def read_roots_soon(session: Any) -> None:
    # A moment first: over HTTP the SDK drops a request sent before the client's GET
    # stream is open (server-everything waits 350 ms for its start-up ask too).
    await asyncio.sleep(0.3)
    await read_roots(session)


async def on_session_roots(ctx: Any, _params: Any) -> None:
    # Not awaited here: the dispatcher waits for this handler before it reads the answer.
    asyncio.get_running_loop().create_task(read_roots_soon(ctx.session))


mcp._mcp_server.add_notification_handler(
    "notifications/initialized", mcp_types.NotificationParams, on_session_roots
)
mcp._mcp_server.add_notification_handler(
    "notifications/roots/list_changed", mcp_types.NotificationParams, on_session_roots
)


@mcp.tool
async def startup_roots() -> str:
    """The roots read for the session (at initialized and at each roots list_changed)."""
    try:  # a call that comes first waits (2 s at most) for the start-up read
        await asyncio.wait_for(ROOTS_READ.wait(), 2)
    except asyncio.TimeoutError:
        pass
    return f"{SESSION_ROOTS['text']} (read {SESSION_ROOTS['reads']} times)"


@mcp.tool
async def greet(name: str = "world") -> str:
    """Answers "Hello, NAME!"."""
    return f"Hello, {name}!"


@mcp.tool
async def whoami(delay: float = 0) -> str:
    """The Authorization header of the HTTP request that carried this call, or "none"."""
    if delay > 0:
        await asyncio.sleep(delay)
    # fastmcp strips credential headers unless asked for them by name.
    return get_http_headers(include={"authorization"}).get("authorization", "none")


NAPS = {"cancelled": 0}


@mcp.tool
async def nap(seconds: float = 30) -> str:
    """Sleeps SECONDS, then "slept S s"; a cancelled nap is counted (naps_cancelled)."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        NAPS["cancelled"] += 1
        raise
    return f"slept {seconds:g} s"


@mcp.tool
async def naps_cancelled() -> str:
    """How many nap calls were cancelled while they slept."""
    return str(NAPS["cancelled"])


async def serve_http(host: str, port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = mcp.http_app(path="/mcp")
    config = uvicorn.Config(app, log_level=os.environ.get("FIXTURE_LOG_LEVEL", "warning"), lifespan="on")
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
