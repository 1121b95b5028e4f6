// A stdio MCP server written the way a JavaScript server writes JSON:
// JSON.stringify, which turns half of a surrogate pair (an emoji sliced
// in two) into a lone "\ud83d" escape that JSON.parse accepts again.
// No dependencies: plain Node. Used by mcpwire's shared adapter suite.
import { createInterface } from "node:readline";

const half = "😀".slice(0, 1); // a lone high surrogate
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let nextId = 1000;
const waiting = new Map();

createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  const m = JSON.parse(line);
  if (m.id !== undefined && m.method === undefined) {
    const done = waiting.get(m.id);
    waiting.delete(m.id);
    if (done) done(m);
    return;
  }
  const reply = (result) => send({ jsonrpc: "2.0", id: m.id, result });
  switch (m.method) {
    case "initialize":
      return reply({
        protocolVersion: "2025-11-25",
        capabilities: { tools: {}, logging: {} },
        serverInfo: { name: "sliced-emoji" + half, version: "1" },
      });
    case "tools/list":
      return reply({
        tools: [
          { name: "sliced", description: "half an emoji" + half, inputSchema: { type: "object" } },
          { name: "sliced_error", inputSchema: { type: "object" } },
          { name: "ask", inputSchema: { type: "object" } },
        ],
      });
    case "tools/call": {
      const name = m.params.name;
      if (name === "sliced") {
        send({
          jsonrpc: "2.0",
          method: "notifications/message",
          params: { level: "info", data: "log " + half },
        });
        return reply({ content: [{ type: "text", text: "emoji: " + half + "!" }] });
      }
      if (name === "sliced_error") {
        return send({ jsonrpc: "2.0", id: m.id, error: { code: -32000, message: "bad " + half } });
      }
      if (name === "ask") {
        const id = nextId++;
        waiting.set(id, (answer) => {
          const said = answer.result?.content?.said ?? "no answer";
          reply({ content: [{ type: "text", text: "client said: " + said }] });
        });
        return send({
          jsonrpc: "2.0",
          id,
          method: "elicitation/create",
          params: {
            mode: "form",
            message: "say " + half,
            requestedSchema: { type: "object", properties: { said: { type: "string" } } },
          },
        });
      }
      return send({ jsonrpc: "2.0", id: m.id, error: { code: -32602, message: "unknown tool" } });
    }
    default:
      if (m.id !== undefined) {
        send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } });
      }
  }
});
process.stdin.on("end", () => process.exit(0));
