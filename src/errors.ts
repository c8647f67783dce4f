/**
 * Every error shardcar raises on purpose. One base class carries a stable
 * `code`, so callers branch on codes rather than on message text, and so no
 * subclass repeats constructor boilerplate.
 *
 * @packageDocumentation
 */

/** Stable error codes. Append only: operators alert and grep on these. */
export type ShardcarErrorCode =
  | "SHARDCAR_ERR_SELECTOR_SYNTAX"
  | "SHARDCAR_ERR_RANGE"
  | "SHARDCAR_ERR_CONFIG"
  | "SHARDCAR_ERR_SCAN_SYNTAX"
  | "SHARDCAR_ERR_SCAN_DEPTH"
  | "SHARDCAR_ERR_SCAN_ITEM_TOO_LARGE"
  | "SHARDCAR_ERR_SCAN_TRUNCATED"
  | "SHARDCAR_ERR_UPSTREAM"
  | "SHARDCAR_ERR_ANNOTATION"
  | "SHARDCAR_ERR_ADMISSION"
  | "SHARDCAR_ERR_RING";

export class ShardcarError extends Error {
  readonly code: ShardcarErrorCode;
  constructor(code: ShardcarErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A shard selector the server would refuse (or that we refuse to send). */
export class SelectorSyntaxError extends ShardcarError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("SHARDCAR_ERR_SELECTOR_SYNTAX", message, options);
  }
}

/** A range whose bounds do not describe a non-empty part of `[0, 2^64)`. */
export class InvalidRangeError extends ShardcarError {
  constructor(message: string) {
    super("SHARDCAR_ERR_RANGE", message);
  }
}

/** Bad command-line or annotation configuration; `flag` names the culprit. */
export class ConfigError extends ShardcarError {
  readonly flag: string;
  constructor(flag: string, message: string, options?: { cause?: unknown }) {
    super("SHARDCAR_ERR_CONFIG", message, options);
    this.flag = flag;
  }
}

/** Byte-scanner failure; carries where in the stream it happened. */
export class ScanError extends ShardcarError {
  readonly offset: number;
  readonly depth: number;
  constructor(
    code: Extract<ShardcarErrorCode, `SHARDCAR_ERR_SCAN_${string}`>,
    message: string,
    where: { offset: number; depth: number },
    options?: { cause?: unknown },
  ) {
    super(code, `${message} (at byte ${where.offset}, depth ${where.depth})`, options);
    this.offset = where.offset;
    this.depth = where.depth;
  }
}

export function isShardcarError(e: unknown): e is ShardcarError {
  return e instanceof ShardcarError;
}
