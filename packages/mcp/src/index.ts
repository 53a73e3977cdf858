export { createCardctlMcpServer, type CardctlMcpOptions } from "./server.js";
export type { RevealMode } from "./reveal.js";
