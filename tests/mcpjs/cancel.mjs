// Cancelled calls through the official MCP TypeScript SDK: a call that the
// client's own request timeout ends, and one that the client aborts. Each
// must get no response (the SDK reports a response to a request it no
// longer waits for as "unknown message ID"), and its cell's output must
// reach the next wait or exec, with a note that the client cancelled it.
// Run by tests/mcpjs_test.go, which passes the binary in REPLHUB_BIN.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js";

const fail = (msg) => {
  console.error("FAIL: " + msg);
  process.exit(1);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (res) => res.content.map((c) => c.text ?? "").join("");

const transport = new StdioClientTransport({
  command: process.env.REPLHUB_BIN,
  args: ["mcp"],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "replhub-test", version: "1" });
const errors = [];
client.onerror = (e) => errors.push(String(e));
await client.connect(transport);

const exec = (args, opts) => client.callTool({ name: "exec", arguments: args }, undefined, opts);
const sleeper = 'import time\nprint("started", flush=True)\ntime.sleep(60)';

// The session first, in cell 1: a start on a loaded machine may take
// longer than the timeout below, which is for a running cell.
await exec({ name: "js", code: "import time" });

// 1. The client's request timeout fires (Claude Code's is 60 s; this one
// is short, and takes the same path: notifications/cancelled).
let err;
try {
  await exec({ name: "js", code: sleeper, timeout: 120 }, { timeout: 1500 });
} catch (e) {
  err = e;
}
if (!err || err.code !== ErrorCode.RequestTimeout) fail("want a request timeout, got " + err);
await sleep(1500); // a response, if the server sent one, arrives by now
if (errors.length) fail("a response came after the cancel: " + errors.join("; "));
let res = await client.callTool({ name: "wait", arguments: { name: "js", timeout: 10 } });
let text = textOf(res);
for (const want of ["started", "KeyboardInterrupt", "the client cancelled the call that ran cell 2"]) {
  if (!text.includes(want)) fail(`wait after a timeout: want ${JSON.stringify(want)} in:\n${text}`);
}
if (!res.isError) fail("a cell that ended in KeyboardInterrupt is an error");

// 2. The client aborts the call; the next exec shows the cell first.
const ac = new AbortController();
setTimeout(() => ac.abort("the user pressed Esc"), 1000);
err = undefined;
try {
  await exec({ name: "js", code: sleeper, timeout: 120 }, { signal: ac.signal });
} catch (e) {
  err = e;
}
if (!err) fail("an aborted call resolved");
await sleep(1500);
if (errors.length) fail("a response came after the abort: " + errors.join("; "));
res = await exec({ name: "js", code: "6 * 7" });
text = textOf(res);
for (const want of ["the client cancelled the call that ran cell 3", "started", "KeyboardInterrupt", "Out[4]: 42"]) {
  if (!text.includes(want)) fail(`exec after an abort: want ${JSON.stringify(want)} in:\n${text}`);
}
if (text.indexOf("started") > text.indexOf("Out[4]")) fail("the cancelled cell's output must come first:\n" + text);

res = await client.callTool({ name: "wait", arguments: { name: "js" } });
if (!textOf(res).includes("nothing to collect")) fail("a second wait found more:\n" + textOf(res));
await client.callTool({ name: "kill", arguments: { name: "js" } });

// 3. Another client's cancelled calls end what they started, and nothing
// else: this client's cell outlives its call; the other's exec, refused
// as the session is busy, is cancelled at once, five times. This
// client's cell runs to its end.
const other = new Client({ name: "replhub-test-other", version: "1" });
// A busy refusal may be on its way as the call is aborted: the SDK then
// reports a response for a request it no longer waits for. Any other
// late response is a failure.
other.onerror = (e) => {
  if (!String(e).includes("is busy")) errors.push("other: " + String(e));
};
await other.connect(new StdioClientTransport({ command: process.env.REPLHUB_BIN, args: ["mcp"], env: process.env, stderr: "inherit" }));
await exec({ name: "js2", code: "import time" });
const long = 'import time\nprint("mine started", flush=True)\ntime.sleep(4)\nprint("mine finished")';
res = await exec({ name: "js2", code: long, timeout: 0.5 });
if (!textOf(res).includes("still running")) fail("want the cell still running:\n" + textOf(res));
const otherExec = (args) => {
  const ac = new AbortController();
  const p = other.callTool({ name: "exec", arguments: args }, undefined, { signal: ac.signal }).catch((e) => e);
  return { p, abort: () => ac.abort("the other client gives up") };
};
for (let i = 0; i < 5; i++) {
  const call = otherExec({ name: "js2", code: 'print("busy one ran")' });
  call.abort();
  await call.p;
}
res = await client.callTool({ name: "wait", arguments: { name: "js2", timeout: 30 } });
text = textOf(res);
if (!text.includes("mine finished") || text.includes("KeyboardInterrupt") || text.includes("cancelled"))
  fail("another client's cancel reached this client's cell:\n" + text);
res = await exec({ name: "js2", code: "7 * 6" });
text = textOf(res);
if (!text.includes("42") || text.includes("busy one ran")) fail("a refused exec ran:\n" + text);
await sleep(500);
if (errors.length) fail("a response came after a cancel: " + errors.join("; "));
await client.callTool({ name: "kill", arguments: { name: "js2" } });
await other.close();
await client.close();
console.log("ok: 2 cancelled calls, no late response, output shown once; another client's cancels end only theirs");
