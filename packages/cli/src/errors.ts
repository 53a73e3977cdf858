/** Documented exit codes. */
export const EXIT = { OK: 0, API: 1, USAGE: 2, AUTH: 3 } as const;

/** Bad flags or arguments, or a refused prompt: exit 2. */
export class UsageError extends Error {
  readonly exitCode = EXIT.USAGE;
}

/** No credentials (no key, no admin token): exit 3, like a 401. */
export class AuthError extends Error {
  readonly exitCode = EXIT.AUTH;
}

/** No response: the server could not be reached (refused, DNS, reset, timed out) at `url`. */
export class ConnectionError extends Error {
  constructor(
    readonly method: string,
    readonly url: string,
    cause: unknown,
  ) {
    super(`Could not reach ${url}`, { cause });
    this.name = "ConnectionError";
  }
}

/**
 * An error response of the operator API (fetched directly) in the shape of the SDK's CardctlError,
 * so one printer handles both.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | undefined,
    readonly requestId: string | undefined,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** What the CLI needs from any API error (the SDK's CardctlError and its subclasses, or ApiError). */
export interface ApiErrorLike {
  status?: number;
  code: string;
  message: string;
  details?: Record<string, unknown>;
  requestId?: string;
}

export function isApiError(err: unknown): err is Error & ApiErrorLike {
  return err instanceof Error && typeof (err as { code?: unknown }).code === "string" && ("status" in err || "requestId" in err);
}

export function exitCodeFor(err: unknown): number {
  if (err instanceof UsageError || err instanceof AuthError) return err.exitCode;
  // The API's (and the operator API's) 401 is `unauthorized`; a 401 of the card processor refusing a
  // card's ephemeral key (cards reveal) is not about the user's credentials.
  if (isApiError(err)) return err.code === "unauthorized" || err.code === "http_401" ? EXIT.AUTH : EXIT.API;
  return EXIT.API;
}
