"""The three power interposers (SATA, M.2, U.2/U.3) described as SKiDL circuits.

Why one rail stage for every rail: each switched rail gets the same circuit (fuse, P-MOSFET
high-side switch, gate driver, soft-start, TVS, drive-side sense divider into the ADC), so
the firmware treats every channel alike and one reviewed stage serves all three boards;
only the part values differ per rail voltage (RAILS below says which and why).

The stage, for rail k (nets named <rail>_IN, _F, _OUT, _GATE, _DRV, _MIL, EN<k>, SENSE<k>):
  PSU rail -> F (fuse) -> Q (P-MOSFET, source on the fused rail, drain to the drive)
  R_GS gate->source: turns Q off whenever the driver lets go (fast cut).
  R_G + Q_DRV (2N7002): pulls the gate down to turn Q on; R_GS/R_G sets Vgs for the rail.
  R_PU 100k from the controller's 5 V to EN<k>: the rail stays ON while the controller
    resets (its pins float during the bootloader), as hardware/SAFETY.md requires.
  C_SS + D_SS (BAT54) gate->drain, R_BL across D_SS: Miller soft-start on turn-on only
    (inrush limit); the diode takes C_SS out of the turn-off path so a cut stays fast.
  C_GS gate->source: with R_GS||R_G it filters the PWM that RAMP puts on EN<k>.
  TVS from the drive-side rail to ground; R_TOP/R_BOT divider with C_F (anti-alias) into
  the controller's ADC pin.
"""

import builtins

from skidl import POWER, Net, reset

import parts

# Controller pins per channel: (enable/PWM pin, ADC pin). The firmware must use the same.
CHANNEL_PINS = {1: ("D9", "A0"), 2: ("D10", "A1"), 3: ("D3", "A2")}

# Per rail: the values that depend on its voltage.
#   r_gs/r_g: Vgs when on = -V * r_gs/(r_gs+r_g): -6 V at 12 V (AOD4185 is specified at
#   -4.5 V), -4.5 V at 5 V, -3.0 V at 3.3 V (CSD25402Q3A is specified at -2.5 V).
#   divider r_top/r_bot: nominal rail -> ADC volts with AVCC (5 V) as reference:
#   12 V -> 3.0 V, 5 V -> 2.5 V, 3.3 V -> 1.65 V; full scale 20 V / 10 V / 10 V.
RAILS = {
    "12V": dict(label="12 V", volts=12.0, fuse="FUSE2A", fet="AOD4185", tvs="SMBJ15A",
                r_gs="4.7k", r_g="4.7k", r_top="30k", r_bot="10k"),
    "5V": dict(label="5 V", volts=5.0, fuse="FUSE3A", fet="AOD4185", tvs="SMBJ6.0A",
               r_gs="10k", r_g="1k", r_top="10k", r_bot="10k"),
    "3V3": dict(label="3.3 V", volts=3.3, fuse="FUSE1A", fet="CSD25402Q3A", tvs="SMBJ5.0A",
                r_gs="10k", r_g="1k", r_top="10k", r_bot="10k"),
    "3V3_M2": dict(label="3.3 V", volts=3.3, fuse="FUSE4A", fet="CSD25402Q3A", tvs="SMBJ5.0A",
                   r_gs="10k", r_g="1k", r_top="10k", r_bot="10k"),
    "3V3AUX": dict(label="3.3 V aux", volts=3.3, fuse="FUSE1A", fet="CSD25402Q3A",
                   tvs="SMBJ5.0A", r_gs="10k", r_g="1k", r_top="10k", r_bot="10k"),
}


def _part(tmpl, key, value=None):
    p = tmpl(value=value or key)
    p.fields["catalogue"] = key
    return p


def rail_stage(ch, rail, vin, vout, gnd, v5, nano):
    """One switched rail: vin (PSU side) -> vout (drive side), channel ch of the controller."""
    r = RAILS[rail]
    en_pin, adc_pin = CHANNEL_PINS[ch]
    vf = Net(f"{rail}_F")
    gate, drv, mil = Net(f"{rail}_GATE"), Net(f"{rail}_DRV"), Net(f"{rail}_MIL")
    en, sense = Net(f"EN{ch}"), Net(f"SENSE{ch}")
    f = _part(parts.FUSE, r["fuse"])
    q = _part(parts.PMOS, r["fet"])
    qd = _part(parts.NMOS, "2N7002")
    r_gs = _part(parts.RESISTOR, "R" + r["r_gs"], r["r_gs"])
    r_g = _part(parts.RESISTOR, "R" + r["r_g"], r["r_g"])
    r_pu = _part(parts.RESISTOR, "R100k", "100k")
    c_ss = _part(parts.CAPACITOR, "C100n", "100n")
    d_ss = _part(parts.DIODE, "BAT54")
    r_bl = _part(parts.RESISTOR, "R1M", "1M")
    c_gs = _part(parts.CAPACITOR, "C10n", "10n")
    tvs = _part(parts.DIODE, r["tvs"])
    r_top = _part(parts.RESISTOR, "R" + r["r_top"], r["r_top"])
    r_bot = _part(parts.RESISTOR, "R" + r["r_bot"], r["r_bot"])
    c_f = _part(parts.CAPACITOR, "C1n", "1n")
    for p, role in [(f, "fuse"), (q, "switch"), (qd, "driver"), (r_gs, "r_gs"), (r_g, "r_g"),
                    (r_pu, "pullup"), (c_ss, "c_ss"), (d_ss, "d_ss"), (r_bl, "r_bl"),
                    (c_gs, "c_gs"), (tvs, "tvs"), (r_top, "r_top"), (r_bot, "r_bot"),
                    (c_f, "c_f")]:
        p.fields["rail"] = rail
        p.fields["role"] = role
        p.fields["channel"] = str(ch)
    vin += f["IN"]
    vf += f["OUT"], q["S"], r_gs[1], c_gs[1]
    gate += q["G"], r_gs[2], c_gs[2], r_g[1], d_ss["K"], r_bl[2]
    drv += r_g[2], qd["D"]
    gnd += qd["S"]
    en += qd["G"], r_pu[1], nano[en_pin]
    v5 += r_pu[2]
    mil += c_ss[1], d_ss["A"], r_bl[1]
    vout += q["D"], c_ss[2], tvs["K"], r_top[1]
    gnd += tvs["A"], r_bot[2], c_f[2]
    sense += r_top[2], r_bot[1], c_f[1], nano[adc_pin]


def _flagged(name):
    n = Net(name)
    n.drive = POWER  # PWR_FLAG: powered from the host's supply through the connector
    return n


def _controller(gnd):
    nano = _part(parts.NANO, "NANO", "Arduino Nano")
    v5 = Net("5V_CTRL")
    v5 += nano["5V"]
    gnd += nano["GND"]
    return nano, v5


def _unused_channels(nano, used):
    # Channels the board does not switch: their pins are not connected (marked so the ERC
    # knows it is on purpose).
    NC = builtins.NC  # SKiDL's no-connect net (set up by `import skidl`)
    for ch, (en_pin, adc_pin) in CHANNEL_PINS.items():
        if ch not in used:
            nano[en_pin] += NC
            nano[adc_pin] += NC


SATA_PINS = [("P1", "3V3"), ("P2", "3V3"), ("P3", "PWDIS"), ("P4", "GND"), ("P5", "GND"),
             ("P6", "GND"), ("P7", "5V"), ("P8", "5V"), ("P9", "5V"), ("P10", "GND"),
             ("P11", "GND"), ("P12", "GND"), ("P13", "12V"), ("P14", "12V"), ("P15", "12V")]


def sata():
    """SATA: 12 V (ch 1), 5 V (ch 2), 3.3 V (ch 3) switched; P3 (power disable) by jumper."""
    P = parts.P
    j_in = _part(parts.connector("SATA_PWR_PSU_SIDE",
                                 [(n, f"{n}_{f}", P.PASSIVE) for n, f in SATA_PINS]), "SATA_CABLE",
                 "SATA power, PSU side")
    j_out = _part(parts.connector("SATA_PWR_DRIVE_SIDE",
                                  [(n, f"{n}_{f}", P.PASSIVE if f in ("GND", "PWDIS") else P.PWRIN)
                                   for n, f in SATA_PINS]), "SATA_CABLE", "SATA power, drive side")
    j_in.fields["side"], j_out.fields["side"] = "psu", "drive"
    gnd = _flagged("GND")
    nano, v5 = _controller(gnd)
    for ch, rail in [(1, "12V"), (2, "5V"), (3, "3V3")]:
        vin, vout = _flagged(f"{rail}_IN"), Net(f"{rail}_OUT")
        for n, f in SATA_PINS:
            if f == rail:
                vin += j_in[n]
                vout += j_out[n]
        rail_stage(ch, rail, vin, vout, gnd, v5, nano)
    for n, f in SATA_PINS:
        if f == "GND":
            gnd += j_in[n], j_out[n]
    # P3 power disable: JP1 1-2 passes the PSU's P3 through (the cable's behaviour);
    # 2-3 ties the drive's P3 to ground through 10k so a drive with power disable runs
    # even on a supply that puts 3.3 V on P3. The controller never drives it.
    jp = _part(parts.JUMPER3, "HDR3", "P3 select")
    r_p3 = _part(parts.RESISTOR, "R10k", "10k")
    jp.fields["role"] = r_p3.fields["role"] = "pwdis"
    p3_in, p3_out, p3_low = Net("PWDIS_IN"), Net("PWDIS_OUT"), Net("PWDIS_LOW")
    p3_in += j_in["P3"], jp[1]
    p3_out += jp[2], j_out["P3"]
    p3_low += jp[3], r_p3[1]
    gnd += r_p3[2]
    return dict(name="sata", title="SATA power interposer", rails=[(1, "12V"), (2, "5V"), (3, "3V3")],
                pins=SATA_PINS, j_in=j_in, j_out=j_out, nano=nano)


# M.2 key M: 3.3 V on pins 2, 4, 12, 14, 16, 18, 70, 72, 74; ground on the pins below.
# Every other pin (PCIe x4, REFCLK, PERST#, CLKREQ#, SMBus, ...) passes straight through,
# pin n of the host-side edge to pin n of the socket, so no signal name can be mixed up.
# Pins 59-66 are the key M notch.
M2_POWER = ["2", "4", "12", "14", "16", "18", "70", "72", "74"]
M2_GND = ["1", "3", "9", "15", "21", "27", "33", "39", "45", "51", "57", "71", "73", "75"]
M2_PASS = [str(n) for n in range(1, 76)
           if not 59 <= n <= 66 and str(n) not in M2_POWER + M2_GND]

# U.2 (SFF-8639): pin roles checked against u2-pins.tsv (tests/integration/hardware_schematics.rs).
# 12 V on P13-P15 (P13 the precharge pin) and ground on P5, P6 and P12: the P segment an
# SFF-8639 receptacle shares with SAS drives ([pinouts-ru], [sff8639] in u2-pins.tsv).
# P4 is ground for a SAS drive but an interface-detect input (IFDET) on a U.2 plug
# ([blade3-doc]), and P10 is PRSNT# on U.2 ([sn200-notes], [blade3-doc]): both pass
# straight through pin to pin, right whether they are grounds or detect signals, where
# tying them to our ground could tell the host the wrong drive type. 3.3 V aux on E3 is
# switched; E3 rests on secondary sources only (README, "Pins on one secondary source or
# two"). The S (SAS/SATA) and E (PCIe) segments otherwise pass straight through (PERST#,
# REFCLK, SMBus, DualPortEn#).
# P1-P3 and P7-P9 (5 V) are NOT passed: passing them unswitched would keep a drive that
# uses them powered through a cut; a drive that needs 5 V does not start on this board.
U2_12V = ["P13", "P14", "P15"]
U2_GND = ["P5", "P6", "P12"]
U2_OPEN = ["P1", "P2", "P3", "P7", "P8", "P9"]
U2_PASS = (["P4", "P10", "P11"] + [f"S{n}" for n in range(1, 29)]
           + [f"E{n}" for n in range(1, 26) if n != 3])


def _nvme(name, title, rails, power_pins, gnd_pins, pass_pins, open_pins, conn_in, conn_out):
    P = parts.P
    power_of = {n: r for r, ns in power_pins.items() for n in ns}
    order = list(power_of) + gnd_pins + pass_pins + open_pins
    pins_in = [(n, f"{n}_{power_of.get(n, 'GND' if n in gnd_pins else 'PIN')}", P.PASSIVE)
               for n in order]
    pins_out = [(n, nm, P.PWRIN if n in power_of else t) for n, nm, t in pins_in]
    j_in = _part(parts.connector(f"{name.upper()}_HOST_SIDE", pins_in), conn_in, f"{title}, host side")
    j_out = _part(parts.connector(f"{name.upper()}_DRIVE_SIDE", pins_out), conn_out,
                  f"{title}, drive side")
    j_in.fields["side"], j_out.fields["side"] = "psu", "drive"
    gnd = _flagged("GND")
    nano, v5 = _controller(gnd)
    for ch, rail in rails:
        vin, vout = _flagged(f"{rail}_IN"), Net(f"{rail}_OUT")
        for n in power_pins[rail]:
            vin += j_in[n]
            vout += j_out[n]
        rail_stage(ch, rail, vin, vout, gnd, v5, nano)
    for n in gnd_pins:
        gnd += j_in[n], j_out[n]
    for n in pass_pins:
        net = Net(f"{name.upper()}_PIN_{n}")
        net += j_in[n], j_out[n]
    NC = builtins.NC  # SKiDL's no-connect net (set up by `import skidl`)
    for n in open_pins:
        j_in[n] += NC
        j_out[n] += NC
    _unused_channels(nano, [c for c, _ in rails])
    return dict(name=name, title=f"{title} power interposer", rails=rails, j_in=j_in,
                j_out=j_out, nano=nano, pass_pins=pass_pins, open_pins=open_pins)


def m2():
    """M.2 key M: 3.3 V (ch 1) switched; PCIe x4 and sideband straight through."""
    return _nvme("m2", "M.2", [(1, "3V3_M2")], {"3V3_M2": M2_POWER}, M2_GND, M2_PASS, [],
                 "M2_EDGE", "M2_SOCKET")


def u2():
    """U.2/U.3 (SFF-8639): 12 V (ch 1) and 3.3 V aux (ch 2) switched; PCIe straight through."""
    return _nvme("u2", "U.2/U.3", [(1, "12V"), (2, "3V3AUX")], {"12V": U2_12V, "3V3AUX": ["E3"]},
                 U2_GND, U2_PASS, U2_OPEN, "U2_PLUG", "U2_RECEPT")


BOARDS = {"sata": sata, "m2": m2, "u2": u2}


def build(name):
    """Builds one board into SKiDL's (emptied) default circuit; returns its description."""
    reset()
    return BOARDS[name]()
