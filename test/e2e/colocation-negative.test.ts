/**
 * The negative control of the co-location runs (colocation-shardselector and
 * colocation-labels): the same run, the same checks, with the children keyed
 * by `uid`. A parent's replica then never caches its children and creates
 * them again, at the first sync and at every handoff; the checks must see
 * it, or they could not fail.
 */
import t from "tap";
import { assertDuplicated } from "../support/colocation.ts";
import { devapiColocation } from "./colocation.ts";

t.test("negative control, children keyed by uid: the same run creates duplicate children", async (t) => {
  assertDuplicated(t, await devapiColocation(t, "on", { filter: "shardselector", childKey: "uid" }));
});
