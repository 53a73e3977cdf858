import react from "@vitejs/plugin-react";
import { defineConfig, type Plugin } from "vite";

/**
 * `npm run dev -w @cardctl/dashboard`: Vite with hot reload at http://127.0.0.1:5173, forwarding the
 * API's paths (/trpc, /auth, /v1 with the event stream) to the API server, CARDCTL_API_URL (default
 * http://127.0.0.1:4000, what `npm run dev` at the root starts). The pages and the API then share
 * one origin, as when the server serves the build: the session cookie and the CSRF token work
 * unchanged. The browser's Origin header is passed on as it is, so start the API with
 * PUBLIC_URL=http://127.0.0.1:5173 (its check of Origin compares with PUBLIC_URL); rewriting Origin
 * here instead would let any site's requests through that check.
 */
const API = (process.env.CARDCTL_API_URL ?? "http://127.0.0.1:4000").replace(/\/$/, "");
const HOST = "127.0.0.1";
const PORT = 5173;

/** On start, says what to fix when the API cannot be reached or its PUBLIC_URL is not this origin. */
function checkApi(): Plugin {
  return {
    name: "cardctl-check-api",
    apply: "serve",
    configureServer(server) {
      server.httpServer?.once("listening", async () => {
        const address = server.httpServer?.address();
        const origin = `http://${HOST}:${typeof address === "object" && address ? address.port : PORT}`;
        const warn = (msg: string) => server.config.logger.warn(`\n  cardctl: ${msg}\n`);
        // The API may be starting beside this server: asked for 15 s. Its OpenAPI document names its PUBLIC_URL.
        for (let attempt = 0; attempt < 15; attempt++) {
          const doc = await fetch(`${API}/v1/openapi.json`).then(
            (res) => res.json() as Promise<{ servers?: { url: string }[] }>,
            () => null,
          );
          if (!doc) {
            await new Promise((wait) => setTimeout(wait, 1000));
            continue;
          }
          const publicUrl = doc.servers?.[0]?.url;
          if (publicUrl && new URL(publicUrl).origin !== origin)
            warn(`the API at ${API} has PUBLIC_URL ${publicUrl}; sign-in and changes from ${origin} fail its Origin check (403 csrf_failed). Restart it with PUBLIC_URL=${origin}.`);
          return;
        }
        warn(`no API at ${API}: start it (npm run dev at the repository's root, with PUBLIC_URL=${origin}) or set CARDCTL_API_URL.`);
      });
    },
  };
}

/**
 * Static files for the server to serve at / (apps/server/src/http/dashboard.ts): index.html and
 * content-hashed files under /assets/. Nothing inline (the pages' CSP allows only 'self'), no CDN.
 */
export default defineConfig({
  plugins: [react(), checkApi()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
  server: {
    host: HOST,
    port: PORT,
    strictPort: true,
    proxy: Object.fromEntries(["/trpc/", "/auth/", "/v1/"].map((path) => [path, { target: API }])),
  },
});
