// Installed by uhp-server next to the pinned Pi: MCP servers for Pi, which has no MCP client
// of its own. Pi loads it with `-e`. It reads the turn's servers from the JSON file named by
// UHP_PI_MCP_CONFIG ({"servers": [...], "disabled": [...]}). A server with a `url` is reached
// over MCP Streamable HTTP (the gateway's MCP proxy, with the bearer token read from the
// variable `tokenEnv` names, never from a file); one with a `command` is a plugin's stdio
// server, started here (inside Pi, so inside the sandbox) with that command and `args` (the
// server's launcher on its launch file: harness_bases/plugin_folders.py) and spoken to in
// newline-delimited JSON-RPC on its stdin and stdout. Every tool is registered as
// `mcp__<server>__<tool>`; the disabled tools are taken out of the active set. A server that
// cannot be reached or started is reported with a notification (the base shows it as a
// notice); the turn goes on without it.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

const CONFIG_ENV = "UHP_PI_MCP_CONFIG";
const PROTOCOL_VERSION = "2025-06-18";
const CLIENT = { name: "uhp-server-pi", version: "1" };
// How long a stdio server has to answer `initialize` and `tools/list` (Codex's is the same).
const STDIO_STARTUP_MS = 20000;

function toolName(server, tool) {
  return `mcp__${server}__${tool}`.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
}

function eventStreamResponse(text, id) {
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).trimStart())
      .join("\n");
    if (!data) continue;
    const message = JSON.parse(data);
    if (message.id === id) return message;
  }
  throw new Error("the MCP server sent no response");
}

class McpConnection {
  constructor(server) {
    this.server = server;
    this.sessionId = undefined;
    this.nextId = 0;
  }

  headers() {
    const token = process.env[this.server.tokenEnv] || "";
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      authorization: `Bearer ${token}`,
      "mcp-protocol-version": PROTOCOL_VERSION,
    };
    if (this.sessionId) headers["mcp-session-id"] = this.sessionId;
    return headers;
  }

  async post(message, signal) {
    const response = await fetch(this.server.url, {
      method: "POST",
      headers: this.headers(),
      body: JSON.stringify({ jsonrpc: "2.0", ...message }),
      signal,
    });
    const sessionId = response.headers.get("mcp-session-id");
    if (sessionId) this.sessionId = sessionId;
    return response;
  }

  async call(method, params, signal) {
    const id = ++this.nextId;
    const response = await this.post({ id, method, params }, signal);
    if (!response.ok) throw new Error(`the MCP server answered HTTP ${response.status}`);
    const type = response.headers.get("content-type") || "";
    const text = await response.text();
    const message = type.includes("text/event-stream")
      ? eventStreamResponse(text, id)
      : JSON.parse(text);
    if (message.error) throw new Error(message.error.message || "MCP error");
    return message.result;
  }

  async open() {
    await this.call("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: CLIENT,
    });
    const initialized = await this.post({ method: "notifications/initialized" });
    await initialized.text();
    const tools = [];
    let cursor;
    do {
      const page = await this.call("tools/list", cursor ? { cursor } : {});
      tools.push(...(page.tools || []));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }
}

// A plugin's stdio server: one child process, its requests matched to answers by id.
class StdioConnection {
  constructor(server) {
    this.server = server;
    this.nextId = 0;
    this.pending = new Map();
    this.buffer = "";
    this.child = undefined;
    this.gone = undefined; // why the process is no more: every later call fails with it
  }

  start() {
    // The launcher keeps only a few harmless variables; the turn's UHP_* ones (its tokens)
    // are left out here already.
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("UHP_")));
    const child = spawn(this.server.command, this.server.args || [], { env, stdio: ["pipe", "pipe", "ignore"] });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.receive(chunk));
    child.stdin.on("error", () => {});
    child.on("error", (error) => this.failAll(error));
    child.on("exit", () => this.failAll(new Error(`the MCP server ${this.server.name} exited`)));
    this.child = child;
  }

  stop() {
    if (this.child && this.child.exitCode === null) this.child.kill();
  }

  receive(chunk) {
    this.buffer += chunk;
    let end;
    while ((end = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, end).trim();
      this.buffer = this.buffer.slice(end + 1);
      if (line) this.handle(line);
    }
  }

  handle(line) {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return; // not JSON-RPC: a server's stray output
    }
    if (message.method !== undefined) {
      // A request of the server's own (roots, sampling): this client offers none of them.
      if (message.id !== undefined) {
        this.send({ id: message.id, error: { code: -32601, message: "method not found" } });
      }
      return;
    }
    const waiter = this.pending.get(message.id);
    if (waiter) {
      this.pending.delete(message.id);
      waiter.resolve(message);
    }
  }

  failAll(error) {
    this.gone = this.gone || error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }

  send(message) {
    this.child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");
  }

  async call(method, params, signal, timeoutMs) {
    if (this.gone) throw this.gone;
    const id = ++this.nextId;
    const answer = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      const fail = (error) => {
        if (this.pending.delete(id)) reject(error);
      };
      signal?.addEventListener("abort", () => fail(new Error("aborted")), { once: true });
      if (timeoutMs) setTimeout(() => fail(new Error("the MCP server did not answer")), timeoutMs).unref();
    });
    this.send({ id, method, params });
    const message = await answer;
    if (message.error) throw new Error(message.error.message || "MCP error");
    return message.result;
  }

  async open() {
    this.start();
    await this.call(
      "initialize",
      { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT },
      undefined,
      STDIO_STARTUP_MS,
    );
    this.send({ method: "notifications/initialized" });
    const tools = [];
    let cursor;
    do {
      const page = await this.call("tools/list", cursor ? { cursor } : {}, undefined, STDIO_STARTUP_MS);
      tools.push(...(page.tools || []));
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }
}

function connect(server) {
  return server.command ? new StdioConnection(server) : new McpConnection(server);
}

function resultContent(result) {
  return (result.content || []).map((part) =>
    part.type === "text" ? { type: "text", text: part.text } : { type: "text", text: JSON.stringify(part) },
  );
}

function mcpTool(connection, tool) {
  return {
    name: toolName(connection.server.name, tool.name),
    label: `${connection.server.name}: ${tool.name}`,
    description: tool.description || `${tool.name} (MCP server ${connection.server.name})`,
    parameters: tool.inputSchema || { type: "object", properties: {} },
    async execute(_toolCallId, params, signal) {
      const result = await connection.call("tools/call", { name: tool.name, arguments: params }, signal);
      const content = resultContent(result);
      if (result.isError) throw new Error(content.map((part) => part.text).join("\n") || "the MCP tool failed");
      return { content, details: {} };
    },
  };
}

export default async function (pi) {
  const path = process.env[CONFIG_ENV];
  if (!path) return;
  const config = JSON.parse(readFileSync(path, "utf8"));
  const disabled = new Set(config.disabled || []);
  const failed = [];
  const started = [];
  for (const server of config.servers || []) {
    const connection = connect(server);
    try {
      for (const tool of await connection.open()) {
        pi.registerTool(mcpTool(connection, tool));
      }
      if (connection.stop) started.push(connection);
    } catch {
      connection.stop?.();
      failed.push(server.name);
    }
  }
  // A stdio server lives as long as Pi does.
  process.on("exit", () => started.forEach((connection) => connection.stop()));
  pi.on("session_start", async (_event, ctx) => {
    // With MCP servers the base passes no `--tools` allowlist (it would leave these tools
    // out): the disabled tools, built-in or MCP, are taken out of the active set here.
    if (disabled.size > 0) {
      const active = pi.getActiveTools().map((tool) => (typeof tool === "string" ? tool : tool.name));
      pi.setActiveTools(active.filter((name) => !disabled.has(name)));
    }
    for (const name of failed) {
      ctx.ui.notify(`The MCP server ${name} could not be started.`, "warning");
    }
  });
}
