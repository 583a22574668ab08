// Image blocks through the official MCP TypeScript SDK, which checks every
// reply against the MCP schema: a 4000x3000 PNG comes back as one image
// block within 1568 px and 1 MiB, and six images as four and a note.
// Run by tests/mcpjs_test.go, which passes the binary in REPLHUB_BIN.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const fail = (msg) => {
  console.error("FAIL: " + msg);
  process.exit(1);
};
const transport = new StdioClientTransport({ command: process.env.REPLHUB_BIN, args: ["mcp"], env: process.env, stderr: "inherit" });
const client = new Client({ name: "replhub-test", version: "1" });
await client.connect(transport);
// (Scaling a big image is slow under -race on a busy machine.)
const exec = (code) => client.callTool({ name: "exec", arguments: { name: "img", code, timeout: 300 } }, undefined, { timeout: 330000 });

const png = `import struct, zlib
def png(w, h, shade=64):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    row = b"\\x00" + b"".join(bytes((x & 255, shade, 128)) for x in range(w))
    return (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * h, 1)) + chunk(b"IEND", b""))
class Img:
    def __init__(self, w, h, shade=64): self.w, self.h, self.shade = w, h, shade
    def _repr_png_(self): return png(self.w, self.h, self.shade)
`;
let res = await exec(png + "Img(4000, 3000)");
const images = (r) => r.content.filter((c) => c.type === "image");
let imgs = images(res);
if (imgs.length !== 1) fail("want one image block, got " + JSON.stringify(res.content.map((c) => c.type)));
const bytes = Buffer.from(imgs[0].data, "base64");
const width = bytes.readUInt32BE(16), height = bytes.readUInt32BE(20);
if (imgs[0].mimeType !== "image/png" || bytes.toString("latin1", 1, 4) !== "PNG") fail("not a PNG: " + imgs[0].mimeType);
if (Math.max(width, height) > 1568 || bytes.length > 1 << 20) fail(`not bounded: ${width}x${height}, ${bytes.length} bytes`);
if (!res.content[0].text.includes("(scaled from 4000x3000)")) fail("no note of the scaling: " + res.content[0].text);

res = await exec("display(*[Img(30, 20, i) for i in range(6)])");
imgs = images(res);
const text = res.content.filter((c) => c.type === "text").map((c) => c.text).join("");
if (imgs.length !== 4) fail("want four image blocks, got " + imgs.length);
if (!text.includes("[2 more images not shown")) fail("no note of the images left out: " + text);
console.log("ok: images");
await client.close();
