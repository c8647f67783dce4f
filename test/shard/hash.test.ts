import t from "tap";
import { fnv1a64, fnv1a64Hex, fnv1a64Into } from "../../src/shard/hash.ts";
import { readFixtureText } from "../support/fixtures.ts";

// The vectors from kep-5866.md §2, verbatim.
const VECTORS: Array<[string, string]> = [
  ["", "0xcbf29ce484222325"],
  ["a", "0xaf63dc4c8601ec8c"],
  ["foobar", "0x85944171f73967e8"],
  ["default", "0xebada5168620c5fe"],
  ["kube-system", "0xdf65c7bc1d82b35e"],
  ["6f1d9e2c-3b7a-4c1e-9f0a-1234567890ab", "0x9b2e9ad6afeab1a7"],
  ["00000000-0000-0000-0000-000000000001", "0x7c384b6218f2983e"],
];

t.test("fnv1a64 reproduces every KEP-5866 vector", async (t) => {
  for (const [input, want] of VECTORS) t.equal(fnv1a64Hex(input), want, JSON.stringify(input));
});

t.test("fnv1a64 agrees with the server on every recorded pod uid and namespace", async (t) => {
  for (const server of ["minicore", "kube-apiserver"]) {
    const file = JSON.parse(readFixtureText(`${server}/gate-on/pods/uid-hash-vectors.json`)) as {
      vectors: Array<{ uid: string; namespace: string; fnv1a64_uid: string; fnv1a64_namespace: string; serverUidHalf: string }>;
    };
    t.equal(file.vectors.length, 200, `${server}: all 200 pods`);
    for (const v of file.vectors) {
      t.equal(fnv1a64Hex(v.uid), v.fnv1a64_uid, `${server} uid ${v.uid}`);
      t.equal(fnv1a64Hex(v.namespace), v.fnv1a64_namespace, `${server} namespace ${v.namespace}`);
      // The server's own split: low half is [0, 2^63).
      t.equal(fnv1a64(v.uid) < 1n << 63n ? "low" : "high", v.serverUidHalf);
    }
  }
});

t.test("the limb implementation matches a BigInt reference on random inputs", async (t) => {
  const ref = (b: Uint8Array): bigint => {
    let h = 0xcbf29ce484222325n;
    for (const x of b) h = ((h ^ BigInt(x)) * 0x100000001b3n) & 0xffffffffffffffffn;
    return h;
  };
  let seed = 42;
  const rnd = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  const out = new Uint32Array(2);
  for (let i = 0; i < 2000; i++) {
    const b = Uint8Array.from({ length: rnd() % 80 }, () => rnd() & 0xff);
    t.equal(fnv1a64(b), ref(b));
    fnv1a64Into(b, 0, b.length, out);
    t.equal((BigInt(out[0] as number) << 32n) | BigInt(out[1] as number), ref(b));
  }
});
