/**
 * docs/install.md promises "every denial reason with its exact message".
 * This keeps that true: each refusal the golden tests produce must appear
 * there verbatim (with `|` escaped as markdown tables require).
 */
import t from "tap";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const GOLDENS = fileURLToPath(new URL("./testdata/inject/", import.meta.url));
const doc = readFileSync(fileURLToPath(new URL("../../docs/install.md", import.meta.url)), "utf8").replaceAll("\\|", "|");

t.test("every golden refusal appears verbatim in docs/install.md", async (t) => {
  const denied = readdirSync(GOLDENS).filter((f) => f.endsWith(".denied"));
  t.ok(denied.length >= 20, `${denied.length} refusals`);
  for (const f of denied) {
    const message = readFileSync(`${GOLDENS}${f}`, "utf8").trim();
    t.ok(doc.includes(message), `${f}: ${message.slice(0, 90)}…`);
  }
});
