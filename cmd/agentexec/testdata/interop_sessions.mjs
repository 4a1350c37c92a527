// Drives exec_command and write_stdin of `agentexec mcp` with the official
// TypeScript MCP SDK client. Usage: node interop_sessions.mjs <sdk-dir> <agentexec> <workdir>
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir, binary, workdir] = process.argv.slice(2);
const load = (p) => import(pathToFileURL(path.join(sdkDir, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");

function fail(msg) {
  console.error("interop: " + msg);
  process.exit(1);
}

const transport = new StdioClientTransport({
  command: binary,
  args: ["mcp", "--tools", "exec_command,write_stdin", "--audit-log", "off", "--cwd", workdir],
  env: { PATH: process.env.PATH, HOME: process.env.HOME || "/tmp", XDG_CONFIG_HOME: workdir },
});
const client = new Client({ name: "interop-ts", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort().join(",");
if (names !== "exec_command,session_kill,session_list,write_stdin") fail(`tools ${names}`);

const text = (r) => r.content.map((c) => c.text).join("");
const header = /^Wall time: \d+\.\d seconds\nProcess (exited with code (\d+)|running with session ID ([0-9a-f]+))\nOutput:\n/;

let r = await client.callTool({ name: "exec_command", arguments: { cmd: "echo hi; exit 4" } });
let m = header.exec(text(r));
if (!m || m[2] !== "4" || !text(r).endsWith("\nhi\n")) fail(`exec_command: ${JSON.stringify(r)}`);

r = await client.callTool({ name: "exec_command", arguments: { cmd: "read -p 'name? ' n; echo hi $n", tty: true, yield_time_ms: 1000 } });
m = header.exec(text(r));
if (!m || !m[3]) fail(`prompt: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "write_stdin", arguments: { session_id: m[3], chars: "bob\n", yield_time_ms: 5000 } });
m = header.exec(text(r));
if (!m || m[2] !== "0" || !text(r).includes("hi bob")) fail(`answer: ${JSON.stringify(r)}`);

r = await client.callTool({ name: "exec_command", arguments: { cmd: "bash --norc --noprofile -i", tty: true, yield_time_ms: 1000 } });
m = header.exec(text(r));
if (!m || !m[3]) fail(`shell: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "write_stdin", arguments: { session_id: m[3], chars: "git push --force\n" } });
if (!r.isError || !text(r).startsWith("permission denied")) fail(`refused line: ${JSON.stringify(r)}`);

await client.close();
console.log("interop ok");
