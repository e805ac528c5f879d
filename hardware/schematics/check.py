#!/usr/bin/env python3
"""Builds the interposer schematics, checks them, and regenerates their drawings and BOMs.

    python3 check.py            # check: ERC, structure, drawings as pictures, files current
    python3 check.py --write    # regenerate hardware/wiring/*.svg and hardware/bom/*-interposer.md
    python3 check.py --self-test  # break things on purpose; every check must notice

Why these checks (tests/integration/hardware_schematics.rs runs them in `cargo test`):
- SKiDL's electrical rules check (ERC) on each board; any error or warning fails. With
  the pin types of parts.py it finds unconnected pins, two sources driving one power
  net, a drive-side rail that no switch powers, and pins left open by mistake.
- structure: every switched rail has its fuse, P-MOSFET switch, driver, TVS and sense
  divider on the right nets, its enable on the controller's PWM pin and its sense on the
  ADC pin of interposers.CHANNEL_PINS (the firmware uses the same map).
- drawings as pictures: each SVG is rendered headless (cairosvg); every label is rendered
  alone to find its real ink box; no two label boxes may overlap, no label box may hold a
  line or symbol, every label must lie inside the picture, and every rail must appear by
  name on both connectors with its SENSE and EN labels.
- the committed drawings and BOMs must equal what the code generates now.
"""

import argparse
import atexit
import builtins
import copy
import io
import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
HW = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# SKiDL writes log and ERC files into the working directory from import on: keep them out
# of the source tree.
_WORK = tempfile.mkdtemp(prefix="plugpull-schem-")
atexit.register(shutil.rmtree, _WORK, True)
os.chdir(_WORK)

import skidl  # noqa: E402,F401  (sets up SKiDL's default circuit)
from skidl import ERC, erc_logger  # noqa: E402

import bom  # noqa: E402
import draw  # noqa: E402
import interposers  # noqa: E402

SVG_NS = "http://www.w3.org/2000/svg"
ET.register_namespace("", SVG_NS)


def circuit():
    return builtins.default_circuit


def run_erc():
    """SKiDL's ERC on the current circuit; returns (errors, warnings)."""
    ERC()  # resets the logger's counters first
    return erc_logger.error.count, erc_logger.warning.count


def _net_of(part, pin):
    nets = part[pin].nets
    return nets[0].name if nets else None


def check_structure(board):
    """The topology every switched rail must have; returns a list of problems."""
    probs = []
    parts_ = circuit().parts
    used_pins = set()
    for ch, rail in board["rails"]:
        by = {p.fields["role"]: p for p in parts_ if p.fields.get("rail") == rail}
        need = ["fuse", "switch", "driver", "r_gs", "r_g", "pullup", "c_ss", "d_ss", "tvs",
                "r_top", "r_bot", "c_f"]
        missing = [r for r in need if r not in by]
        if missing:
            probs.append(f"{board['name']} {rail}: missing {', '.join(missing)}")
            continue
        en_pin, adc_pin = interposers.CHANNEL_PINS[ch]
        nano = board["nano"]
        expect = [
            (by["fuse"], "IN", f"{rail}_IN"), (by["fuse"], "OUT", f"{rail}_F"),
            (by["switch"], "S", f"{rail}_F"), (by["switch"], "D", f"{rail}_OUT"),
            (by["switch"], "G", f"{rail}_GATE"), (by["driver"], "G", f"EN{ch}"),
            (by["driver"], "S", "GND"), (by["tvs"], "K", f"{rail}_OUT"), (by["tvs"], "A", "GND"),
            (by["r_top"], "1", f"{rail}_OUT"), (by["r_top"], "2", f"SENSE{ch}"),
            (by["r_bot"], "2", "GND"), (nano, en_pin, f"EN{ch}"), (nano, adc_pin, f"SENSE{ch}"),
        ]
        for part, pin, net in expect:
            got = _net_of(part, pin)
            if got != net:
                probs.append(f"{board['name']} {rail}: {part.ref}.{pin} on {got}, expected {net}")
        # the drive side of this rail is fed by the switch only
        out_pins = [pin for pin in board["j_out"].pins if pin.name.endswith("_" + rail)]
        if not out_pins or any(_net_of(board["j_out"], pin.num) != f"{rail}_OUT" for pin in out_pins):
            probs.append(f"{board['name']} {rail}: drive-side pins not all on {rail}_OUT")
        for pin in (en_pin, adc_pin):
            if pin in used_pins:
                probs.append(f"{board['name']}: controller pin {pin} used twice")
            used_pins.add(pin)
    return probs


def _render(svg_bytes):
    import cairosvg
    from PIL import Image
    png = cairosvg.svg2png(bytestring=svg_bytes)
    return Image.open(io.BytesIO(png)).convert("RGBA")


def _tag(el):
    return el.tag.split("}")[-1]


def check_drawing(svg_text, board):
    """Checks a drawing as a picture; returns a list of problems."""
    probs = []
    root = ET.fromstring(svg_text)
    w, h = int(root.get("width")), int(root.get("height"))
    texts = [el for el in root if _tag(el) == "text"]
    # shapes alone (no texts, no white background), to find lines under labels
    shapes = copy.deepcopy(root)
    for el in list(shapes):
        if _tag(el) == "text" or (_tag(el) == "rect" and el.get("x") == "0" and el.get("y") == "0"):
            shapes.remove(el)
    img = _render(ET.tostring(shapes))
    px = img.load()
    boxes = []
    for i, t in enumerate(texts):
        alone = copy.deepcopy(root)
        for el in list(alone):
            if _tag(el) != "title":
                alone.remove(el)
        alone.append(copy.deepcopy(t))
        bbox = _render(ET.tostring(alone)).getchannel("A").getbbox()
        label = t.text or ""
        if bbox is None:
            probs.append(f"label {label!r} renders to nothing")
            continue
        x0, y0, x1, y1 = bbox
        if x0 <= 0 or y0 <= 0 or x1 >= w or y1 >= h:
            probs.append(f"label {label!r} leaves the picture")
        hits = 0
        for x in range(x0, x1):
            for y in range(y0, y1):
                r, g, b, a = px[x, y]
                if a > 128 and min(r, g, b) < 160:
                    hits += 1
        if hits:
            probs.append(f"label {label!r} at {bbox} lies on a line or symbol ({hits} px)")
        boxes.append((label, bbox))
    for i, (la, a) in enumerate(boxes):
        for lb, b in boxes[i + 1:]:
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                probs.append(f"labels {la!r} {a} and {lb!r} {b} overlap")
    labels = [lab for lab, _ in boxes]
    for ch, rail in board["rails"]:
        name = interposers.RAILS[rail]["label"]
        if labels.count(name) < 2:
            probs.append(f"rail {name} not labelled on both connectors")
        for want in (f"SENSE{ch}", f"EN{ch}"):
            if not any(want in lab for lab in labels):
                probs.append(f"rail {name}: no {want} label")
    return probs


def build_all():
    """Builds each board; returns {name: (board, erc, structure problems, svg, bom)}."""
    out = {}
    for name in interposers.BOARDS:
        board = interposers.build(name)
        erc = run_erc()
        probs = check_structure(board)
        svg = draw.draw(board, circuit().parts)
        md = bom.bom(board, circuit().parts)
        out[name] = (board, erc, probs, svg, md)
    return out


def paths(name):
    return (os.path.join(HW, "wiring", f"{name}-interposer.svg"),
            os.path.join(HW, "bom", f"{name}-interposer.md"))


def main_check(write):
    failed = 0
    for name, (board, (errs, warns), probs, svg, md) in build_all().items():
        svg_path, bom_path = paths(name)
        if write:
            with open(svg_path, "w") as f:
                f.write(svg)
            with open(bom_path, "w") as f:
                f.write(md)
        problems = list(probs)
        if errs or warns:
            problems.append(f"ERC: {errs} errors, {warns} warnings")
        for path, want in ((svg_path, svg), (bom_path, md)):
            have = open(path).read() if os.path.exists(path) else None
            if have != want:
                problems.append(f"{os.path.relpath(path, HW)} is not what the code generates "
                                "(run: python3 hardware/schematics/check.py --write)")
        problems += check_drawing(svg, board)
        status = "ok" if not problems else "FAILED"
        print(f"{name}: {len(board['rails'])} rails, ERC {errs} errors {warns} warnings, "
              f"drawing and BOM checked: {status}")
        for p in problems:
            print(f"  {p}")
        failed += bool(problems)
    print(f"{len(interposers.BOARDS) - failed} passed, {failed} failed")
    return 1 if failed else 0


def self_test():
    """Each check must fail on a broken input; returns 0 when every fault was caught."""
    caught, missed = 0, []

    def expect(what, problems):
        nonlocal caught
        if problems:
            caught += 1
            print(f"caught: {what}: {problems[0]}")
        else:
            missed.append(what)
            print(f"MISSED: {what}")

    # 1. ERC: a sense pin left unconnected, a rail powered by two sources.
    board = interposers.build("m2")
    by = {p.fields["role"]: p for p in circuit().parts if p.fields.get("rail") == "3V3_M2"}
    by["r_top"][2].disconnect()
    e, w = run_erc()
    expect("ERC, sense divider pin left open", [f"{e} errors, {w} warnings"] if e or w else [])
    board = interposers.build("u2")
    by = {p.fields["role"]: p for p in circuit().parts if p.fields.get("rail") == "12V"}
    other = {p.fields["role"]: p for p in circuit().parts if p.fields.get("rail") == "3V3AUX"}
    # 3.3 V aux's switch drain also onto the 12 V drive rail: two drivers on one power net
    by["switch"]["D"] += other["switch"]["D"]
    e, w = run_erc()
    expect("ERC, two switches driving one rail", [f"{e} errors, {w} warnings"] if e else [])
    # 2. structure: sense on the wrong ADC pin.
    board = interposers.build("sata")
    old = interposers.CHANNEL_PINS[1]
    interposers.CHANNEL_PINS[1] = (old[0], "A2")
    try:
        expect("structure, sense on the wrong ADC pin", check_structure(board))
    finally:
        interposers.CHANNEL_PINS[1] = old
    # 3. drawing: an overlapping label, a label on a line, a missing rail.
    board = interposers.build("sata")
    svg = draw.draw(board, circuit().parts)
    clean = check_drawing(svg, board)
    if clean:
        missed.append(f"drawing, the clean drawing fails: {clean[0]}")
    print(f"clean drawing: {'FAILED' if clean else 'passes'}")
    bad = svg.replace("</svg>", '<text x="200" y="156" font-size="11">R1 4.7k</text>\n</svg>')
    expect("drawing, overlapping labels", check_drawing(bad, board))
    bad = svg.replace("</svg>", '<text x="600" y="124" font-size="11">on the wire</text>\n</svg>')
    expect("drawing, label across a rail line", check_drawing(bad, board))
    bad = svg.replace(">3.3 V</text>", ">3V</text>")
    expect("drawing, 3.3 V rail missing", check_drawing(bad, board))
    print(f"{caught} passed, {len(missed)} failed")
    return 1 if missed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate the drawings and BOMs")
    ap.add_argument("--self-test", action="store_true", help="check that the checks fail")
    args = ap.parse_args()
    sys.exit(self_test() if args.self_test else main_check(args.write))
