import type { AppError, ErrorEnvelope, Principal } from "@cardctl/api";

declare module "fastify" {
  interface FastifyRequest {
    /** The API key the request authenticated with. */
    principal?: Principal;
    /** Why authentication failed; sent after rate limiting so 401s carry rate-limit headers too. */
    authError?: AppError;
    isAdmin?: boolean;
    /** The error body a procedure produced, sent as is on either transport. */
    errorEnvelope?: ErrorEnvelope;
  }
}
