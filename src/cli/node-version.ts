/**
 * The Node version check, the first thing `shardcar` does. On an older Node
 * (a machine's /usr/bin/node is often 20) the sidecar's V8 flag
 * (src/sidecar-runtime.ts) made V8 print "Error: unrecognized flag
 * --invocation-count-for-turbofan=30000 / Try --help for options", which
 * reads as if the user's own flag were wrong. This module must load and run
 * on any Node: nothing here may need 24.
 */

/** The Node major version shardcar is built and measured on (package.json `engines`). */
export const NODE_MAJOR = 24;

/** Why this Node cannot run shardcar, as one message; undefined when it can. */
export function nodeVersionProblem(version: string, execPath: string): string | undefined {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (major >= NODE_MAJOR) return undefined;
  return `shardcar needs Node ${NODE_MAJOR} (found ${version}, ${execPath}). In a checkout, "npx shardcar ..." and the npm scripts run it on the Node ${NODE_MAJOR} that npm installed (node_modules/.bin/node); otherwise install Node ${NODE_MAJOR}.`;
}
