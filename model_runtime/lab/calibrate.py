"""``python -m model_runtime calibrate``: fit a weights file's stiffness law for free solids to the continuum.

The elastic energy is a spring network over decoded query points, calibrated to Young's modulus for uniform
strain. Bending through the decoder's latent space locks: its bending deformations carry a little spurious axial
strain, which for a slender body costs as much as the bending itself. A pinned solid's stiffness is matched to its
own linear elastic compliance body by body (body._continuum_factor); a free solid has no static equilibrium to
match, so it takes a law in its slenderness, min(1, c s2^p) (s2 = (thickness / length)^2, see
body._locking_factor). c and p depend on how cleanly the trained decoder bends, so they are fitted per weights
file to the continuum factors of bodies from slender to stubby under transverse load: clamped cantilevers (L/a
4-15) and blocks clamped at one end (length/side 1-3). The cantilevers' settled tip sags
are then reported against Euler-Bernoulli, 3 rho g L^4 / (2 E a^2), as a check.
"""

import numpy as np
import torch

from ..body import bending_shape, build_body
from ..mesh import validate
from ..params import make_params
from ..simulator import Simulator
from ..weights import default_weights_path, load_model, read_info, save_model
from .data.shapes import box_surface, cantilever_box

RHO, G = 1000.0, 9.81
# (length, side, Young's modulus, cells): slender to stubby (L/a 4..15) so the slenderness law is fitted, not
# assumed; E keeps Euler-Bernoulli sags at 4-15% of L (small-deflection theory holds; at L/a = 4 shear adds ~2%).
CANTILEVERS = [(1.0, 0.1, 1e7, (20, 2, 2)), (1.0, 0.1, 3e7, (20, 2, 2)), (0.6, 0.06, 1e7, (20, 2, 2)),
               (1.5, 0.1, 5e7, (30, 2, 2)), (0.6, 0.1, 3e6, (12, 2, 2)), (0.4, 0.1, 1e6, (12, 3, 3))]
BLOCKS = [1.0, 2.0, 3.0]  # length / side of 0.2 m blocks clamped at one end under transverse gravity
COLUMNS = [((0.5, 0.5, 0.5), 5e4), ((0.3, 0.3, 0.9), 1e5), ((0.6, 0.6, 0.3), 2e4)]


def _cantilever(length, side, young, cells):
    v, f = cantilever_box((length, side, side), cells)
    pins = np.nonzero(v[:, 0] <= 1e-9)[0]
    p = make_params(frames=72, fps=24, num_vertices=len(v), material="elastic_beam", stiffness=young,
                    density=RHO, drag=3.0, pins=pins)
    return v, f, p


def continuum_factors(sim: Simulator) -> list[dict]:
    """Each calibration body's squared slenderness (as a free body) and the stiffness factor that gives it the
    continuum's compliance when pinned."""
    bodies = [(f"cantilever L {length} m, a {side} m", *_cantilever(length, side, young, cells))
              for length, side, young, cells in CANTILEVERS]
    for aspect in BLOCKS:
        length = 0.2 * aspect
        bodies.append((f"block {aspect:g}:1 pinned at one end",
                       *_cantilever(length, 0.2, 1e6, (round(3 * aspect), 3, 3))))
    rows = []
    for name, v, f, p in bodies:
        enc = sim.encode(validate(v, f), p.pins, p.gravity)
        s2, _ = bending_shape(torch.as_tensor(enc.surface_queries))  # as a free body
        rows.append({"body": name, "slenderness2": s2, "factor": build_body(enc, p, sim.coeff, None).stiffness_factor})
    return rows


def cantilever_ratios(sim: Simulator, cases=CANTILEVERS) -> list[dict]:
    """Settled tip sag of each cantilever against beam theory (heavy drag settles them within 3 s)."""
    rows = []
    for length, side, young, cells in cases:
        v, f, p = _cantilever(length, side, young, cells)
        out = sim.simulate(v, f, p)
        tip = v[:, 0] >= length - 1e-9
        sag = float(-(out[-12:, tip, 2] - v[tip, 2]).mean())
        theory = 3 * RHO * G * length**4 / (2 * young * side**2)
        rows.append({"length": length, "side": side, "young": young, "sag": sag, "theory": theory,
                     "ratio": sag / theory})
    return rows


def column_ratios(sim: Simulator) -> list[dict]:
    """Columns clamped at the base, shortening under their own weight, against rho g h^2 / (2 E) (a check of the
    axial response; the formula ignores Poisson and the base clamp)."""
    rows = []
    for size, young in COLUMNS:
        v, f = box_surface(tuple(max(2, round(s / 0.05)) for s in size), size)
        v = v + [0.0, 0.0, size[2] / 2]
        pins = np.nonzero(v[:, 2] <= 1e-9)[0]
        p = make_params(frames=72, fps=24, num_vertices=len(v), material="jelly", stiffness=young, density=RHO,
                        drag=4.0, pins=pins)
        out = sim.simulate(v, f, p)
        top = v[:, 2] >= size[2] - 1e-9
        drop = float(-(out[-12:, top, 2] - v[top, 2]).mean())
        theory = RHO * G * size[2] ** 2 / (2 * young)
        rows.append({"size": size, "young": young, "drop": drop, "theory": theory, "ratio": drop / theory})
    return rows


def calibrate(weights: str | None = None) -> tuple[dict, list[dict]]:
    """Fit the law; returns (calibration, the cantilevers' factors) and writes it into the file."""
    path = weights or default_weights_path()
    model = load_model(path)
    rows = continuum_factors(Simulator(path))
    p, log_c = np.polyfit(np.log([r["slenderness2"] for r in rows]), np.log([r["factor"] for r in rows]), 1)
    model.calibration = {"locking": {"coefficient": float(np.exp(log_c)), "exponent": float(p)}}
    save_model(model, path, read_info(path) or None)
    return model.calibration, rows


def run_cli(args) -> int:
    calibration, rows = calibrate(args.weights)
    law = calibration["locking"]
    print("| body | s2 | continuum factor | law |\n|---|---|---|---|")
    for r in rows:
        fit = law["coefficient"] * r["slenderness2"] ** law["exponent"]
        print(f"| {r['body']} | {r['slenderness2']:.4f} | {r['factor']:.4f} | {fit:.4f} |")
    print(f"calibration {calibration} written to {args.weights or 'the shipped weights'}")
    sim = Simulator(args.weights)
    print("\nCheck, not fitted: settled tip sag of the (pinned, continuum-matched) cantilevers\n")
    print("| L (m) | a (m) | E (Pa) | theory sag (m) | sag | ratio |\n|---|---|---|---|---|---|")
    for r in cantilever_ratios(sim):
        print(f"| {r['length']} | {r['side']} | {r['young']:.0e} | {r['theory']:.4f} | {r['sag']:.4f} | "
              f"{r['ratio']:.3f} |")
    print("\nCheck, not fitted: columns under their own weight\n")
    print("| size (m) | E (Pa) | theory drop (m) | drop | ratio |\n|---|---|---|---|---|")
    for r in column_ratios(sim):
        print(f"| {r['size']} | {r['young']:.0e} | {r['theory']:.4f} | {r['drop']:.4f} | {r['ratio']:.2f} |")
    return 0
