import { testConfig } from "@cardctl/vitest-config";

export default testConfig("sdk", { testTimeout: 60000, hookTimeout: 60000, pool: "forks", maxWorkers: 2 });
