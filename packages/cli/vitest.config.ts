import { testConfig } from "@cardctl/vitest-config";

export default testConfig("cli", { testTimeout: 60000, hookTimeout: 60000 });
