/** After this many failed attempts queued work (a payment, a card's processor follow-up) needs an operator. */
export const MAX_ATTEMPTS = 8;
const BACKOFF_BASE_MS = 2_000;
const BACKOFF_MAX_MS = 60 * 60 * 1000;

/**
 * Exponential backoff with ±25 % jitter: 2 s, 4 s, 8 s, … capped at an hour (or from `base`, capped
 * at `max`). The cap holds after the jitter too; at the cap the delay is 75 % to 100 % of it.
 */
export const backoffMs = (attempts: number, base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS) =>
  Math.min(max, Math.min(max, base * 2 ** Math.max(0, attempts - 1)) * (0.75 + Math.random() * 0.5));
