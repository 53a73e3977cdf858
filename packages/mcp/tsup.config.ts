import { defineConfig } from "tsup";

/**
 * ESM bundles with types: the MCP server (`index`, which the cardctl server also mounts at /mcp)
 * and the stdio entry (`main`, which bin/cardctl-mcp.js imports). @cardctl/sdk and the contract are
 * bundled from source, so a packed tarball installs with the MCP SDK and zod as its only runtime
 * dependencies.
 */
export default defineConfig({
  entry: { index: "src/index.ts", main: "src/main.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  clean: true,
  sourcemap: true,
  dts: { entry: { index: "src/index.ts" } },
  splitting: true,
  noExternal: ["@cardctl/sdk", "@cardctl/contract"],
  external: ["@modelcontextprotocol/sdk", "zod"],
  esbuildOptions(o) {
    o.alias = { "@cardctl/sdk": "../sdk/src/index.ts", "@cardctl/contract/money": "../contract/src/money.ts", "@cardctl/contract": "../contract/src/index.ts" };
  },
});
