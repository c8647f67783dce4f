/**
 * `node test/real/seed.ts`: seeds the running realapi (environment from
 * start.sh) with the lane's data set. Called by test/real/run.sh once, after
 * the first start; idempotent.
 */
import { seed } from "./support/dataset.ts";
import { realApiEnv } from "./support/realapi.ts";

const env = realApiEnv();
const t0 = Date.now();
const { created, existing } = await seed({ url: env.url, caPem: env.caPem, token: env.token });
console.log(`seed (gate ${env.gate}): ${created} objects created, ${existing} already there, in ${Date.now() - t0} ms`);
