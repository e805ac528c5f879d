// plugpull_switch: cuts and restores a drive's power rails on command from
// `plugpull campaign` (power driver "serial", protocol "plugpull"), and records how each
// rail fell.
//
// Line protocol at 115200 8N1 (hardware/firmware/PROTOCOL.md): PING, STATE?, OFF ch,
// ON ch, PULSE ch ms, and from version 2 RAMP ch ms and TRACE? ch. Replies
// "OK <micros> ..." / "ERR <micros> why"; a pulse ends with "EVT <micros> ON ch". The
// parser is pp_protocol.h, unit-tested on the host.
//
// Proof of the cut: every cut (OFF, PULSE, RAMP) samples the channel's rail on the drive
// side (SENSE_PIN, through a divider) with the ADC: 16 samples before the gate changes,
// then PP_TRACE_N - 16 after, every 50 us (20 kHz) for a plain cut, slower for a ramp so
// the window covers 1.5 times the fall. TRACE? ch reports the last capture of ch.
//
// Safety: the rails come up ON before anything else, because most boards reset when the
// host opens the serial port, and a reset must never cut the drive by surprise.

// The interposer boards of hardware/schematics/ (README "Controller pins"): each has its
// own rails, so its own channel count, gate and sense pins, nominal voltages and
// dividers. Build for one with `make PP_FLAGS=-DPP_BOARD=PP_BOARD_SATA` (or _M2, _U2);
// a board build samples and ramps (PP_SENSE and PP_PWM_GATES on). Why per board: the
// fall times are shares of the rail's nominal voltage, so a 3.3 V rail judged against
// 12 V would count a rail stuck at 1 V as cut.
#define PP_BOARD_NONE 0
#define PP_BOARD_SATA 1
#define PP_BOARD_M2 2
#define PP_BOARD_U2 3
#ifndef PP_BOARD
#define PP_BOARD PP_BOARD_NONE
#endif
#if PP_BOARD == PP_BOARD_SATA
#define PP_CHANNELS 3
#define PP_GATE_PINS {9, 10, 3}
#define PP_SENSE_PINS {A0, A1, A2}
#define PP_NOMINAL_MV {12000, 5000, 3300}
#define PP_FULL_MV {20000, 10000, 10000}
#elif PP_BOARD == PP_BOARD_M2
#define PP_CHANNELS 1
#define PP_GATE_PINS {9}
#define PP_SENSE_PINS {A0}
#define PP_NOMINAL_MV {3300}
#define PP_FULL_MV {10000}
#elif PP_BOARD == PP_BOARD_U2
#define PP_CHANNELS 2
#define PP_GATE_PINS {9, 10}
#define PP_SENSE_PINS {A0, A1}
#define PP_NOMINAL_MV {12000, 3300}
#define PP_FULL_MV {20000, 10000}
#elif PP_BOARD != PP_BOARD_NONE
#error "PP_BOARD: use PP_BOARD_SATA, PP_BOARD_M2 or PP_BOARD_U2"
#endif
#if PP_BOARD != PP_BOARD_NONE
#define PP_SENSE 1
#define PP_PWM_GATES 1
#endif

#include "pp_protocol.h"

// Gate pins of the load switches, channel 1..PP_CHANNELS. HIGH = rail powered. The
// default is the wiring of hardware/wiring/ (pins 7 and 8). RAMP needs PWM on the gate
// pin (9 and 10 on an Uno: Timer1), the gate driven through an RC so the PWM becomes a
// falling gate voltage: build with `make PP_FLAGS=-DPP_PWM_GATES=1`. Without PWM the
// PONG offers no ramp.
#ifndef PP_GATE_PINS
#if PP_PWM_GATES
#define PP_GATE_PINS {9, 10}
#else
#define PP_GATE_PINS {7, 8}
#endif
#endif
// Sampling the rails needs the sense dividers wired to A0/A1: build with
// `make PP_FLAGS=-DPP_SENSE=1` (both: PP_FLAGS='-DPP_SENSE=1 -DPP_PWM_GATES=1'). Off by default, because an unwired ADC input reads noise,
// and a trace of noise would prove (or disprove) a cut that was never measured.
#ifndef PP_SENSE
#define PP_SENSE 0
#endif
static const uint8_t RAIL_PIN[PP_CHANNELS] = PP_GATE_PINS;
static const uint8_t RAIL_ON = HIGH;
static const uint8_t RAIL_OFF = LOW;
// Drive-side sense inputs (each rail through a divider to 0..5 V), the rail's nominal
// voltage, and the voltage at ADC full scale (5 V times the divider ratio): 12 V through
// 30k/10k reads 20 V at full scale; 5 V through 10k/10k reads 10 V.
#ifndef PP_SENSE_PINS
#define PP_SENSE_PINS {A0, A1}
#define PP_NOMINAL_MV {12000, 5000}
#define PP_FULL_MV {20000, 10000}
#endif
static const uint8_t SENSE_PIN[PP_CHANNELS] = PP_SENSE_PINS;
static const uint16_t NOMINAL_MV[PP_CHANNELS] = PP_NOMINAL_MV;
static const uint16_t FULL_MV[PP_CHANNELS] = PP_FULL_MV;

#define PP_TRACE_N 400
#define PP_TRACE_PRE 16
#define PP_TRACE_MIN_US 50
static uint8_t trace[PP_TRACE_N];  // ADC top 8 bits
static uint16_t trace_len;
static uint8_t trace_ch;            // 0: none yet
static uint32_t trace_us;           // sample period

static uint8_t rails[PP_CHANNELS];
static uint32_t pulse_end_ms[PP_CHANNELS];
static uint8_t pulsing[PP_CHANNELS];
static char line[PP_LINE_MAX];
static uint8_t line_len;
static uint8_t overflow;
static const char *features;

static void set_rail(uint8_t ch, uint8_t on) {
  digitalWrite(RAIL_PIN[ch - 1], on ? RAIL_ON : RAIL_OFF);
  rails[ch - 1] = on;
}

// 8-bit ADC read: the prescaler set in setup() makes a conversion take ~16 us.
static uint8_t sample(uint8_t ch) { return (uint8_t)(analogRead(SENSE_PIN[ch - 1]) >> 2); }

// Cuts channel ch (ramp_ms 0: at once, else a linear PWM fall over ramp_ms) while
// sampling its rail; returns micros() right after the gate began to change.
static uint32_t cut_and_trace(uint8_t ch, uint32_t ramp_ms) {
  uint32_t period = PP_TRACE_MIN_US, t0, next, now, t_cut;
  uint16_t i;
  if (!PP_SENSE && ramp_ms == 0) {  // nothing to sample: cut at once, as version 1 did
    set_rail(ch, 0);
    return micros();
  }
  if (ramp_ms > 0) {
    uint32_t want = ramp_ms * 1500UL / (PP_TRACE_N - PP_TRACE_PRE);
    if (want > period) period = want;
  }
  next = micros();
  for (i = 0; i < PP_TRACE_PRE; i++) {
    while ((int32_t)(micros() - next) < 0) {}
    trace[i] = sample(ch);
    next += period;
  }
  if (ramp_ms == 0) set_rail(ch, 0);
  else { analogWrite(RAIL_PIN[ch - 1], 255); rails[ch - 1] = 0; }
  t_cut = micros();
  t0 = t_cut;
  for (; i < PP_TRACE_N; i++) {
    while ((int32_t)((now = micros()) - next) < 0) {}
    if (ramp_ms > 0) {
      uint32_t el = (now - t0) / 1000UL;
      if (el >= ramp_ms) set_rail(ch, 0);
      else analogWrite(RAIL_PIN[ch - 1], (int)(255UL - 255UL * el / ramp_ms));
    }
    trace[i] = sample(ch);
    next += period;
    // A pulse shorter than the window ends on time; the trace ends with it.
    if (pulsing[ch - 1] && (int32_t)(millis() - pulse_end_ms[ch - 1]) >= 0) { i++; break; }
  }
  if (ramp_ms > 0 && !pulsing[ch - 1]) set_rail(ch, 0);
  trace_len = i;
  trace_ch = PP_SENSE ? ch : 0;
  trace_us = period;
  return t_cut;
}

static void print_trace(uint8_t ch, uint32_t t) {
  char head[80];
  uint16_t i;
  if (!PP_SENSE || trace_ch != ch) {
    Serial.print(F("ERR "));
    Serial.print(t);
    Serial.println(PP_SENSE ? F(" no trace of this channel since boot")
                            : F(" no rail sensing in this build (PP_SENSE=1, PROTOCOL.md)"));
    return;
  }
  pp_trace_head(head, sizeof head, t, ch, 1000000UL / trace_us, NOMINAL_MV[ch - 1], PP_TRACE_PRE);
  Serial.print(head);
  for (i = 0; i < trace_len; i++) {
    if (i) Serial.print(',');
    Serial.print(pp_sample_mv(trace[i], FULL_MV[ch - 1]));
  }
  Serial.println();
}

void setup() {
  uint8_t ramp = 1;
  for (uint8_t i = 0; i < PP_CHANNELS; i++) {
    digitalWrite(RAIL_PIN[i], RAIL_ON);  // level first, then output: no glitch low
    pinMode(RAIL_PIN[i], OUTPUT);
    rails[i] = 1;
    if (!digitalPinHasPWM(RAIL_PIN[i])) ramp = 0;
  }
  features = PP_SENSE ? (ramp ? "trace,ramp" : "trace") : (ramp ? "ramp" : "");
  // ADC clock 16 MHz / 16 = 1 MHz: ~16 us a conversion (8 good bits), so 20 kHz fits.
  ADCSRA = (ADCSRA & ~0x07) | 0x04;
  Serial.begin(115200);
  Serial.println(F("plugpull_switch ready (rails ON)"));
}

static void execute(pp_cmd *cmd) {
  char out[96];
  uint32_t t;
  uint8_t i = cmd->channel - 1;
  switch (cmd->op) {
  case PP_OFF: pulsing[i] = 0; t = cut_and_trace(cmd->channel, 0); break;
  case PP_ON: set_rail(cmd->channel, 1); pulsing[i] = 0; t = micros(); break;
  case PP_PULSE:
    pulse_end_ms[i] = millis() + cmd->ms;
    pulsing[i] = 1;
    t = cut_and_trace(cmd->channel, 0);
    break;
  case PP_RAMP:
    if (!digitalPinHasPWM(RAIL_PIN[i])) {
      cmd->op = PP_ERROR;
      cmd->error = "no PWM on this channel's gate pin: RAMP needs PP_PWM_GATES=1 (PROTOCOL.md)";
      t = micros();
      break;
    }
    pulsing[i] = 0;
    t = cut_and_trace(cmd->channel, cmd->ms);
    break;
  case PP_TRACE: print_trace(cmd->channel, micros()); return;
  default: t = micros(); break;
  }
  // t: right after the gate changed, the moment the cut began. The reply follows the
  // capture (at most 20 ms for a cut, 1.5 times the fall for a ramp).
  pp_reply(out, sizeof out, cmd, t, rails, features);
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
