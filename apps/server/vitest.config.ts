import { testConfig } from "@cardctl/vitest-config";

export default testConfig("server", {
  testTimeout: 60_000,
  hookTimeout: 60_000,
  pool: "forks",
  globalSetup: ["test/global-setup.ts"],
  // Two cores: at most two files at once keeps MariaDB and SQLite runs steady.
  maxWorkers: 2,
});
