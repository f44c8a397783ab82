// HTTP error mapping: the server's {code, message} becomes HttpApiError,
// Retry-After is kept, odd bodies get documented client-side codes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CitadelHttpClient, HttpApiError, mapHttpResponse } from "../../dist/index.js";

const json = (status, body, headers = {}) =>
  new Response(body === null ? null : JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

test("error bodies map to HttpApiError with the server code", async () => {
  for (const [status, code] of [[400, "invalid_request"], [401, "authentication_failed"], [404, "not_found"], [409, "conflict"], [500, "internal_error"]]) {
    await assert.rejects(mapHttpResponse(json(status, { code, message: "m" })), (e) => e instanceof HttpApiError && e.status === status && e.code === code && e.message === "m");
  }
});

test("429 keeps Retry-After in seconds", async () => {
  await assert.rejects(
    mapHttpResponse(json(429, { code: "rate_limited", message: "slow down" }, { "retry-after": "60" })),
    (e) => e.code === "rate_limited" && e.retryAfterSeconds === 60,
  );
});

test("a non-JSON error body keeps a generic code; a bad success body is invalid_response", async () => {
  await assert.rejects(mapHttpResponse(new Response("<html>", { status: 502 })), (e) => e.code === "http_error" && e.status === 502);
  await assert.rejects(mapHttpResponse(new Response("nope", { status: 200 })), (e) => e.code === "invalid_response");
  assert.equal(await mapHttpResponse(new Response(null, { status: 204 })), null);
});

test("routes send the bearer and JSON body; network failures are network_error", async () => {
  const seen = [];
  const fetchStub = async (url, init) => {
    seen.push({ url, init });
    return json(200, { user_id: "u", username: "n" });
  };
  const http = new CitadelHttpClient("http://127.0.0.1:1/", { fetch: fetchStub });
  assert.deepEqual(await http.getAccount("tok"), { user_id: "u", username: "n" });
  assert.equal(seen[0].url, "http://127.0.0.1:1/v1/account");
  assert.equal(seen[0].init.headers.authorization, "Bearer tok");
  await http.updateAccount("tok", { display_name: null });
  assert.equal(seen[1].init.method, "PATCH");
  assert.equal(seen[1].init.body, '{"display_name":null}');
  const failing = new CitadelHttpClient("http://127.0.0.1:1/", { fetch: async () => { throw new TypeError("refused"); } });
  await assert.rejects(failing.refreshSession("r"), (e) => e instanceof HttpApiError && e.code === "network_error" && e.status === 0);
});
