// A host built on the TypeScript SDK's Client (the one most hosts use), in
// front of `mcpwire bridge`: it connects over stdio (or Streamable HTTP),
// declares roots and answers roots/list, lists the tools and runs the
// steps it is given, then prints what it saw as one JSON line.
//
// usage: node host.mjs <node_modules> '<spec JSON>'
//   spec: {command, args, env?} or {url}; steps: [{call, args?, progress?}]
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, specText] = process.argv.slice(2);
const spec = JSON.parse(specText);
const sdk = (p) =>
  import(pathToFileURL(path.join(modules, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { ListRootsRequestSchema } = await sdk('types.js');

const client = new Client(
  { name: 'ts-host', version: '1.0.0' },
  { capabilities: { roots: { listChanged: true } } },
);
let rootsAsked = 0;
client.setRequestHandler(ListRootsRequestSchema, async () => {
  rootsAsked += 1;
  return { roots: [{ uri: 'file:///tmp/bridge-root', name: 'bridge-root' }] };
});
const transport = spec.url
  ? new StreamableHTTPClientTransport(new URL(spec.url))
  : new StdioClientTransport({
      command: spec.command,
      args: spec.args,
      env: { ...process.env, ...(spec.env ?? {}) },
      stderr: 'inherit',
    });
await client.connect(transport);
const out = {
  server: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  tools: (await client.listTools()).tools.map((t) => t.name),
  steps: [],
};
for (const step of spec.steps ?? []) {
  let progress = 0;
  const options = step.progress ? { onprogress: () => { progress += 1; } } : undefined;
  try {
    const result = await client.callTool(
      { name: step.call, arguments: step.args ?? {} },
      undefined,
      options,
    );
    out.steps.push({ result, progress });
  } catch (e) {
    out.steps.push({ error: { code: e.code ?? null, message: String(e.message) } });
  }
}
out.rootsAsked = rootsAsked;
console.log(JSON.stringify(out));
await client.close();
