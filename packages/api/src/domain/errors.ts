/** A failure the API reports to its caller: an HTTP status, a stable machine code, and details. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = "AppError";
  }
}

export interface ErrorEnvelope {
  error: { code: string; message: string; details?: Record<string, unknown>; request_id: string };
}

/** The one error body of the service, on every transport. */
export function errorEnvelope(
  requestId: string,
  code: string,
  message: string,
  details?: Record<string, unknown>,
): ErrorEnvelope {
  return { error: { code, message, ...(details ? { details } : {}), request_id: requestId } };
}

export const notFound = (what: string) => new AppError(404, "not_found", `No such ${what}.`);
export const unauthorized = (message = "Invalid or revoked API key. Send it as 'Authorization: Bearer <API_KEY>'.") =>
  new AppError(401, "unauthorized", message);
export const forbidden = (message: string) => new AppError(403, "forbidden", message);
