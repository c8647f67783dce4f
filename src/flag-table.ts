/**
 * node:util parseArgs option tables written as lists of names: the flags
 * that take a value and the switches. The names stay literal in the type,
 * so parseArgs still types each value (string, or boolean for a switch).
 * A leaf: the CLI's commands and the pod settings (src/settings/) both
 * declare their flags with it.
 */
type FlagTable<N extends string, T extends "string" | "boolean"> = { readonly [K in N]: { readonly type: T } };

function flagTable<N extends string, T extends "string" | "boolean">(type: T, names: readonly N[]): FlagTable<N, T> {
  return Object.fromEntries(names.map((name) => [name, { type }])) as FlagTable<N, T>;
}

/** Flags that take a value: `--name VALUE`. */
export function valueFlags<const N extends string>(...names: N[]): FlagTable<N, "string"> {
  return flagTable("string", names);
}

/** Switches: present means true. */
export function switchFlags<const N extends string>(...names: N[]): FlagTable<N, "boolean"> {
  return flagTable("boolean", names);
}
