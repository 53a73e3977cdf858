#!/usr/bin/env node
// The cardctl executable: the CLI itself is the tsup bundle in dist/ (npm run build).
try {
  await import("../dist/cli.js");
} catch (err) {
  if (err?.code === "ERR_MODULE_NOT_FOUND" && String(err.message).includes("cli.js")) {
    process.stderr.write("cardctl is not built yet: run `npm run build -w @cardctl/cli` (or `npm run build`).\n");
    process.exit(1);
  }
  throw err;
}
