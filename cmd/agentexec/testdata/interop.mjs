// Drives `agentexec mcp` with the official TypeScript MCP SDK client: a
// client not written in Go. Usage: node interop.mjs <sdk-dir> <agentexec> <workdir>
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
  args: ["mcp", "--tools", "bash,exec", "--audit-log", "off", "--cwd", workdir],
  env: { PATH: process.env.PATH, HOME: process.env.HOME || "/tmp", XDG_CONFIG_HOME: workdir },
});
const client = new Client({ name: "interop-ts", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const names = tools.map((t) => t.name).sort().join(",");
if (names !== "bash,exec,job_kill,job_list,job_output,job_wait") fail(`tools ${names}`);
const bash = tools.find((t) => t.name === "bash");
if (!bash.inputSchema.properties.mode || !bash.description.includes("<pwd>")) fail("bash schema or description");

const text = (r) => r.content.map((c) => c.text).join("");
let r = await client.callTool({ name: "bash", arguments: { command: "echo interop" } });
if (text(r) !== "interop\n" || r.isError) fail(`bash: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "exec", arguments: { command: "exit 3" } });
if (text(r) !== "[Exit Code: 3]\n\n(no output)") fail(`exec: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "bash", arguments: { command: "git push --force" } });
if (!r.isError || !text(r).startsWith("permission denied: git push --force is not allowed")) fail(`refusal: ${JSON.stringify(r)}`);
r = await client.callTool({ name: "bash", arguments: { command: 5 } });
if (!r.isError || !text(r).startsWith("invalid input: command: must be a string")) fail(`validation: ${JSON.stringify(r)}`);

await client.close();
console.log("interop ok");
