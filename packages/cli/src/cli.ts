import { main } from "./index.js";

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`cardctl: unexpected failure: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
