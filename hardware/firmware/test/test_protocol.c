/* Host unit test of pp_protocol.h: cc -Wall -Wextra -Werror -I../plugpull_switch. */
#include "pp_protocol.h"
#include <assert.h>
#include <stdio.h>

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static pp_cmd parse(const char *s) { pp_cmd c; pp_parse(s, &c); return c; }

int main(void) {
    pp_cmd c;
    char out[96];
    uint8_t rails[PP_CHANNELS] = {1, 0};

    CHECK(parse("PING").op == PP_PING);
    CHECK(parse("PING\r\n").op == PP_PING);
    CHECK(parse("  STATE?  ").op == PP_STATE);
    c = parse("OFF 1"); CHECK(c.op == PP_OFF && c.channel == 1);
    c = parse("ON 2\r"); CHECK(c.op == PP_ON && c.channel == 2);
    c = parse("PULSE 1 250"); CHECK(c.op == PP_PULSE && c.channel == 1 && c.ms == 250);
    c = parse("PULSE  2   600000"); CHECK(c.op == PP_PULSE && c.ms == 600000);

    /* errors, each with a reason */
    CHECK(parse("").op == PP_ERROR);
    CHECK(parse("off 1").op == PP_ERROR);            /* upper case only */
    c = parse("OFF"); CHECK(c.op == PP_ERROR && strstr(c.error, "channel"));
    c = parse("OFF 0"); CHECK(c.op == PP_ERROR && strstr(c.error, "no such channel"));
    c = parse("OFF 3"); CHECK(c.op == PP_ERROR);
    c = parse("OFF 1x"); CHECK(c.op == PP_ERROR && strstr(c.error, "unexpected"));
    c = parse("OFF 1 2"); CHECK(c.op == PP_ERROR);
    c = parse("PULSE 1"); CHECK(c.op == PP_ERROR && strstr(c.error, "pulse length"));
    c = parse("PULSE 1 0"); CHECK(c.op == PP_ERROR);
    c = parse("PULSE 1 600001"); CHECK(c.op == PP_ERROR);
    c = parse("PULSE 1 99999999999999"); CHECK(c.op == PP_ERROR);
    c = parse("REBOOTNOW"); CHECK(c.op == PP_ERROR);

    /* replies, as the host driver parses them */
    c = parse("PING"); pp_reply(out, sizeof out, &c, 42, rails);
    CHECK(strcmp(out, "OK 42 PONG plugpull_switch/1 channels=2") == 0);
    c = parse("STATE?"); pp_reply(out, sizeof out, &c, 4294967295UL, rails);
    CHECK(strcmp(out, "OK 4294967295 STATE 1=ON 2=OFF") == 0);
    c = parse("OFF 2"); pp_reply(out, sizeof out, &c, 7, rails);
    CHECK(strcmp(out, "OK 7 OFF 2") == 0);
    c = parse("PULSE 1 500"); pp_reply(out, sizeof out, &c, 8, rails);
    CHECK(strcmp(out, "OK 8 PULSE 1 500") == 0);
    c = parse("OFF 9"); pp_reply(out, sizeof out, &c, 9, rails);
    CHECK(strcmp(out, "ERR 9 no such channel") == 0);

    printf("%d failed\n", failures);
    return failures != 0;
}
