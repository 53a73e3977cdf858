import type { Cardctl } from "@cardctl/sdk";
import type { RevealMode } from "../reveal.js";

/** What the tools work with: an SDK client holding the caller's API key, and how reveal_card answers. */
export interface ToolContext {
  client: Cardctl;
  reveal: RevealMode;
}
