// Drives `agentexec serve` over HTTP with the official TypeScript MCP
// client (@modelcontextprotocol/client 2.x) speaking protocol 2026-07-28:
// no session, conversations kept by the handle agentexec returns in _meta.
// Usage: node interop2026.mjs <client-dir> <url> <token>
import { pathToFileURL } from "node:url";
import path from "node:path";

const [clientDir, url, token] = process.argv.slice(2);
const { Client, StreamableHTTPClientTransport } = await import(
  pathToFileURL(path.join(clientDir, "node_modules/@modelcontextprotocol/client/dist/index.mjs")).href
);
const KEY = "io.agentexec/conversation";

function fail(msg) {
  console.error("interop2026: " + msg);
  process.exit(1);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "interop-2026", version: "1.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
await client.connect(transport);
if (client.getNegotiatedProtocolVersion() !== "2026-07-28") fail(`protocol ${client.getNegotiatedProtocolVersion()}`);
if (transport.sessionId) fail(`a session id: ${transport.sessionId}`);

const { tools } = await client.listTools();
if (!tools.some((t) => t.name === "bash")) fail(`tools ${tools.map((t) => t.name)}`);
const text = (r) => r.content.map((c) => c.text).join("");

let r = await client.callTool({ name: "bash", arguments: { command: "echo interop 2026" } });
if (r.isError || text(r) !== "interop 2026\n") fail(`bash: ${JSON.stringify(r)}`);
const handle = r._meta && r._meta[KEY];
if (typeof handle !== "string" || !handle.startsWith("agx1.")) fail(`no handle: ${JSON.stringify(r)}`);

const inConv = (name, args) => client.callTool({ name, arguments: args, _meta: { [KEY]: handle } });
r = await inConv("bash", { command: "echo up; exec sleep 600", mode: "background" });
if (r.isError) fail(`background: ${JSON.stringify(r)}`);
r = await inConv("job_list", {});
if (!text(r).includes("sleep 600")) fail(`job_list with the handle: ${text(r)}`);
const id = text(r).split(/\s+/)[0];
r = await client.callTool({ name: "job_list", arguments: {} });
if (!text(r).includes("No background jobs")) fail(`job_list without the handle: ${text(r)}`);
r = await client.callTool({ name: "job_list", arguments: {}, _meta: { [KEY]: "agx1.forged.handle" } });
if (!r.isError || !text(r).includes("handle")) fail(`forged handle: ${JSON.stringify(r)}`);
r = await inConv("job_kill", { job_id: id });
if (r.isError || !text(r).includes("stopped")) fail(`job_kill: ${text(r)}`);

await client.close();
console.log("interop 2026 ok");
