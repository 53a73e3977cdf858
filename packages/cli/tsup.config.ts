import { defineConfig } from "tsup";

/**
 * One ESM bundle: the CLI's own code, @cardctl/sdk and standardwebhooks (bundled, so a packed tarball installs with
 * commander as its only runtime dependency). bin/cardctl.js imports dist/cli.js.
 */
export default defineConfig({
  entry: { cli: "src/cli.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  clean: true,
  sourcemap: true,
  dts: false,
  splitting: false,
  treeshake: true,
  // standardwebhooks (signing for `cardctl listen --forward-to`) is small: bundled too.
  noExternal: ["@cardctl/sdk", "standardwebhooks"],
  external: ["commander"],
  esbuildOptions(o) {
    // Bundle the SDK from its source, so building the CLI does not depend on the SDK's build order.
    o.alias = { "@cardctl/sdk": "../sdk/src/index.ts" };
  },
  esbuildPlugins: [
    {
      // The SDK re-exports the contract's zod schemas (`schemas`); the CLI does not use them, so
      // declaring the contract side-effect free lets tree-shaking drop it and zod from the bundle.
      name: "contract-side-effect-free",
      setup(build) {
        build.onResolve({ filter: /^@cardctl\/contract$/ }, async (args) => {
          if (args.pluginData?.skip) return undefined;
          const r = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: { skip: true } });
          return { path: r.path, sideEffects: false };
        });
      },
    },
  ],
});
