// A 2025-11-25 task server on the official TypeScript SDK v1
// (@modelcontextprotocol/sdk 1.32.2, its experimental tasks), served over
// Streamable HTTP with plain JSON answers (enableJsonResponse: true) in
// stateful sessions, on 127.0.0.1 only. For interop/ts-sdk/check.sh.
//
//   PORT=N node server.mjs       prints "listening on http://127.0.0.1:N/mcp", then
//                                 one JSON line per POST: {"method", "tool"?, "task"
//                                 (whether params.task was sent), "status",
//                                 "contentType" (of the answer)}; no task ids
//
// Tools:
//   slow_report {topic, ms?}   taskSupport "required": completes after `ms`
//                               (default 800) with the text "Report: <topic>"
//   confirm_action {action}    taskSupport "optional": asks for input with an
//                               elicitation form {confirm: boolean (default true),
//                               note?: string},
//                               then completes with "Confirmed: <action> (<note>)"
//                               or "Not confirmed: <action> (<action of the answer>)"
//   failing_job                taskSupport "required": ends with a tool result
//                               isError: true ("the job failed"), a failed task
//   echo {message}             a plain tool (taskSupport forbidden): "Echo: <message>"
//
// Every session has its own McpServer, InMemoryTaskStore and
// InMemoryTaskMessageQueue: a task lives in the session that made it.
//
// How the elicitation reaches the client. The SDK's way for a task
// (sendRequest with relatedTask) queues the request in the task message queue,
// and tasks/result hands it to the transport as related to the tasks/result
// request. With enableJsonResponse the transport writes nothing but the final
// answer into a POST's JSON body, so that request is dropped there and the
// task would wait for ever. So the request is sent with the same related-task
// _meta (and the task set to input_required, as the SDK's sendRequest does)
// on the session's standalone GET stream, where 2025-11-25 says clients
// should expect it too. SEND_VIA_QUEUE=1 uses the SDK's queue instead, to
// show the drop. The transport drops a request sent on that stream before
// the client's GET has opened it (silently: no event store to replay it
// from), and a client opens it beside its first requests, so the task
// could ask first and wait for ever: it asks once the stream is open
// (waiting for it at most 5 s).

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
// zod is the SDK's own dependency (its tool schemas), at the version the lockfile pins.
import * as z from "zod/v4";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  InMemoryTaskStore,
  InMemoryTaskMessageQueue,
} from "@modelcontextprotocol/sdk/experimental/tasks";
import {
  ElicitResultSchema,
  RELATED_TASK_META_KEY,
  isInitializeRequest,
} from "@modelcontextprotocol/sdk/types.js";

const PORT = Number(process.env.PORT ?? 0);
const VIA_QUEUE = process.env.SEND_VIA_QUEUE === "1";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Stores a task's end unless it ended already (cancelled meanwhile).
async function finish(store, taskId, status, result) {
  const task = await store.getTask(taskId);
  if (!task || ["completed", "failed", "cancelled"].includes(task.status)) return;
  await store.storeTaskResult(taskId, status, result).catch(() => {});
}

function newServer() {
  const taskStore = new InMemoryTaskStore();
  const taskMessageQueue = new InMemoryTaskMessageQueue();
  const server = new McpServer(
    { name: "ts-sdk-json-tasks", version: "1.0.0" },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      taskStore,
      taskMessageQueue,
    },
  );
  const taskHandlers = (start) => ({
    createTask: async (args, extra) => {
      const task = await extra.taskStore.createTask({ ttl: 60000, pollInterval: 200 });
      start(task.taskId, args, extra).catch((error) =>
        finish(taskStore, task.taskId, "failed", {
          content: [{ type: "text", text: String(error) }],
          isError: true,
        }),
      );
      return { task };
    },
    getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
    getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
  });

  server.experimental.tasks.registerToolTask(
    "slow_report",
    {
      description: "A report that takes a while (a task, always)",
      inputSchema: { topic: z.string(), ms: z.number().optional() },
      execution: { taskSupport: "required" },
    },
    taskHandlers(async (taskId, { topic, ms }) => {
      await sleep(ms ?? 800);
      await finish(taskStore, taskId, "completed", {
        content: [{ type: "text", text: `Report: ${topic}` }],
      });
    }),
  );

  server.experimental.tasks.registerToolTask(
    "confirm_action",
    {
      description: "Asks for confirmation with a form, then acts",
      inputSchema: { action: z.string() },
      execution: { taskSupport: "optional" },
    },
    taskHandlers(async (taskId, { action }, extra) => {
      const params = {
        mode: "form",
        message: `Really ${action}?`,
        requestedSchema: {
          type: "object",
          properties: {
            confirm: { type: "boolean", title: "Confirm", default: true },
            note: { type: "string", title: "Note" },
          },
          required: ["confirm"],
        },
      };
      let answer;
      if (VIA_QUEUE) {
        answer = await extra.sendRequest(
          { method: "elicitation/create", params },
          ElicitResultSchema,
          { relatedTask: { taskId } },
        );
      } else {
        await taskStore.updateTaskStatus(taskId, "input_required", "Waiting for confirmation");
        await Promise.race([getStream(extra.sessionId).opened, sleep(5000)]);
        answer = await server.server.elicitInput({
          ...params,
          _meta: { [RELATED_TASK_META_KEY]: { taskId } },
        });
        const now = await taskStore.getTask(taskId);
        if (now && now.status === "input_required") {
          await taskStore.updateTaskStatus(taskId, "working", "Confirmed, acting");
        }
      }
      const content = answer.content ?? {};
      const text =
        answer.action === "accept" && content.confirm
          ? `Confirmed: ${action} (${content.note ?? "no note"})`
          : `Not confirmed: ${action} (${answer.action})`;
      await sleep(100);
      await finish(taskStore, taskId, "completed", { content: [{ type: "text", text }] });
    }),
  );

  server.experimental.tasks.registerToolTask(
    "failing_job",
    {
      description: "A job that fails with a tool error (a task, always)",
      inputSchema: {},
      execution: { taskSupport: "required" },
    },
    taskHandlers(async (taskId) => {
      await sleep(200);
      await finish(taskStore, taskId, "failed", {
        content: [{ type: "text", text: "the job failed" }],
        isError: true,
      });
    }),
  );

  server.registerTool(
    "echo",
    { description: "Echoes its message (a plain tool)", inputSchema: { message: z.string() } },
    async ({ message }) => ({ content: [{ type: "text", text: `Echo: ${message}` }] }),
  );

  return { server, taskStore };
}

// Session id -> transport.
const sessions = new Map();

// Session id -> {opened, open}: `opened` resolves once the session's
// standalone GET stream is open (its answer's head is written, after the
// transport registered the stream).
const getStreams = new Map();
function getStream(sessionId) {
  let stream = getStreams.get(sessionId);
  if (!stream) {
    let open;
    const opened = new Promise((resolve) => (open = resolve));
    stream = { opened, open };
    getStreams.set(sessionId, stream);
  }
  return stream;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

// Logs a POST's method (and tool, and whether it was task-augmented) with
// the status and Content-Type of its answer, once sent.
function logAnswer(req, res, body) {
  let contentType = null;
  const writeHead = res.writeHead;
  res.writeHead = function (status, ...rest) {
    for (const arg of rest) {
      if (arg && typeof arg === "object") {
        const entries = Array.isArray(arg) ? [] : Object.entries(arg);
        for (const [name, value] of entries) {
          if (name.toLowerCase() === "content-type") contentType = String(value);
        }
      }
    }
    return writeHead.call(this, status, ...rest);
  };
  res.on("finish", () => {
    const message = Array.isArray(body) ? body[0] ?? {} : body ?? {};
    const line = { method: message.method ?? null, status: res.statusCode };
    if (message.method === "tools/call") {
      line.tool = message.params?.name;
      line.task = message.params?.task !== undefined;
    }
    line.contentType = contentType ?? res.getHeader("content-type") ?? null;
    console.log(JSON.stringify(line));
  });
}

function refuse(res, status, code, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

const http = createServer(async (req, res) => {
  try {
    if (new URL(req.url, "http://localhost").pathname !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const sessionId = req.headers["mcp-session-id"];
    const known = sessionId ? sessions.get(sessionId) : undefined;
    if (req.method === "POST") {
      const body = await readBody(req);
      logAnswer(req, res, body);
      if (known) {
        await known.handleRequest(req, res, body);
      } else if (!sessionId && isInitializeRequest(body)) {
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: true,
          onsessioninitialized: (id) => sessions.set(id, transport),
        });
        const { server, taskStore } = newServer();
        transport.onclose = () => {
          if (transport.sessionId) {
            sessions.delete(transport.sessionId);
            getStreams.delete(transport.sessionId);
          }
          taskStore.cleanup();
        };
        await server.connect(transport);
        await transport.handleRequest(req, res, body);
      } else if (sessionId) {
        refuse(res, 404, -32001, "Session not found");
      } else {
        refuse(res, 400, -32000, "Bad Request: Server not initialized");
      }
    } else if (req.method === "GET" || req.method === "DELETE") {
      if (!known) {
        refuse(res, sessionId ? 404 : 400, -32000, "Bad Request: no valid session");
        return;
      }
      if (req.method === "GET") {
        const writeHead = res.writeHead;
        res.writeHead = function (status, ...rest) {
          if (status === 200) getStream(sessionId).open();
          return writeHead.call(this, status, ...rest);
        };
      }
      await known.handleRequest(req, res);
    } else {
      res.writeHead(405, { allow: "GET, POST, DELETE" }).end();
    }
  } catch (error) {
    console.error("request failed:", error);
    if (!res.headersSent) refuse(res, 500, -32603, "Internal server error");
  }
});

http.listen(PORT, "127.0.0.1", () => {
  const { port } = http.address();
  console.log(`listening on http://127.0.0.1:${port}/mcp`);
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => process.exit(0));
}
