/**
 * @citadel/client: the public surface (sdk-surface.md §2). Import from here;
 * module paths under dist/ are not a stable API.
 */
export * from "./constants.js";
export * from "./errors.js";
export { EMPTY, ByteReader, ByteWriter, toHex, fromHex, decodeUtf8, encodeUtf8 } from "./bytes.js";
export { BitReader, BitWriter } from "./bits.js";
export * from "./quant.js";
export { Envelope, FrameDecoder, decodeDatagram } from "./envelope.js";
export * from "./codecs/session.js";
export * from "./codecs/tsync.js";
export * from "./codecs/rep.js";
export * from "./codecs/actors.js";
export * from "./codecs/rooms.js";
export * from "./codecs/services.js";
export { parseJson, stringifyJson, JsonSyntaxError, type JsonValue } from "./json.js";
export * from "./transport.js";
export * from "./client.js";
export * from "./http.js";
export * from "./chat.js";
export * from "./snapshots.js";
export * from "./actors.js";
