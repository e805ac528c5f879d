/*
 * pp_protocol.h: the request parser and reply formatter of the plugpull switch firmware.
 *
 * Why a separate, dependency-free header: the same code compiles into the Arduino sketch
 * and into a host unit test (hardware/firmware/test/test_protocol.c, run by
 * tests/power_firmware.rs with the host's cc), so the protocol is tested without a board.
 * Protocol: hardware/firmware/PROTOCOL.md.
 */
#ifndef PP_PROTOCOL_H
#define PP_PROTOCOL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifndef PP_CHANNELS
#define PP_CHANNELS 2
#endif
#define PP_MAX_PULSE_MS 600000UL
#define PP_LINE_MAX 48
#define PP_VERSION "plugpull_switch/1"

typedef enum { PP_PING, PP_STATE, PP_OFF, PP_ON, PP_PULSE, PP_ERROR } pp_op;

typedef struct {
    pp_op op;
    uint8_t channel;   /* 1..PP_CHANNELS for OFF, ON, PULSE */
    uint32_t ms;       /* PULSE only */
    const char *error; /* PP_ERROR only: what was wrong */
} pp_cmd;

static int pp_is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Reads an unsigned decimal; returns the number of digits (0 if none or overflow). */
static int pp_number(const char *s, uint32_t *out) {
    uint32_t v = 0;
    int n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        uint32_t d = (uint32_t)(s[n] - '0');
        if (v > (UINT32_MAX - d) / 10) return 0;
        v = v * 10 + d;
        n++;
        if (n > 10) return 0;
    }
    *out = v;
    return n;
}

/* Parses one request line (without or with its trailing CR/LF). Commands are upper case;
 * words are separated by single or multiple spaces. Always fills *cmd; returns 1 if the
 * request is valid, 0 if cmd->op == PP_ERROR. */
static int pp_parse(const char *line, pp_cmd *cmd) {
    const char *p = line;
    char word[8];
    int n = 0;
    uint32_t a = 0, b = 0;
    int k;
    cmd->op = PP_ERROR;
    cmd->channel = 0;
    cmd->ms = 0;
    cmd->error = "unknown command (PING, STATE?, OFF ch, ON ch, PULSE ch ms)";
    while (pp_is_space(*p)) p++;
    while (*p && !pp_is_space(*p)) {
        if (n == (int)sizeof(word) - 1) return 0;
        word[n++] = *p++;
    }
    word[n] = 0;
    while (*p == ' ' || *p == '\t') p++;
    if (strcmp(word, "PING") == 0 || strcmp(word, "STATE?") == 0) {
        cmd->op = word[0] == 'P' ? PP_PING : PP_STATE;
    } else if (strcmp(word, "OFF") == 0 || strcmp(word, "ON") == 0 || strcmp(word, "PULSE") == 0) {
        k = pp_number(p, &a);
        if (k == 0) { cmd->error = "missing channel number"; return 0; }
        p += k;
        if (a < 1 || a > PP_CHANNELS) { cmd->error = "no such channel"; return 0; }
        cmd->channel = (uint8_t)a;
        if (word[0] == 'P') {
            while (*p == ' ' || *p == '\t') p++;
            k = pp_number(p, &b);
            if (k == 0) { cmd->error = "missing pulse length in ms"; return 0; }
            p += k;
            if (b < 1 || b > PP_MAX_PULSE_MS) { cmd->error = "pulse length out of range (1..600000 ms)"; return 0; }
            cmd->ms = b;
            cmd->op = PP_PULSE;
        } else {
            cmd->op = word[1] == 'F' ? PP_OFF : PP_ON;
        }
    } else {
        return 0;
    }
    while (pp_is_space(*p)) p++;
    if (*p) { cmd->op = PP_ERROR; cmd->error = "unexpected text after the command"; return 0; }
    cmd->error = 0;
    return 1;
}

/* Formats the reply to an executed command into out (>= 64 bytes). rails[i] != 0 means
 * channel i+1 is powered. micros is the board's clock when the command took effect. */
static void pp_reply(char *out, size_t size, const pp_cmd *cmd, uint32_t micros,
                     const uint8_t *rails) {
    int i, n;
    switch (cmd->op) {
    case PP_PING:
        snprintf(out, size, "OK %lu PONG " PP_VERSION " channels=%d", (unsigned long)micros, PP_CHANNELS);
        break;
    case PP_STATE:
        n = snprintf(out, size, "OK %lu STATE", (unsigned long)micros);
        for (i = 0; i < PP_CHANNELS && n > 0 && (size_t)n < size; i++)
            n += snprintf(out + n, size - (size_t)n, " %d=%s", i + 1, rails[i] ? "ON" : "OFF");
        break;
    case PP_OFF:
    case PP_ON:
        snprintf(out, size, "OK %lu %s %u", (unsigned long)micros, cmd->op == PP_ON ? "ON" : "OFF", cmd->channel);
        break;
    case PP_PULSE:
        snprintf(out, size, "OK %lu PULSE %u %lu", (unsigned long)micros, cmd->channel, (unsigned long)cmd->ms);
        break;
    default:
        snprintf(out, size, "ERR %lu %s", (unsigned long)micros, cmd->error ? cmd->error : "error");
    }
}

#endif
