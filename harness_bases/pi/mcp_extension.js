// Installed by uhp-server next to the pinned Pi: MCP servers for Pi, which has no MCP client
// of its own. Pi loads it with `-e`. It reads the turn's servers from the JSON file named by
// UHP_PI_MCP_CONFIG ({"servers": [{"name", "url", "tokenEnv"}], "disabled": [...]}),
// speaks MCP Streamable HTTP to each (the gateway's MCP proxy, with the bearer token read from
// the variable `tokenEnv` names, never from a file), and registers every tool as
// `mcp__<server>__<tool>`; it also takes the disabled tools out of the active set. A server that cannot be reached is reported with a notification
// (the base shows it as a notice); the turn goes on without it.
import { readFileSync } from "node:fs";

const CONFIG_ENV = "UHP_PI_MCP_CONFIG";
const PROTOCOL_VERSION = "2025-06-18";
const CLIENT = { name: "uhp-server-pi", version: "1" };

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
  for (const server of config.servers || []) {
    const connection = new McpConnection(server);
    try {
      for (const tool of await connection.open()) {
        pi.registerTool(mcpTool(connection, tool));
      }
    } catch {
      failed.push(server.name);
    }
  }
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
