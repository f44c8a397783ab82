/*
 * C test of the Citadel client ABI against the real `citadel` binary
 * (driven by scripts/test-ffi, run under Valgrind).
 *
 * Usage: ffi_flow <ws_url> <quic_host:port> <dev-cert.pem> <closed_port>
 *
 * Client A (WebSocket) and client B (QUIC, certificate pinned) connect as
 * guests and join one room; A's position reaches B as kind 2; A calls
 * `ping`; A spawns a patrolling NPC through the `spawn_npc` RPC of
 * tests/game/main.lua, both opt in to transform sync (kind 7) and each
 * receives the NPC's snapshots (kind 8). Error paths: null arguments, a
 * refused connect, a wrong pin, truncation, double free. Exit status 0 on
 * success; every failed check prints one line and exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "citadel.h"

#define KIND_POSITION 1
#define KIND_PEER_POSITION 2
#define KIND_RPC_REQUEST 3
#define KIND_RPC_RESPONSE 4
#define KIND_TSYNC_HELLO 7
#define KIND_TSYNC_SNAPSHOT 8
#define KIND_ROOM_CREATE 21
#define KIND_ROOM_JOINED 23
#define KIND_ROOM_MAP_READY 25

#define BUF_CAP 65536

static unsigned char buf[BUF_CAP];

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            char err_[256];                                                  \
            citadel_last_error_message(err_, sizeof err_);                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, " (last error: %s)\n", err_);                   \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void put_u64be(unsigned char *out, uint64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t get_u64be(const unsigned char *in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | in[i];
    return v;
}

/* Counts snapshots seen by any poll, per client slot. */
static int snapshots[2];

/*
 * The poll loop: polls `h` until an envelope of `kind` arrives (returns its
 * body length, body in `buf`) or `timeout_ms` passes (returns -1). Other
 * kinds are consumed; snapshots are counted for `slot`.
 */
static long poll_for(CitadelClient *h, int slot, uint16_t kind, long timeout_ms) {
    long deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        uint16_t got = 0;
        size_t len = 0;
        bool truncated = false;
        CitadelStatus s = citadel_client_poll(h, &got, buf, BUF_CAP, &len, &truncated);
        if (s == CITADEL_STATUS_AGAIN) {
            sleep_ms(2);
            continue;
        }
        CHECK(s == CITADEL_STATUS_OK, "poll status %d", (int)s);
        CHECK(!truncated, "a %zu-byte body of kind %u overflowed the buffer", len, got);
        if (got == KIND_TSYNC_SNAPSHOT) snapshots[slot]++;
        if (got == kind) return (long)len;
    }
    return -1;
}

static void authenticate_guest(CitadelClient *h) {
    CitadelAuthStatus auth = CITADEL_AUTH_STATUS_REJECTED;
    char user[64];
    size_t user_len = 99;
    uint8_t reason = 99;
    CitadelStatus s = citadel_client_authenticate(h, NULL, 0, &auth, (uint8_t *)user,
                                                  sizeof user, &user_len, &reason);
    CHECK(s == CITADEL_STATUS_OK, "authenticate status %d", (int)s);
    CHECK(auth == CITADEL_AUTH_STATUS_GUEST, "guest expected, got %d", (int)auth);
    CHECK(user_len == 0, "a guest has no user id");
}

static uint64_t join_room(CitadelClient *h, int slot, const char *name) {
    unsigned char body[2 + 64];
    size_t n = strlen(name);
    body[0] = (unsigned char)(n >> 8);
    body[1] = (unsigned char)n;
    memcpy(body + 2, name, n);
    CHECK(citadel_client_send(h, KIND_ROOM_CREATE, body, 2 + n, true) == CITADEL_STATUS_OK,
          "send room create");
    long len = poll_for(h, slot, KIND_ROOM_JOINED, 5000);
    CHECK(len >= 12, "room joined (len %ld)", len);
    uint64_t room = get_u64be(buf);
    size_t map_len = ((size_t)buf[8] << 8) | buf[9];
    CHECK(map_len == n && memcmp(buf + 10, name, n) == 0, "map is the room name");
    unsigned char ready[8];
    put_u64be(ready, room);
    CHECK(citadel_client_send(h, KIND_ROOM_MAP_READY, ready, 8, true) == CITADEL_STATUS_OK,
          "send map ready");
    return room;
}

/* Calls `method` with an empty payload; returns the reply length (body in buf + 9). */
static long call_rpc(CitadelClient *h, int slot, uint64_t id, const char *method) {
    unsigned char body[10 + 64];
    size_t n = strlen(method);
    put_u64be(body, id);
    body[8] = (unsigned char)(n >> 8);
    body[9] = (unsigned char)n;
    memcpy(body + 10, method, n);
    CHECK(citadel_client_send(h, KIND_RPC_REQUEST, body, 10 + n, true) == CITADEL_STATUS_OK,
          "send rpc %s", method);
    long deadline = now_ms() + 5000;
    while (now_ms() < deadline) {
        long len = poll_for(h, slot, KIND_RPC_RESPONSE, deadline - now_ms());
        CHECK(len >= 9, "rpc %s response", method);
        if (get_u64be(buf) != id) continue;
        CHECK(buf[8] == 0, "rpc %s status %u: %.*s", method, buf[8], (int)(len - 9), buf + 9);
        return len - 9;
    }
    CHECK(0, "rpc %s timed out", method);
    return -1;
}

static void error_paths(const char *quic_addr, const char *closed_port) {
    CitadelClient *h = NULL;
    char msg[256];
    CHECK(citadel_client_connect_websocket(NULL, &h) == CITADEL_STATUS_INVALID_ARGUMENT,
          "null url");
    CHECK(citadel_last_error_message(msg, sizeof msg) > 0, "a message is recorded");
    CHECK(citadel_last_error_message(msg, 1) == 0 && msg[0] == '\0', "cap 1 holds the NUL");
    CHECK(citadel_client_connect_websocket("ws://127.0.0.1:1/", NULL) ==
              CITADEL_STATUS_INVALID_ARGUMENT,
          "null out_handle");
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%s/", closed_port);
    CHECK(citadel_client_connect_websocket(url, &h) == CITADEL_STATUS_CONNECT, "refused");
    CHECK(h == NULL, "no handle after a failed connect");
    CHECK(citadel_client_send(NULL, 100, NULL, 0, true) == CITADEL_STATUS_INVALID_ARGUMENT,
          "null handle send");
    uint16_t kind;
    size_t len;
    CHECK(citadel_client_poll(NULL, &kind, NULL, 0, &len, NULL) ==
              CITADEL_STATUS_INVALID_ARGUMENT,
          "null handle poll");
    CHECK(citadel_client_free(NULL) == CITADEL_STATUS_OK, "free(NULL) is a no-op");
    static const char wrong_pem[] =
        "-----BEGIN CERTIFICATE-----\n"
        "MIIBMjCB2aADAgECAhQJ0x8vE0QFy0kz9xw6m1Zr3n0b7DAKBggqhkjOPQQDAjAA\n"
        "-----END CERTIFICATE-----\n";
    CitadelStatus s = citadel_client_connect_quic_pinned(
        quic_addr, (const uint8_t *)wrong_pem, sizeof wrong_pem - 1, &h);
    CHECK(s == CITADEL_STATUS_CONNECT || s == CITADEL_STATUS_INVALID_ARGUMENT,
          "a certificate other than the pinned one is refused (status %d)", (int)s);
    CHECK(h == NULL, "no handle after a refused pin");
    s = citadel_client_connect_quic(quic_addr, NULL, false, &h);
    CHECK(s == CITADEL_STATUS_CONNECT,
          "public-CA mode refuses the self-signed dev certificate (status %d)", (int)s);
    CHECK(h == NULL, "no handle after a refused certificate");
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "open %s", path);
    char *data = malloc(16384);
    CHECK(data != NULL, "malloc");
    *len = fread(data, 1, 16384, f);
    fclose(f);
    return data;
}

int main(int argc, char **argv) {
    CHECK(argc == 5, "usage: ffi_flow <ws_url> <quic_addr> <cert.pem> <closed_port>");
    CHECK(citadel_client_abi_version() == CITADEL_FFI_ABI_VERSION, "ABI version");
    error_paths(argv[2], argv[4]);

    CitadelClient *a = NULL, *b = NULL;
    CHECK(citadel_client_connect_websocket(argv[1], &a) == CITADEL_STATUS_OK, "connect A (ws)");
    size_t pem_len = 0;
    char *pem = read_file(argv[3], &pem_len);
    CHECK(citadel_client_connect_quic_pinned(argv[2], (const uint8_t *)pem, pem_len, &b) ==
              CITADEL_STATUS_OK,
          "connect B (quic, pinned)");
    free(pem);
    CHECK(a != b, "distinct handles");
    authenticate_guest(a);
    authenticate_guest(b);

    uint64_t room_a = join_room(a, 0, "ffi-room");
    uint64_t room_b = join_room(b, 1, "ffi-room");
    CHECK(room_a == room_b, "same room (%llu vs %llu)", (unsigned long long)room_a,
          (unsigned long long)room_b);

    /* A's position reaches B as kind 2 (datagrams may be lost: resend). */
    float pos[2] = {125.0f, 64.0f};
    long got = -1;
    for (int attempt = 0; attempt < 20 && got < 0; attempt++) {
        CHECK(citadel_client_send(a, KIND_POSITION, (const uint8_t *)pos, sizeof pos, false) ==
                  CITADEL_STATUS_OK,
              "send position");
        got = poll_for(b, 1, KIND_PEER_POSITION, 250);
    }
    CHECK(got == 16, "peer position of 16 bytes (got %ld)", got);
    float relayed[2];
    memcpy(relayed, buf + 8, sizeof relayed);
    CHECK(relayed[0] == 125.0f && relayed[1] == 64.0f, "relayed position");

    long reply = call_rpc(a, 0, 1, "ping");
    CHECK(reply == 4 && memcmp(buf + 9, "pong", 4) == 0, "ping replied pong");

    /* Transform sync: an NPC in the room, both clients opted in. */
    CHECK(call_rpc(a, 0, 2, "spawn_npc") > 0, "spawn_npc returned an id");
    CHECK(citadel_client_send(a, KIND_TSYNC_HELLO, NULL, 0, true) == CITADEL_STATUS_OK,
          "hello A");
    CHECK(citadel_client_send(b, KIND_TSYNC_HELLO, NULL, 0, true) == CITADEL_STATUS_OK,
          "hello B");
    CHECK(poll_for(a, 0, KIND_TSYNC_HELLO, 5000) > 0, "A negotiated");
    CHECK(poll_for(b, 1, KIND_TSYNC_HELLO, 5000) > 0, "B negotiated");
    long deadline = now_ms() + 10000;
    while ((snapshots[0] < 3 || snapshots[1] < 3) && now_ms() < deadline) {
        poll_for(a, 0, 0xffff, 20);
        poll_for(b, 1, 0xffff, 20);
    }
    CHECK(snapshots[0] >= 3 && snapshots[1] >= 3, "snapshots A=%d B=%d", snapshots[0],
          snapshots[1]);

    /* Truncation: peek at the next envelope's size, then take it whole. */
    uint16_t kind = 0;
    size_t len = 0;
    bool truncated = false;
    CitadelStatus s = CITADEL_STATUS_AGAIN;
    for (int i = 0; i < 2000 && s == CITADEL_STATUS_AGAIN; i++) {
        s = citadel_client_poll(a, &kind, NULL, 0, &len, &truncated);
        if (s == CITADEL_STATUS_AGAIN) sleep_ms(2);
    }
    CHECK(s == CITADEL_STATUS_OK && truncated && len > 0, "peek (status %d)", (int)s);
    uint16_t kind2 = 0;
    size_t len2 = 0;
    CHECK(citadel_client_poll(a, &kind2, buf, len, &len2, &truncated) == CITADEL_STATUS_OK,
          "take whole");
    CHECK(!truncated && kind2 == kind && len2 == len, "same envelope after the peek");

    CHECK(citadel_client_free(a) == CITADEL_STATUS_OK, "free A");
    CHECK(citadel_client_free(b) == CITADEL_STATUS_OK, "free B");
    CHECK(citadel_client_free(a) == CITADEL_STATUS_INVALID_ARGUMENT, "double free refused");
    CHECK(citadel_client_send(b, 100, NULL, 0, true) == CITADEL_STATUS_INVALID_ARGUMENT,
          "use after free refused");
    printf("ffi_flow: ok (snapshots A=%d B=%d)\n", snapshots[0], snapshots[1]);
    return 0;
}
