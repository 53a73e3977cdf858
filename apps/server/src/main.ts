import { setFlagsFromString } from "node:v8";
import { buildApp } from "./app.js";
import { loadConfig } from "./config.js";

// V8 lets the old generation grow to up to 4× its live size before the next full collection; at
// this server's allocation rate that was ~100 MB of garbage beside ~30 MB live (RSS ~300 MB after
// 200,000 requests). At 1.5× RSS stays under 200 MB, for a few more full collections of 2–5 ms
// each (BENCHMARKS.md, fix 20). A --heap-growing-percent on the command line wins.
if (!process.execArgv.some((arg) => arg.startsWith("--heap-growing-percent"))) setFlagsFromString("--heap-growing-percent=50");

const config = loadConfig();
// Test hook for crash tests: pause between hold and mint, announcing the card, so a test can kill us there.
const pauseMs = Number(process.env.CARDCTL_TEST_PAUSE_AFTER_HOLD_MS ?? 0);
const afterHold =
  pauseMs > 0
    ? async (cardId: string) => {
        process.stdout.write(`test-hook: paused after hold ${cardId}\n`);
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    : undefined;
const { app, services, boot } = await buildApp(config, { afterHold });

const { adminToken, demoApiKey, demoAccountId } = boot.created;
if (adminToken || demoApiKey) {
  // Printed once, on the first start, to the terminal only (never through the logger).
  const lines = ["", "cardctl: first start. These secrets are shown once; store them now.", ""];
  if (adminToken) lines.push(`  Admin token (operator API):   ${adminToken}`);
  if (demoApiKey) lines.push(`  Demo account:                 ${demoAccountId}`, `  Test API key (demo account):  ${demoApiKey}`);
  lines.push("");
  process.stdout.write(lines.join("\n") + "\n");
}

// The recovery pass runs at start-up and then on a timer, on every instance.
const runMaintenance = () =>
  services.maintenance.run().catch((err) => app.log.error({ err }, "maintenance pass failed"));
await runMaintenance();
const timer = config.maintenanceIntervalMs > 0 ? setInterval(runMaintenance, config.maintenanceIntervalMs) : undefined;

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, async () => {
    clearInterval(timer);
    await app.close();
    process.exit(0);
  });
}

const url = await app.listen({ port: config.port, host: config.host });
const database = config.databaseUrl.replace(/\/\/[^@]*@/, "//***@");
process.stdout.write(`cardctl listening on ${url} (database ${database}, processor ${config.processor})\n`);
