#!/usr/bin/env node
// cardctl-mcp: the MCP server over stdio; the code is the tsup bundle in dist/ (npm run build).
try {
  await import("../dist/main.js");
} catch (err) {
  if (err?.code === "ERR_MODULE_NOT_FOUND" && String(err.message).includes("main.js")) {
    process.stderr.write("cardctl-mcp is not built yet: run `npm run build -w @cardctl/mcp` (or `npm run build`).\n");
    process.exit(1);
  }
  throw err;
}
