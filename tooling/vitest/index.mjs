import { resolve } from "node:path";
import { defineConfig } from "vitest/config";

/**
 * The shared test config: every package also writes a JSON report to <repo>/.test-results, which
 * .ci/run adds up into one closing line. `name` tells the reports apart (and the database used,
 * and the processor when TEST_PROCESSOR is set).
 * @param {string} name
 * @param {import("vitest/config").ViteUserConfig["test"]} [test]
 */
export function testConfig(name, test = {}) {
  const db = process.env.TEST_DATABASE_URL?.startsWith("mysql") ? "mysql" : "sqlite";
  // TEST_PROCESSOR=stripe (the server suite on the fake Stripe API) gets its own report.
  const processor = process.env.TEST_PROCESSOR ? `-${process.env.TEST_PROCESSOR}` : "";
  return defineConfig({
    test: {
      include: ["test/**/*.test.ts"],
      reporters: ["default", ["json", { outputFile: resolve(import.meta.dirname, `../../.test-results/${name}-${db}${processor}.json`) }]],
      ...test,
    },
  });
}
