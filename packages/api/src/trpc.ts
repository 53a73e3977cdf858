import { initTRPC, TRPCError } from "@trpc/server";
import type { OpenApiMeta } from "trpc-to-openapi";
import { ZodError } from "zod";
import type { Principal } from "./domain/deps.js";
import { AppError, errorEnvelope, forbidden, unauthorized, type ErrorEnvelope } from "./domain/errors.js";
import type { Services } from "./domain/services.js";
import { describeIssues, validationError } from "./domain/validation.js";

export interface Context {
  services: Services;
  requestId: string;
  /** Set by the server's auth step; null when the request carried no valid API key. */
  principal: Principal | null;
  /** True when the request carried the operator's admin token. */
  admin: boolean;
  /**
   * Identifies the claimed Idempotency-Key record (key id, key, claim time); stored on what the
   * request creates, so a retry after a crash finds it, and a key reused after 24 h does not.
   */
  creationKey?: string;
  /** The claim of that key was taken over from an earlier request (one that died, or failed): it may have made something. */
  creationRetry?: boolean;
  /**
   * Success status chosen by the procedure (201, 202; 200 when unset). A holder object, because
   * middleware hands procedures a copy of the context.
   */
  response: { status?: number };
  /**
   * Receives the error envelope, so the server can send it unchanged on either transport, and the
   * error behind it, so the server can log unexpected failures.
   */
  reportError?: (status: number, envelope: ErrorEnvelope, error: TRPCError) => void;
}

/** The API error behind any failure: ours, zod's input validation, or an unexpected one (500). */
export function toAppError(error: TRPCError): AppError {
  const cause = error.cause;
  if (cause instanceof AppError) return cause;
  if (cause instanceof ZodError || (error.code === "BAD_REQUEST" && cause?.name === "ZodError")) {
    return validationError(describeIssues(cause as ZodError));
  }
  switch (error.code) {
    case "PARSE_ERROR":
      return new AppError(400, "invalid_json", "The request body is not valid JSON.");
    case "NOT_FOUND":
      return new AppError(404, "not_found", "No such route.");
    case "PAYLOAD_TOO_LARGE":
      return new AppError(413, "payload_too_large", "The request body is larger than 100 kB.");
    case "UNSUPPORTED_MEDIA_TYPE":
      return new AppError(415, "unsupported_media_type", "Send request bodies as JSON with 'Content-Type: application/json'.");
    case "METHOD_NOT_SUPPORTED":
      return new AppError(405, "method_not_allowed", error.message);
    case "BAD_REQUEST":
      return new AppError(400, "bad_request", error.message);
    default:
      return new AppError(500, "internal_error", "An unexpected error occurred. Quote the request id when asking for help.");
  }
}

const t = initTRPC
  .context<Context>()
  .meta<OpenApiMeta>()
  .create({
    errorFormatter({ error, ctx }) {
      const app = toAppError(error);
      const envelope = errorEnvelope(ctx?.requestId ?? "req_unknown", app.code, app.message, app.details);
      ctx?.reportError?.(app.status, envelope, error);
      return envelope.error;
    },
  });

export const router = t.router;

/** Any valid API key. */
export const apiProcedure = t.procedure.use(({ ctx, next }) => {
  if (!ctx.principal) throw unauthorized();
  return next({ ctx: { ...ctx, principal: ctx.principal } });
});

/** Keys of role `full`: an agent must not approve its own requests or loosen its policy. */
export const fullAccessProcedure = apiProcedure.use(({ ctx, next }) => {
  if (ctx.principal.role !== "full") throw forbidden("This API key has the 'agent' role; this call needs a 'full' key.");
  return next();
});

/** The owner of the account, signed in to the dashboard (a session cookie); API keys are refused. */
export const ownerProcedure = apiProcedure.use(({ ctx, next }) => {
  if (!ctx.principal.ownerId) throw forbidden("Only the account's owner, signed in to the dashboard, can do this; API keys cannot.");
  return next();
});

/** The operator API: the admin token. */
export const adminProcedure = t.procedure.use(({ ctx, next }) => {
  if (!ctx.admin) throw new AppError(401, "unauthorized", "The operator API needs the admin token: send it as 'Authorization: Bearer <ADMIN_TOKEN>' to /admin/v1.");
  return next();
});

/** Status of a response: the AppError's on failure, the procedure's choice on success. */
export function responseStatus(ctx: Context | undefined, errors: TRPCError[]): number | undefined {
  if (errors[0]) return toAppError(errors[0]).status;
  return ctx?.response.status;
}
