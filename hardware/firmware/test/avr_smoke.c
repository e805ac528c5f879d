/* Compiles pp_protocol.h for an ATmega328P (Arduino Uno/Nano) with avr-gcc and avr-libc,
 * without the Arduino core: proves the parser fits the target toolchain. */
#include "pp_protocol.h"
volatile uint8_t sink;
int main(void) {
    pp_cmd c;
    char out[64];
    uint8_t rails[PP_CHANNELS] = {1, 1};
    pp_parse("PULSE 1 250", &c);
    pp_reply(out, sizeof out, &c, 1234, rails, "trace,ramp");
    pp_trace_head(out, sizeof out, 1, 1, 20000, 12000, 16);
    sink = (uint8_t)pp_sample_mv(200, 20000);
    sink = (uint8_t)out[0];
    return 0;
}
