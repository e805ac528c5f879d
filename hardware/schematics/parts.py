"""Part templates and catalogue data for the interposer schematics.

Why our own templates instead of KiCad's symbol libraries: SKiDL can read KiCad
libraries, but Debian's kicad-symbols is a large install and SKiDL then depends on its
exact version. The interposers use a dozen parts; declaring their pins here (with the
electrical type of each pin, which is what the electrical rules check reasons about)
keeps the check offline and the dependency small (SKiDL only).

Pin-type conventions, so the ERC checks the power path:
- a pin that passes power on (fuse output, MOSFET drain) is POWER-OUT, the pin that takes
  it (fuse input, MOSFET source, the drive connector's supply pins) is POWER-IN: every
  switched rail must then be driven by exactly one switch, and an unpowered rail is an
  error ("insufficient drive");
- the PSU-side connector's pins are PASSIVE and its nets are marked as driven from outside
  (net.drive = POWER, KiCad's PWR_FLAG), because the power comes from the host's supply.

Catalogue fields: manufacturer, MPN, a distributor number where we know one, and an
estimated unit price in EUR for small quantities: an estimate, not a quote (no
distributor price was looked up; PRICE_NOTE says so in every BOM). "price_eur" is what
the BOMs add up.
"""

from skidl import SKIDL, TEMPLATE, Part, Pin

PRICE_NOTE = (
    "Prices: estimates in EUR for 1-10 pieces, not quotes: no distributor's price was "
    "looked up for these lines (no source is recorded), and the connector and PCB lines "
    "are placeholders. Check a distributor before ordering."
)

P = Pin.types


def _tmpl(name, prefix, pins, **kw):
    return Part(
        name=name,
        tool=SKIDL,
        dest=TEMPLATE,
        ref_prefix=prefix,
        pins=[Pin(num=str(n), name=nm, func=f) for n, nm, f in pins],
        **kw,
    )


RESISTOR = _tmpl("R", "R", [(1, "1", P.PASSIVE), (2, "2", P.PASSIVE)])
CAPACITOR = _tmpl("C", "C", [(1, "1", P.PASSIVE), (2, "2", P.PASSIVE)])
# A diode: anode, cathode (TVS diodes and the soft-start Schottky).
DIODE = _tmpl("D", "D", [(1, "A", P.PASSIVE), (2, "K", P.PASSIVE)])
FUSE = _tmpl("F", "F", [(1, "IN", P.PWRIN), (2, "OUT", P.PWROUT)])
PMOS = _tmpl("PMOS", "Q", [(1, "G", P.INPUT), (2, "S", P.PWRIN), (3, "D", P.PWROUT)])
NMOS = _tmpl("NMOS", "Q", [(1, "G", P.INPUT), (2, "S", P.PASSIVE), (3, "D", P.PASSIVE)])
JUMPER3 = _tmpl("JUMPER3", "JP", [(1, "1", P.PASSIVE), (2, "2", P.PASSIVE), (3, "3", P.PASSIVE)])


def connector(name, pins):
    """A connector template; pins = [(number, name, type)]."""
    return _tmpl(name, "J", pins)


# Arduino Nano (ATmega328P): only the pins an interposer uses. D3, D9 and D10 are the
# enable outputs because they are hardware PWM pins (Timer2, Timer1), which RAMP needs;
# Timer0's pins (D5, D6) are left to millis(). A0-A2 sample the drive-side rails.
NANO = _tmpl(
    "ARDUINO_NANO",
    "A",
    [
        ("D9", "D9", P.OUTPUT),
        ("D10", "D10", P.OUTPUT),
        ("D3", "D3", P.OUTPUT),
        ("A0", "A0", P.INPUT),
        ("A1", "A1", P.INPUT),
        ("A2", "A2", P.INPUT),
        ("5V", "5V", P.PWROUT),
        ("GND", "GND", P.PWRIN),
    ],
)

# Catalogue: key -> (description, manufacturer, MPN, distributor number or "", EUR).
CATALOGUE = {
    "AOD4185": ("P-MOSFET -40 V, -40 A, <20 mOhm at Vgs -4.5 V, Vgs +-20 V, DPAK",
                "Alpha & Omega", "AOD4185", "", 0.90),
    "CSD25402Q3A": ("P-MOSFET -20 V, 13.3 mOhm at Vgs -2.5 V, Vgs +-12 V, SON 3.3x3.3",
                    "Texas Instruments", "CSD25402Q3A", "", 0.70),
    "2N7002": ("N-MOSFET 60 V, 0.3 A, SOT-23 (gate driver)",
               "Nexperia", "2N7002,215", "", 0.10),
    "BAT54": ("Schottky 30 V, 0.2 A, SOT-23 (soft-start steering)",
              "Nexperia", "BAT54,215", "", 0.10),
    "SMBJ15A": ("TVS 15 V standoff, 600 W, SMB", "Littelfuse", "SMBJ15A", "", 0.35),
    "SMBJ6.0A": ("TVS 6.0 V standoff, 600 W, SMB", "Littelfuse", "SMBJ6.0A", "", 0.35),
    "SMBJ5.0A": ("TVS 5.0 V standoff (lowest of the series; clamps 3.3 V rails above ~6.4 V), SMB",
                 "Littelfuse", "SMBJ5.0A", "", 0.35),
    "FUSE2A": ("fuse 2 A fast, 125 V, SMD 2410 (NANO2 451)", "Littelfuse", "0451002.MRL", "", 0.90),
    "FUSE3A": ("fuse 3 A fast, 125 V, SMD 2410 (NANO2 451)", "Littelfuse", "0451003.MRL", "", 0.90),
    "FUSE4A": ("fuse 4 A fast, 125 V, SMD 2410 (NANO2 451)", "Littelfuse", "0451004.MRL", "", 0.90),
    "FUSE1A": ("fuse 1 A fast, 125 V, SMD 2410 (NANO2 451)", "Littelfuse", "0451001.MRL", "", 0.90),
    "R100k": ("resistor 100 kOhm 1% 0603", "Yageo", "RC0603FR-07100KL", "", 0.02),
    "R30k": ("resistor 30 kOhm 1% 0603", "Yageo", "RC0603FR-0730KL", "", 0.02),
    "R10k": ("resistor 10 kOhm 1% 0603", "Yageo", "RC0603FR-0710KL", "", 0.02),
    "R4.7k": ("resistor 4.7 kOhm 1% 0603", "Yageo", "RC0603FR-074K7L", "", 0.02),
    "R1k": ("resistor 1 kOhm 1% 0603", "Yageo", "RC0603FR-071KL", "", 0.02),
    "R1M": ("resistor 1 MOhm 1% 0603", "Yageo", "RC0603FR-071ML", "", 0.02),
    "C100n": ("capacitor 100 nF 50 V X7R 0603", "Murata", "GRM188R71H104KA93D", "", 0.05),
    "C10n": ("capacitor 10 nF 50 V X7R 0603", "Murata", "GRM188R71H103KA01D", "", 0.05),
    "C1n": ("capacitor 1 nF 50 V X7R 0603", "Murata", "GRM188R71H102KA01D", "", 0.05),
    "NANO": ("Arduino Nano (ATmega328P, USB serial); clones work", "Arduino", "A000005", "", 22.00),
    "HDR3": ("pin header 1x3 2.54 mm + jumper (P3 select)", "Amphenol ICC", "68000-103HLF", "", 0.20),
    "SATA_CABLE": ("SATA power extension cable, 15-pin male-female, ~30 cm: cut in two, "
                   "its leads soldered to the board's pads (J1 PSU end, J2 drive end)",
                   "generic", "(any)", "", 3.00),
    "M2_SOCKET": ("M.2 socket, key M, 4.2 mm (drive side; the same MPN is in public KiCad "
                  "designs, e.g. github.com/m1geo/Pi5_PCIe)", "Amphenol ICC", "MDT420M03001", "",
                  2.50),
    "M2_EDGE": ("M.2 key M edge fingers on the interposer PCB (host side; part of the board, "
                "2280 outline, 0.8 mm ENIG board)", "PCB", "(board)", "", 0.00),
    "U2_PLUG": ("SFF-8639 (U.2) 68-position plug, J1 at the host/backplane side: a plug, "
                "because the bay's receptacle takes a drive's plug (SFF-8639 abstract); "
                "board edge, right-angle. No MPN verified (hardware/schematics/README.md, "
                "U.2 connector parts): choose one and check its contact numbering against "
                "hardware/schematics/u2-pins.tsv",
                "(not chosen)", "(not chosen)", "", 6.00),
    "U2_RECEPT": ("SFF-8639 (U.2) 68-position receptacle, J2 at the drive side: the drive's "
                  "plug goes in; board edge, right-angle. No MPN verified: choose as above",
                  "(not chosen)", "(not chosen)", "", 6.00),
    "PCB2": ("2-layer PCB, ~100 x 70 mm, 1.6 mm, small-batch price per board",
             "any PCB maker", "(board)", "", 5.00),
    "PCB4": ("4-layer PCB with impedance control (85 Ohm differential pairs for PCIe), "
             "small-batch price per board", "any PCB maker", "(board)", "", 15.00),
}
