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

    /* version 2: RAMP ch ms (1..2000) and TRACE? ch */
    c = parse("RAMP 2 40"); CHECK(c.op == PP_RAMP && c.channel == 2 && c.ms == 40);
    c = parse("RAMP 1 2000"); CHECK(c.op == PP_RAMP && c.ms == 2000);
    c = parse("RAMP 1 0"); CHECK(c.op == PP_ERROR && strstr(c.error, "fall time"));
    c = parse("RAMP 1 2001"); CHECK(c.op == PP_ERROR);
    c = parse("RAMP 1"); CHECK(c.op == PP_ERROR && strstr(c.error, "fall time"));
    c = parse("RAMP 3 10"); CHECK(c.op == PP_ERROR && strstr(c.error, "no such channel"));
    c = parse("TRACE? 1"); CHECK(c.op == PP_TRACE && c.channel == 1);
    c = parse("TRACE?"); CHECK(c.op == PP_ERROR && strstr(c.error, "channel"));
    c = parse("TRACE? 1 5"); CHECK(c.op == PP_ERROR);
    c = parse("TRACE 1"); CHECK(c.op == PP_ERROR);
    CHECK(pp_sample_mv(255, 20000) == 20000);
    CHECK(pp_sample_mv(0, 20000) == 0);
    CHECK(pp_sample_mv(153, 20000) == 12000);

    /* replies, as the host driver parses them */
    c = parse("PING"); pp_reply(out, sizeof out, &c, 42, rails, "trace,ramp");
    CHECK(strcmp(out, "OK 42 PONG plugpull_switch/2 channels=2 features=trace,ramp") == 0);
    c = parse("STATE?"); pp_reply(out, sizeof out, &c, 4294967295UL, rails, "trace,ramp");
    CHECK(strcmp(out, "OK 4294967295 STATE 1=ON 2=OFF") == 0);
    c = parse("OFF 2"); pp_reply(out, sizeof out, &c, 7, rails, "trace,ramp");
    CHECK(strcmp(out, "OK 7 OFF 2") == 0);
    c = parse("PULSE 1 500"); pp_reply(out, sizeof out, &c, 8, rails, "trace,ramp");
    CHECK(strcmp(out, "OK 8 PULSE 1 500") == 0);
    c = parse("RAMP 1 40"); pp_reply(out, sizeof out, &c, 10, rails, "trace,ramp");
    CHECK(strcmp(out, "OK 10 RAMP 1 40") == 0);
    pp_trace_head(out, sizeof out, 11, 2, 20000, 12000, 16);
    CHECK(strcmp(out, "OK 11 TRACE 2 hz=20000 nominal_mv=12000 off=16 mv=") == 0);
    c = parse("OFF 9"); pp_reply(out, sizeof out, &c, 9, rails, "trace,ramp");
    CHECK(strcmp(out, "ERR 9 no such channel") == 0);

    printf("%d failed\n", failures);
    return failures != 0;
}
