import { AppError, SimulatedProcessor, StripeProcessor, type Mode, type Processor, type ProcessorResolver } from "@cardctl/api";
import type { DataSource } from "typeorm";
import type { Config } from "./config.js";

/**
 * Chooses the processor per mode. Live mode never runs on the simulated processor: without Stripe
 * configured, a live call that needs the processor gets 503 processor_not_configured. With
 * PROCESSOR=stripe each mode uses its own secret key (STRIPE_TEST_SECRET_KEY / STRIPE_LIVE_SECRET_KEY);
 * a mode without its key is not configured.
 */
export function createProcessors(
  config: Config,
  ds: DataSource,
): { resolve: ProcessorResolver; simulated: SimulatedProcessor } {
  const simulated = new SimulatedProcessor(ds);
  const notConfigured = (mode: Mode) =>
    new AppError(503, "processor_not_configured", `No card processor is configured for ${mode} mode. Set PROCESSOR=stripe and STRIPE_${mode.toUpperCase()}_SECRET_KEY.`);
  const stripe: Partial<Record<Mode, StripeProcessor>> = {};
  if (config.processor === "stripe") {
    const keys: Record<Mode, string | undefined> = { test: config.stripeTestSecretKey, live: config.stripeLiveSecretKey };
    const publishableKeys: Record<Mode, string | undefined> = { test: config.stripeTestPublishableKey, live: config.stripeLivePublishableKey };
    for (const mode of ["test", "live"] as const) {
      const secretKey = keys[mode];
      if (secretKey)
        stripe[mode] = new StripeProcessor({
          mode,
          secretKey,
          publishableKey: publishableKeys[mode],
          apiBase: config.stripeApiBase,
          timeoutMs: config.processorTimeoutMs,
          ds,
          publicUrl: config.publicUrl,
        });
    }
  }
  const resolve = (mode: Mode): Processor => {
    if (config.processor === "simulated" && mode === "test") return simulated;
    const processor = stripe[mode]; // filled only when PROCESSOR=stripe
    if (processor) return processor;
    throw notConfigured(mode);
  };
  return { resolve, simulated };
}
