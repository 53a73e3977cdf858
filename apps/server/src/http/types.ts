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
    /** A processor's endpoint (the simulated processor's client API): its errors keep the processor's own shape. */
    processorErrorShape?: boolean;
  }
}
