"""Draws an interposer's schematic as SVG from its SKiDL circuit.

Why generated: a hand-drawn picture drifts from the circuit (the old SATA sketch lost the
3.3 V rail). Here every symbol and label comes from the parts of the circuit that
interposers.py builds: references and values are SKiDL's, one row per switched rail, so
the picture cannot show a part the circuit lacks. check.py renders the result and checks
it as a picture (no overlapping labels, no label crossing a line, every rail present).

Layout: PSU/host-side connector on the left, drive side on the right, one row per rail
(fuse, P-MOSFET switch with its gate network and driver, TVS, sense divider into the
ADC), then ground, the pass-through or P3 row, and the controller.
"""

from xml.sax.saxutils import escape

import interposers
import parts

FONT = "DejaVu Sans, sans-serif"
COLOURS = {"12V": "#c9a400", "5V": "#d00000", "3V3": "#e06a00", "3V3_M2": "#e06a00",
           "3V3AUX": "#b05a00"}
ROW_H = 175
W = 980


class Svg:
    def __init__(self):
        self.items = []

    def line(self, x1, y1, x2, y2, colour="#000", width=1.5, dash=None):
        d = f' stroke-dasharray="{dash}"' if dash else ""
        self.items.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" '
                          f'stroke-width="{width}"{d}/>')

    def poly(self, pts, colour="#000", fill="none", width=1.5):
        p = " ".join(f"{x},{y}" for x, y in pts)
        self.items.append(f'<polyline points="{p}" stroke="{colour}" fill="{fill}" '
                          f'stroke-width="{width}"/>')

    def rect(self, x, y, w, h, fill="#fff", colour="#000", width=1.5):
        self.items.append(f'<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{fill}" '
                          f'stroke="{colour}" stroke-width="{width}"/>')

    def dot(self, x, y):
        self.items.append(f'<circle cx="{x}" cy="{y}" r="3" fill="#000"/>')

    def circle(self, x, y, r=4):
        self.items.append(f'<circle cx="{x}" cy="{y}" r="{r}" fill="#fff" stroke="#000" '
                          f'stroke-width="1.5"/>')

    def text(self, x, y, s, size=12, weight="normal", colour="#000", anchor="start"):
        self.items.append(f'<text x="{x}" y="{y}" font-size="{size}" font-weight="{weight}" '
                          f'fill="{colour}" text-anchor="{anchor}">{escape(s)}</text>')

    # symbols
    def ground(self, x, y):
        self.line(x, y - 6, x, y)
        self.line(x - 8, y, x + 8, y)
        self.line(x - 5, y + 3, x + 5, y + 3)
        self.line(x - 2, y + 6, x + 2, y + 6)

    def resistor_v(self, x, y1, y2):
        m = (y1 + y2) / 2
        self.line(x, y1, x, m - 12)
        self.rect(x - 4, m - 12, 8, 24)
        self.line(x, m + 12, x, y2)

    def cap_v(self, x, y1, y2):
        m = (y1 + y2) / 2
        self.line(x, y1, x, m - 3)
        self.line(x - 8, m - 3, x + 8, m - 3, width=2)
        self.line(x - 8, m + 3, x + 8, m + 3, width=2)
        self.line(x, m + 3, x, y2)

    def svg(self, w, h, title):
        body = "\n  ".join(self.items)
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
                f'viewBox="0 0 {w} {h}" font-family="{FONT}">\n  <title>{escape(title)}</title>\n'
                f'  <rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/>\n  {body}\n</svg>\n')


def _by_role(circuit_parts, rail):
    return {p.fields["role"]: p for p in circuit_parts if p.fields.get("rail") == rail}


def _name(p):
    key = p.fields["catalogue"]
    if key.startswith("FUSE"):
        return f"{p.ref} {key[4:-1]} A"
    if key.startswith(("R", "C")) and key not in ("R",):
        return f"{p.ref} {p.value}"
    return f"{p.ref} {key}"


def _pins_text(board, rail):
    j = board["j_in"]
    nums = [pin.num for pin in j.pins if pin.name.endswith("_" + rail)]
    if len(nums) > 4:
        return f"{len(nums)} pins"
    return "pin " + nums[0] if len(nums) == 1 else "pins " + ", ".join(nums)


def _rail_row(s, board, ch, rail, y0, circuit_parts):
    r = interposers.RAILS[rail]
    c = COLOURS[rail]
    p = _by_role(circuit_parts, rail)
    en_pin, adc_pin = interposers.CHANNEL_PINS[ch]
    # connector labels
    for x in (30, 840):
        s.text(x, y0 - 6, r["label"], size=14, weight="bold", colour=c)
        s.text(x, y0 + 16, _pins_text(board, rail), size=11)
    # rail line with fuse and switch
    s.line(170, y0, 190, y0, c, 3)
    s.rect(190, y0 - 7, 40, 14)
    s.text(190, y0 - 13, _name(p["fuse"]), size=11)
    s.line(230, y0, 312, y0, c, 3)
    # P-MOSFET: source (left) and drain (right) leads, channel, gate plate, arrow out
    s.line(312, y0, 312, y0 + 14)
    s.line(348, y0, 348, y0 + 14)
    for a, b in ((306, 320), (323, 337), (340, 354)):
        s.line(a, y0 + 14, b, y0 + 14, width=2.5)
    s.line(306, y0 + 21, 354, y0 + 21, width=2)
    s.poly([(330, y0 + 14), (326, y0 + 6), (334, y0 + 6), (330, y0 + 14)], fill="#000", width=1)
    s.line(330, y0 + 6, 330, y0 + 2)
    s.line(330, y0 + 2, 312, y0 + 2, width=1)
    s.line(330, y0 + 21, 330, y0 + 52)
    s.text(290, y0 - 13, f"{p['switch'].ref} {p['switch'].fields['catalogue']} (switch)", size=11)
    s.line(348, y0, 830, y0, c, 3)
    s.dot(262, y0)
    s.dot(290, y0)
    # gate to source: R_GS and C_GS in parallel
    s.resistor_v(290, y0, y0 + 52)
    s.cap_v(262, y0, y0 + 52)
    s.line(262, y0 + 52, 384, y0 + 52)
    s.dot(290, y0 + 52)
    s.dot(330, y0 + 52)
    s.text(196, y0 + 32, _name(p["r_gs"]), size=11)
    s.text(196, y0 + 47, _name(p["c_gs"]), size=11)
    # soft-start: D_SS (cathode at the gate) in series with C_SS to the drain; R_BL across D_SS
    s.poly([(392, y0 + 45), (392, y0 + 59), (380, y0 + 52), (392, y0 + 45)], fill="#000", width=1)
    s.line(380, y0 + 45, 380, y0 + 59, width=2)
    s.line(392, y0 + 52, 410, y0 + 52)
    s.line(368, y0 + 52, 368, y0 + 70)
    s.line(368, y0 + 70, 374, y0 + 70)
    s.rect(374, y0 + 66, 22, 8)
    s.line(396, y0 + 70, 402, y0 + 70)
    s.line(402, y0 + 70, 402, y0 + 52)
    s.dot(368, y0 + 52)
    s.dot(402, y0 + 52)
    s.cap_v(410, y0, y0 + 52)
    s.dot(410, y0)
    s.text(420, y0 + 30, _name(p["c_ss"]), size=11)
    s.text(420, y0 + 57, _name(p["d_ss"]), size=11)
    s.text(420, y0 + 75, _name(p["r_bl"]), size=11)
    # driver: R_G from the gate node down to the 2N7002's drain
    s.resistor_v(356, y0 + 52, y0 + 100)
    s.text(364, y0 + 96, _name(p["r_g"]), size=11)
    s.line(356, y0 + 100, 356, y0 + 106)
    s.line(356, y0 + 106, 346, y0 + 106)
    for a, b in ((104, 111), (114, 120), (123, 130)):
        s.line(346, y0 + a, 346, y0 + b, width=2.5)
    s.line(340, y0 + 106, 340, y0 + 128, width=2)
    s.line(346, y0 + 117, 356, y0 + 117)
    s.line(346, y0 + 128, 356, y0 + 128)
    s.poly([(347, y0 + 117), (353, y0 + 113), (353, y0 + 121), (347, y0 + 117)], fill="#000", width=1)
    s.line(356, y0 + 117, 356, y0 + 140)
    s.ground(356, y0 + 146)
    s.text(364, y0 + 124, f"{p['driver'].ref} 2N7002 (driver)", size=11)
    # enable from the controller, pull-up to its 5 V
    s.line(240, y0 + 118, 340, y0 + 118)
    s.dot(270, y0 + 118)
    s.resistor_v(270, y0 + 78, y0 + 118)
    s.line(262, y0 + 78, 278, y0 + 78)
    s.text(196, y0 + 83, "+5 V ctrl", size=11)
    s.text(196, y0 + 102, _name(p["pullup"]), size=11)
    s.text(178, y0 + 138, f"{en_pin} EN{ch}", size=12, weight="bold", colour="#060")
    # TVS to ground
    s.dot(530, y0)
    s.line(530, y0, 530, y0 + 20)
    s.poly([(522, y0 + 32), (538, y0 + 32), (530, y0 + 20), (522, y0 + 32)], fill="#fcc", width=1)
    s.poly([(520, y0 + 17), (522, y0 + 20), (538, y0 + 20), (540, y0 + 23)], width=1.5)
    s.line(530, y0 + 32, 530, y0 + 60)
    s.ground(530, y0 + 66)
    s.text(544, y0 + 34, _name(p["tvs"]) + " TVS", size=11)
    # sense divider, anti-alias capacitor, ADC pin
    s.dot(650, y0)
    s.resistor_v(650, y0, y0 + 52)
    s.dot(650, y0 + 52)
    s.resistor_v(650, y0 + 52, y0 + 104)
    s.ground(650, y0 + 110)
    s.line(650, y0 + 52, 740, y0 + 52)
    s.dot(700, y0 + 52)
    s.cap_v(700, y0 + 52, y0 + 90)
    s.ground(700, y0 + 96)
    s.text(660, y0 + 30, _name(p["r_top"]), size=11)
    s.text(642, y0 + 86, _name(p["r_bot"]), size=11, anchor="end")
    s.text(710, y0 + 76, _name(p["c_f"]), size=11)
    s.text(744, y0 + 57, f"{adc_pin} SENSE{ch}", size=12, weight="bold", colour="#060")


def draw(board, circuit_parts):
    s = Svg()
    rails = board["rails"]
    top = 70
    extra = 75
    ctrl_h = 96
    h = top + len(rails) * ROW_H + 50 + extra + ctrl_h + 30
    s.text(20, 28, f"{board['title']} (generated from hardware/schematics/interposers.py)",
           size=15, weight="bold")
    s.text(20, 48, "Switches sit in series with the positive rails only; ground is never switched.",
           size=12)
    box_h = len(rails) * ROW_H + 50 + extra
    side_in = "PSU side" if board["name"] == "sata" else "host side"
    s.rect(20, top, 150, box_h, fill="#f2f2f2")
    s.rect(830, top, 130, box_h, fill="#f2f2f2")
    s.text(30, top + 18, side_in, size=12, weight="bold")
    s.text(840, top + 18, "drive side", size=12, weight="bold")
    parts_ = list(circuit_parts)
    for i, (ch, rail) in enumerate(rails):
        _rail_row(s, board, ch, rail, top + 50 + i * ROW_H, parts_)
    yg = top + 40 + len(rails) * ROW_H
    s.line(170, yg, 830, yg, "#000", 3)
    for x in (30, 840):
        s.text(x, yg - 6, "GND", size=14, weight="bold")
    ngnd = sum(1 for pin in board["j_in"].pins if pin.name.endswith("_GND"))
    s.text(420, yg - 8, f"ground: {ngnd} pins straight through, never switched", size=11)
    yx = yg + 45
    if board["name"] == "sata":
        jp = next(p for p in parts_ if p.fields.get("role") == "pwdis" and p.ref.startswith("JP"))
        rp = next(p for p in parts_ if p.fields.get("role") == "pwdis" and p.ref.startswith("R"))
        for x in (30, 840):
            s.text(x, yx - 6, "P3", size=14, weight="bold")
            s.text(x, yx + 12, "power disable", size=11)
        s.line(170, yx, 446, yx, "#555", 2)
        for x in (450, 470, 490):
            s.circle(x, yx)
        s.line(454, yx, 466, yx, "#555", 1)  # the shunt on 1-2, the default
        s.line(470, yx + 4, 470, yx + 22, "#555", 2)
        s.line(470, yx + 22, 830, yx + 22, "#555", 2)
        s.line(494, yx, 515, yx, "#555", 2)
        s.rect(515, yx - 4, 30, 8)
        s.line(545, yx, 570, yx)
        s.ground(570, yx + 8)
        s.text(200, yx - 8, f"{jp.ref}: 1-2 (default) passes the PSU's P3; 2-3 holds the drive's P3 low "
               f"through {rp.ref} {rp.value} (drive runs)", size=11)
        s.text(542, yx + 42, "never driven by the controller", size=11)
    else:
        npass = len(board["pass_pins"])
        s.line(170, yx, 830, yx, "#888", 5)
        for x in (30, 840):
            s.text(x, yx - 6, "PCIe", size=14, weight="bold")
            s.text(x, yx + 16, "signals", size=11)
        s.text(200, yx - 8, f"PCIe x4, REFCLK, PERST#, CLKREQ#, SMBus: {npass} pins straight through, "
               "pin n to pin n", size=11)
        if board["open_pins"]:
            s.text(200, yx + 22, "not passed (would bypass the switches): "
                   + ", ".join(board["open_pins"]), size=11)
    yc = top + box_h + 20
    s.rect(20, yc, 940, ctrl_h, fill="#eaf6ea")
    nano = next(p for p in parts_ if p.fields.get("catalogue") == "NANO")
    s.text(30, yc + 20, f"{nano.ref} Arduino Nano (ATmega328P), firmware plugpull_switch; USB serial to "
           "the host running plugpull campaign", size=12, weight="bold")
    ens = ", ".join(f"EN{ch} = {interposers.CHANNEL_PINS[ch][0]}" for ch, _ in rails)
    adcs = ", ".join(f"SENSE{ch} = {interposers.CHANNEL_PINS[ch][1]}" for ch, _ in rails)
    s.text(30, yc + 42, f"{ens} (hardware PWM): HIGH = rail on, LOW = cut, PWM = RAMP", size=12)
    s.text(30, yc + 62, f"{adcs} (ADC, AVCC reference): drive-side rail through the divider",
           size=12)
    s.text(30, yc + 82, "5 V: pull-ups keep every rail ON while the board resets; GND common "
           "with the supply's ground", size=12)
    return s.svg(W, h, board["title"])


def catalogue_name(key):
    return parts.CATALOGUE[key][2]
