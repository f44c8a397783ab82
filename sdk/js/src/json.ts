/**
 * A strict JSON parser for service bodies (kinds 26-28, RPC replies):
 * rejects duplicate keys and non-JSON constants, and keeps integers beyond
 * 2^53 exact as bigint (services.md §1: safe ids stay numbers). What it is
 * not: a serializer (`stringifyJson` only adds bigint support to
 * JSON.stringify). Nesting is bounded to stop hostile input.
 */
export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | { [key: string]: JsonValue };

export class JsonSyntaxError extends Error {}

const MAX_DEPTH = 64;

export function parseJson(text: string): JsonValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`${what} at offset ${i}`);
  };
  const ws = (): void => {
    while (i < text.length && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i++;
  };
  const str = (): string => {
    i++; // opening quote
    let out = "";
    for (;;) {
      if (i >= text.length) fail("unterminated string");
      const c = text[i++];
      if (c === '"') return out;
      if (c === "\\") {
        const e = text[i++];
        const simple: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e in simple) out += simple[e];
        else if (e === "u") {
          const hex = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail("bad \\u escape");
          out += String.fromCharCode(parseInt(hex, 16));
          i += 4;
        } else fail("bad escape");
      } else if (c < " ") fail("control character in string");
      else out += c;
    }
  };
  const num = (): number | bigint => {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m) return fail("bad number");
    i += m[0].length;
    if (!m[2] && !m[3]) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    return Number(m[0]);
  };
  const value = (depth: number): JsonValue => {
    if (depth > MAX_DEPTH) fail("nesting too deep");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj: { [key: string]: JsonValue } = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected key");
        const key = str();
        if (Object.prototype.hasOwnProperty.call(obj, key)) fail(`duplicate key "${key}"`);
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        // defineProperty: a "__proto__" key stays an ordinary own property.
        Object.defineProperty(obj, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        ws();
        const sep = text[i++];
        if (sep === "}") return obj;
        if (sep !== ",") fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        const sep = text[i++];
        if (sep === "]") return arr;
        if (sep !== ",") fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith("true", i)) {
      i += 4;
      return true;
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return false;
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return null;
    }
    return num();
  };
  const out = value(0);
  ws();
  if (i !== text.length) fail("trailing characters");
  return out;
}

/** JSON.stringify that writes bigint as a plain JSON integer. */
export function stringifyJson(value: unknown): string {
  const marker = "@@citadel-bigint@@";
  const text = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${marker}${v}` : v));
  return text.replace(new RegExp(`"${marker}(-?[0-9]+)"`, "g"), "$1");
}
