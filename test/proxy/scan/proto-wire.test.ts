import t from "tap";
import protobuf from "protobufjs";
import { ScanError } from "../../../src/errors.ts";
import { lenField, VarintAccumulator, varintField, varintSize, WIRE_I32, WIRE_I64, WIRE_LEN, WIRE_VARINT, WireReader, writeVarint } from "../../../src/proxy/scan/proto-wire.ts";

// Reference encodings come from protobufjs's Writer, not from the code under test.
const VALUES = [0, 1, 127, 128, 300, 16_383, 16_384, 2 ** 21 - 1, 2 ** 21, 2 ** 28, 2 ** 31 - 1, 2 ** 32, 2 ** 35 + 7, Number.MAX_SAFE_INTEGER];

function reference(value: number): Uint8Array {
  return protobuf.Writer.create().uint64(value).finish();
}

t.test("varints are written and sized exactly as protobufjs writes them", async (t) => {
  for (const v of VALUES) {
    const out = Buffer.alloc(10);
    const end = writeVarint(out, 0, v);
    t.same([...out.subarray(0, end)], [...reference(v)], String(v));
    t.equal(varintSize(v), end, `size of ${v}`);
  }
});

t.test("WireReader reads back every wire type protobufjs writes, field numbers above 15 included", async (t) => {
  const w = protobuf.Writer.create();
  const want: Array<[number, number]> = [];
  for (let f = 1; f <= 40; f++) {
    switch (f % 4) {
      case 0:
        w.uint32((f << 3) | WIRE_VARINT).uint64(f * 1000);
        want.push([f, WIRE_VARINT]);
        break;
      case 1:
        w.uint32((f << 3) | WIRE_LEN).bytes(Buffer.alloc(f * 500, f));
        want.push([f, WIRE_LEN]);
        break;
      case 2:
        w.uint32((f << 3) | WIRE_I64).fixed64(f);
        want.push([f, WIRE_I64]);
        break;
      default:
        w.uint32((f << 3) | WIRE_I32).fixed32(f);
        want.push([f, WIRE_I32]);
    }
  }
  const buf = w.finish();
  const r = new WireReader().reset(buf, 0, buf.length);
  const got: Array<[number, number]> = [];
  while (r.next()) {
    got.push([r.field, r.wire]);
    if (r.wire === WIRE_VARINT) t.equal(r.value, r.field * 1000, `varint field ${r.field}`);
    if (r.wire === WIRE_LEN) {
      t.equal(r.valueEnd - r.valueStart, r.field * 500, `length of field ${r.field} (up to 3-byte lengths)`);
      t.equal(buf[r.valueStart], r.field);
    }
    if (r.wire === WIRE_I64) t.equal(r.valueEnd - r.valueStart, 8);
    if (r.wire === WIRE_I32) t.equal(r.valueEnd - r.valueStart, 4);
  }
  t.same(got, want);
});

t.test("malformed messages throw a ScanError with the stream offset", async (t) => {
  const rows: Array<[string, Uint8Array]> = [
    ["field number 0", Buffer.from([0x02, 0x00])],
    ["varint over 10 bytes", Buffer.from([0x08, ...Array<number>(10).fill(0xff), 0x01])],
    ["varint cut at the end", Buffer.from([0x08, 0x80])],
    ["length past the end", Buffer.from([0x0a, 0x05, 0x61])],
    ["3-byte length past the end", Buffer.concat([Buffer.from([0x0a]), Buffer.from([0x80, 0x80, 0x01])])],
    ["fixed64 past the end", Buffer.from([0x09, 1, 2, 3])],
    ["start group", Buffer.from([0x0b])],
    ["wire type 6", Buffer.from([0x0e])],
  ];
  for (const [name, bytes] of rows) {
    const r = new WireReader().reset(bytes, 0, bytes.length, 1000, 2);
    try {
      while (r.next());
      t.fail(`${name}: no error`);
    } catch (e) {
      t.ok(e instanceof ScanError && e.code === "SHARDCAR_ERR_SCAN_SYNTAX" && e.offset >= 1000 && e.depth === 2, name);
    }
  }
});

t.test("VarintAccumulator fed one byte at a time agrees with the reference, and refuses an 11th byte", async (t) => {
  for (const v of VALUES) {
    const acc = new VarintAccumulator();
    const bytes = reference(v);
    let done = false;
    bytes.forEach((b, k) => {
      done = acc.push(b, k, 0);
      t.equal(done, k === bytes.length - 1);
    });
    t.ok(done);
    t.equal(acc.value, v, String(v));
    acc.reset();
    t.ok(acc.empty);
  }
  const acc = new VarintAccumulator();
  for (let k = 0; k < 10; k++) acc.push(0xff, k, 0);
  t.throws(() => acc.push(0x01, 10, 0), ScanError);
});

t.test("field writers produce what protobufjs decodes", async (t) => {
  const T = new protobuf.Type("T").add(new protobuf.Field("s", 1, "bytes")).add(new protobuf.Field("n", 2, "uint64"));
  const bytes = Buffer.concat([lenField(1, Buffer.from("ab"), Buffer.from("cd")), varintField(2, 2 ** 40)]);
  const m = T.toObject(T.decode(bytes), { longs: Number, bytes: String }) as { s: string; n: number };
  t.same(m, { s: Buffer.from("abcd").toString("base64"), n: 2 ** 40 });
});
