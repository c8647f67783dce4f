/**
 * `node:http`, `node:fs` and `node:util`, loaded with `require` instead of
 * an ES import, for every module on the sidecar's path.
 *
 * An ES import of a builtin (named, default or namespace) makes Node build
 * the builtin's ESM facade, which reads every export once, lazy getters
 * included: `http.WebSocket` (and `CloseEvent`, `MessageEvent`) loads
 * Node's bundled undici, `fs.promises` loads fs/promises and with it
 * readline, `util` loads its own lazy parts. The sidecar uses none of them.
 * Measured on Node 24 (docs/performance.md, "Where the memory goes"): an
 * ES import of `node:http` alone costs a process 13 MB of RSS, `node:fs`
 * and `node:util` ~2 MB each. Types may still come from
 * `import type ... from "node:…"`, which leaves no import behind.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

export const http = require("node:http") as typeof import("node:http");
export const fs = require("node:fs") as typeof import("node:fs");
export const util = require("node:util") as typeof import("node:util");
