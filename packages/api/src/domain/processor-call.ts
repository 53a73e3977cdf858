import { AccountSetupError, PaymentDeclinedError, ProcessorError } from "../processor/types.js";
import { AppError } from "./errors.js";

/**
 * Runs one processor call with a deadline. A timeout counts as a failure: the caller compensates,
 * and because every call carries an idempotency key, a late success is found again on retry. The
 * call's `signal` aborts at the deadline: an adapter starts no new request after it (a retry, the
 * next step), so whatever the call still does at the processor ends within one request's timeout
 * of the deadline, well inside the creation lease that recovery waits before its final lookup.
 */
export async function callProcessor<T>(step: string, timeoutMs: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new ProcessorError(`The card processor did not answer within ${timeoutMs} ms.`, step);
      controller.abort(err);
      reject(err);
    }, timeoutMs);
  });
  try {
    return await Promise.race([fn(controller.signal), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Maps a processor failure to the API's error; anything else passes through untouched. */
export function toApiError(err: unknown): unknown {
  if (err instanceof AccountSetupError)
    return new AppError(403, "setup_required", err.message, { missing: err.missing, ...(err.setupUrl ? { setup_url: err.setupUrl } : {}) });
  if (err instanceof PaymentDeclinedError)
    return new AppError(402, "payment_method_declined", err.message, { decline_code: err.declineCode });
  if (err instanceof ProcessorError)
    return new AppError(502, "processor_error", `The card processor failed during ${err.step}: ${err.message}`, {
      step: err.step,
      ...err.details,
    });
  return err;
}
