import type { WebhookDelivery, WebhookEndpoint } from "../db/entities.js";
import { isoTime } from "./ids.js";

/**
 * Until when the secret a rotation replaced still signs the endpoint's deliveries (ms), or null when
 * none does. Raw rows may carry the time as a string.
 */
export const previousSecretUntil = (e: { previous_secret: string | null; previous_secret_expires_at: number | string | null }): number | null => {
  const until = Number(e.previous_secret_expires_at);
  return e.previous_secret !== null && until > Date.now() ? until : null;
};

/** A webhook endpoint as the API shows it: never its secret (shown once, by create). */
export const endpointView = (e: Omit<WebhookEndpoint, "seq">) => {
  const previousUntil = previousSecretUntil(e);
  return {
    id: e.id,
    url: e.url,
    events: JSON.parse(e.events) as string[],
    description: e.description,
    status: e.status,
    mode: e.mode,
    previous_secret_expires_at: previousUntil === null ? null : isoTime(previousUntil),
    created_at: isoTime(e.created_at),
    updated_at: isoTime(e.updated_at),
  };
};

/** A delivery as the API shows it. */
export const deliveryView = (d: WebhookDelivery) => ({
  id: d.id,
  endpoint_id: d.endpoint_id,
  event_id: d.event_id,
  event_type: d.event_type,
  status: d.status,
  attempts: d.attempts,
  last_response_status: d.last_response_status,
  last_error: d.last_error,
  // While an attempt runs, next_attempt_at holds its lease's end: that is when it is retried if the attempt dies.
  next_attempt_at: d.status === "pending" && d.next_attempt_at !== null ? isoTime(d.next_attempt_at) : null,
  created_at: isoTime(d.created_at),
  updated_at: isoTime(d.updated_at),
});
