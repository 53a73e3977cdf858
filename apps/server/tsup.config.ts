import { defineConfig } from "tsup";

/**
 * `npm start` runs the built server with node (no TypeScript loader in production). One ESM file,
 * dist/main.js (and dist/sender-thread.js, the webhook sender's thread): the server's code and the workspace packages it uses (@cardctl/api,
 * @cardctl/contract: TypeScript sources, which node cannot load) are bundled; every package from
 * node_modules stays external and is loaded from there at run time (better-sqlite3 and mysql2 are
 * native or optional, and TypeORM, Fastify and the rest resolve their own files), so the bundle
 * must live in apps/server/dist, beside the node_modules it resolves from.
 */
export default defineConfig({
  // The webhook sender's worker thread is a file of its own (ThreadedWebhookSender loads it by URL).
  entry: { main: "src/main.ts", "sender-thread": "../../packages/api/src/webhooks/sender-thread.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  outDir: "dist",
  clean: true,
  sourcemap: true,
  dts: false,
  splitting: false,
  // Keep class and function names: TypeORM names migrations after their classes.
  keepNames: true,
  noExternal: [/^@cardctl\//],
  // Any bare import that is not a workspace package stays an import.
  external: [/^(?!@cardctl\/)[^./]/],
});
