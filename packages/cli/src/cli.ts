import { main } from "./index.js";

// A reader that stops early (`cardctl cards list | head -3`) closes the pipe: stop quietly, as
// Unix tools do, instead of crashing on the write that found it closed.
for (const stream of [process.stdout, process.stderr])
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    process.exit(process.exitCode ?? 0);
  });

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`cardctl: unexpected failure: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
