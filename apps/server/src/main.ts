import { setFlagsFromString } from "node:v8";
import { buildApp } from "./app.js";
import { loadConfig, maskUrl, type Config } from "./config.js";
import { ensureMysqlDatabase, fail, printReady, printSecrets } from "./startup.js";

// V8 lets the old generation grow to up to 4× its live size before the next full collection; at
// this server's allocation rate that was ~100 MB of garbage beside ~30 MB live (RSS ~300 MB after
// 200,000 requests). At 1.5× RSS stays under 200 MB, for a few more full collections of 2–5 ms
// each (BENCHMARKS.md, fix 20). A --heap-growing-percent on the command line wins. The young
// generation is sized when V8 starts, so its flag (--max-semi-space-size=8: ~30 MB less RSS at no
// measurable CPU, fix 32) is on `npm start`'s command line instead.
if (!process.execArgv.some((arg) => arg.startsWith("--heap-growing-percent"))) setFlagsFromString("--heap-growing-percent=50");

// Every start-up failure ends in one line on stderr (what is wrong, what to do) and exit code 1.
let config: Config;
try {
  config = loadConfig();
} catch (err) {
  fail(err, "config");
}
// Test hook for crash tests: pause between hold and mint, announcing the card, so a test can kill us there.
const pauseMs = Number(process.env.CARDCTL_TEST_PAUSE_AFTER_HOLD_MS ?? 0);
const afterHold =
  pauseMs > 0
    ? async (cardId: string) => {
        process.stdout.write(`test-hook: paused after hold ${cardId}\n`);
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    : undefined;
let createdDatabase: string | undefined;
let built: Awaited<ReturnType<typeof buildApp>>;
try {
  if (/^(mysql|mariadb):/.test(config.databaseUrl)) createdDatabase = await ensureMysqlDatabase(config.databaseUrl);
  built = await buildApp(config, { afterHold });
} catch (err) {
  fail(err, "database", config);
}
const { app, services, boot } = built;
if (createdDatabase) app.log.info(`created the MySQL database '${createdDatabase}' (it did not exist)`);

// The recovery pass runs at start-up and then on a timer, on every instance; one at a time here
// (a pass that outlasts the interval is not joined by the next), and awaited on shutdown.
let pass: Promise<void> | undefined;
const runMaintenance = () => {
  pass ??= services.maintenance
    .run()
    .then(
      () => undefined,
      (err) => app.log.error({ err }, "maintenance pass failed"),
    )
    .finally(() => (pass = undefined));
  return pass;
};
let timer: NodeJS.Timeout | undefined;

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    clearInterval(timer);
    await pass;
    await app.close();
    process.exit(0);
  });
}

let url: string;
try {
  url = await app.listen({ port: config.port, host: config.host });
} catch (err) {
  printSecrets(config, boot.created);
  fail(err, "listen", config);
}
// The start-up pass runs once listening: with a backlog, or a slow processor, it takes minutes,
// which /health does not wait for. The ready banner comes after it (the work a crash left is done).
await runMaintenance();
if (config.maintenanceIntervalMs > 0) timer = setInterval(runMaintenance, config.maintenanceIntervalMs);
// The first start's secrets (once, on stdout, never through the logger), then the ready banner.
printReady(config, { url, publicUrl: process.env.PUBLIC_URL ? config.publicUrl : url, database: maskUrl(config.databaseUrl), processor: config.processor }, boot.created);
