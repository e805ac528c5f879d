// plugpull_switch: cuts and restores a drive's power rails on command from
// `plugpull campaign` (power driver "serial", protocol "plugpull").
//
// Line protocol at 115200 8N1 (hardware/firmware/PROTOCOL.md): PING, STATE?, OFF ch,
// ON ch, PULSE ch ms. Replies "OK <micros> ..." / "ERR <micros> why"; a pulse ends with
// "EVT <micros> ON ch". The parser is pp_protocol.h, unit-tested on the host.
//
// Safety: the rails come up ON before anything else, because most boards reset when the
// host opens the serial port, and a reset must never cut the drive by surprise.

#include "pp_protocol.h"

// Gate pins of the load switches (or relay driver transistors), channel 1..PP_CHANNELS.
// HIGH = rail powered. Change RAIL_ON if your driver stage inverts.
static const uint8_t RAIL_PIN[PP_CHANNELS] = {7, 8};
static const uint8_t RAIL_ON = HIGH;
static const uint8_t RAIL_OFF = LOW;

static uint8_t rails[PP_CHANNELS];
static uint32_t pulse_end_ms[PP_CHANNELS];
static uint8_t pulsing[PP_CHANNELS];
static char line[PP_LINE_MAX];
static uint8_t line_len;
static uint8_t overflow;

static void set_rail(uint8_t ch, uint8_t on) {
  digitalWrite(RAIL_PIN[ch - 1], on ? RAIL_ON : RAIL_OFF);
  rails[ch - 1] = on;
}

void setup() {
  for (uint8_t i = 0; i < PP_CHANNELS; i++) {
    digitalWrite(RAIL_PIN[i], RAIL_ON);  // level first, then output: no glitch low
    pinMode(RAIL_PIN[i], OUTPUT);
    rails[i] = 1;
  }
  Serial.begin(115200);
  Serial.println(F("plugpull_switch ready (rails ON)"));
}

static void execute(const pp_cmd *cmd) {
  char out[96];
  uint32_t t;
  switch (cmd->op) {
  case PP_OFF: set_rail(cmd->channel, 0); pulsing[cmd->channel - 1] = 0; break;
  case PP_ON: set_rail(cmd->channel, 1); pulsing[cmd->channel - 1] = 0; break;
  case PP_PULSE:
    set_rail(cmd->channel, 0);
    pulse_end_ms[cmd->channel - 1] = millis() + cmd->ms;
    pulsing[cmd->channel - 1] = 1;
    break;
  default: break;
  }
  t = micros();  // after the pin changed: the moment the cut began
  pp_reply(out, sizeof out, cmd, t, rails);
  Serial.println(out);
}

void loop() {
  for (uint8_t i = 0; i < PP_CHANNELS; i++) {
    if (pulsing[i] && (int32_t)(millis() - pulse_end_ms[i]) >= 0) {
      set_rail(i + 1, 1);
      pulsing[i] = 0;
      Serial.print(F("EVT "));
      Serial.print(micros());
      Serial.print(F(" ON "));
      Serial.println(i + 1);
    }
  }
  while (Serial.available() > 0) {
    char c = (char)Serial.read();
    if (c == '\n') {
      pp_cmd cmd;
      line[line_len] = 0;
      if (overflow) {
        cmd.op = PP_ERROR;
        cmd.error = "line too long";
      } else {
        pp_parse(line, &cmd);
      }
      execute(&cmd);
      line_len = 0;
      overflow = 0;
    } else if (line_len < PP_LINE_MAX - 1) {
      line[line_len++] = c;
    } else {
      overflow = 1;
    }
  }
}
