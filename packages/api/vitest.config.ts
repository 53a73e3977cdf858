import { testConfig } from "@cardctl/vitest-config";

export default testConfig("api");
