/*
 * pp_protocol.h: the request parser and reply formatter of the plugpull switch firmware.
 *
 * Why a separate, dependency-free header: the same code compiles into the Arduino sketch
 * and into a host unit test (hardware/firmware/test/test_protocol.c, run by
 * tests/integration/power_firmware.rs with the host's cc), so the protocol is tested
 * without a board.
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
#define PP_MAX_RAMP_MS 2000UL
#define PP_LINE_MAX 48
/* Version 2 adds RAMP and TRACE?; its PONG names them in features=. Version 1 hosts
 * ignore the extra word, and version 2 hosts treat a PONG without it as version 1. */
#define PP_VERSION "plugpull_switch/2"

typedef enum { PP_PING, PP_STATE, PP_OFF, PP_ON, PP_PULSE, PP_RAMP, PP_TRACE, PP_ERROR } pp_op;

typedef struct {
    pp_op op;
    uint8_t channel;   /* 1..PP_CHANNELS for OFF, ON, PULSE, RAMP, TRACE? */
    uint32_t ms;       /* PULSE and RAMP only */
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
    cmd->error = "unknown command (PING, STATE?, OFF ch, ON ch, PULSE ch ms, RAMP ch ms, TRACE? ch)";
    while (pp_is_space(*p)) p++;
    while (*p && !pp_is_space(*p)) {
        if (n == (int)sizeof(word) - 1) return 0;
        word[n++] = *p++;
    }
    word[n] = 0;
    while (*p == ' ' || *p == '\t') p++;
    if (strcmp(word, "PING") == 0 || strcmp(word, "STATE?") == 0) {
        cmd->op = word[0] == 'P' ? PP_PING : PP_STATE;
    } else if (strcmp(word, "OFF") == 0 || strcmp(word, "ON") == 0 || strcmp(word, "PULSE") == 0 ||
               strcmp(word, "RAMP") == 0 || strcmp(word, "TRACE?") == 0) {
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
        } else if (word[0] == 'R') {
            while (*p == ' ' || *p == '\t') p++;
            k = pp_number(p, &b);
            if (k == 0) { cmd->error = "missing fall time in ms"; return 0; }
            p += k;
            if (b < 1 || b > PP_MAX_RAMP_MS) { cmd->error = "fall time out of range (1..2000 ms)"; return 0; }
            cmd->ms = b;
            cmd->op = PP_RAMP;
        } else if (word[0] == 'T') {
            cmd->op = PP_TRACE;
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

/* A trace sample (the ADC's top 8 bits, 0..255) in mV, for a divider whose ADC full scale
 * (count 255) is full_mv. */
static uint16_t pp_sample_mv(uint8_t count, uint16_t full_mv) {
    return (uint16_t)(((uint32_t)count * full_mv + 127) / 255);
}

/* The head of a TRACE? reply, up to "mv=": the caller prints the samples (pp_sample_mv,
 * comma-separated) and the line end, since they do not fit a reply buffer. */
static void pp_trace_head(char *out, size_t size, uint32_t micros, uint8_t channel,
                          uint32_t hz, uint16_t nominal_mv, uint16_t off_index) {
    snprintf(out, size, "OK %lu TRACE %u hz=%lu nominal_mv=%u off=%u mv=", (unsigned long)micros,
             channel, (unsigned long)hz, nominal_mv, off_index);
}

/* Formats the reply to an executed command into out (>= 64 bytes). rails[i] != 0 means
 * channel i+1 is powered. micros is the board's clock when the command took effect.
 * features ("trace,ramp", "trace") goes into the PONG. A TRACE? reply is pp_trace_head. */
static void pp_reply(char *out, size_t size, const pp_cmd *cmd, uint32_t micros,
                     const uint8_t *rails, const char *features) {
    int i, n;
    switch (cmd->op) {
    case PP_PING:
        snprintf(out, size, "OK %lu PONG " PP_VERSION " channels=%d features=%s", (unsigned long)micros,
                 PP_CHANNELS, features);
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
    case PP_RAMP:
        snprintf(out, size, "OK %lu %s %u %lu", (unsigned long)micros, cmd->op == PP_RAMP ? "RAMP" : "PULSE",
                 cmd->channel, (unsigned long)cmd->ms);
        break;
    default:
        snprintf(out, size, "ERR %lu %s", (unsigned long)micros, cmd->error ? cmd->error : "error");
    }
}

#endif
