import { defineConfig } from "tsup";

export default defineConfig({
  entry: ["src/index.ts"],
  format: ["esm", "cjs"],
  tsconfig: "tsconfig.build.json",
  dts: true,
  clean: true,
  sourcemap: true,
  target: "es2022",
  platform: "neutral",
  // The contract's schemas are private to the monorepo: bundle them (JS and types) into dist.
  // zod stays external: it is the one runtime dependency (see README).
  noExternal: ["@cardctl/contract"],
  external: ["zod"],
});
