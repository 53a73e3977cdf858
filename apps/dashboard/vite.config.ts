import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

/**
 * Static files for the server to serve at / (apps/server/src/http/dashboard.ts): index.html and
 * content-hashed files under /assets/. Nothing inline (the pages' CSP allows only 'self'), no CDN.
 */
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
});
