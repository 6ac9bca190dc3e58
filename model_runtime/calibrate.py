"""``python -m model_runtime calibrate``: fit a weights file's locking correction for solids to beam theory.

The elastic energy is a spring network over decoded query points, calibrated to Young's modulus for uniform
strain. Bending through the decoder's latent space locks: its bending deformations carry a little spurious axial
strain, which for a slender body costs as much as the bending itself. The simulator scales a solid's stiffness by
min(1, c s2^p) under transverse load (s2 = (thickness / length)^2, see simulator._effective_stiffness); c and p
depend on how clean the trained decoder is, so they are measured per weights file: clamped cantilevers from
slender to stubby settle under gravity, their tip sag is compared with Euler-Bernoulli, 3 rho g L^4 / (2 E a^2),
p and c are fitted to the ratios and c is refined by the median ratio.
"""

import numpy as np
import torch

from .mesh import validate
from .params import make_params
from .simulator import Simulator, bending_shape
from .weights import default_weights_path, load_model, read_info, save_model

RHO, G = 1000.0, 9.81
ITERATIONS = 2
# (length, side, Young's modulus, cells): slender to stubby (L/a 4..15) so the slenderness law is fitted, not
# assumed; E keeps Euler-Bernoulli sags at 4-15% of L (small-deflection theory holds; at L/a = 4 shear adds ~2%).
CANTILEVERS = [(1.0, 0.1, 1e7, (20, 2, 2)), (1.0, 0.1, 3e7, (20, 2, 2)), (0.6, 0.06, 1e7, (20, 2, 2)),
               (1.5, 0.1, 5e7, (30, 2, 2)), (0.6, 0.1, 3e6, (12, 2, 2)), (0.4, 0.1, 1e6, (12, 3, 3))]
COLUMNS = [((0.5, 0.5, 0.5), 5e4), ((0.3, 0.3, 0.9), 1e5), ((0.6, 0.6, 0.3), 2e4)]


def cantilever_ratios(sim: Simulator, cases=CANTILEVERS) -> list[dict]:
    """Settled tip sag of each cantilever against beam theory (heavy drag settles them within 3 s)."""
    from .data.validate import box_mesh

    rows = []
    for length, side, young, cells in cases:
        v, f = box_mesh((length, side, side), cells)
        pins = np.nonzero(v[:, 0] <= 1e-9)[0]
        p = make_params(frames=72, fps=24, num_vertices=len(v), material="elastic_beam", stiffness=young,
                        density=RHO, drag=3.0, pins=pins)
        out = sim.simulate(v, f, p)
        tip = v[:, 0] >= length - 1e-9
        sag = float(-(out[-12:, tip, 2] - v[tip, 2]).mean())
        theory = 3 * RHO * G * length**4 / (2 * young * side**2)
        enc = sim.encode(validate(v, f), p.pins)
        s2, _ = bending_shape(torch.as_tensor(enc.queries), enc.lever)
        rows.append({"length": length, "side": side, "young": young, "sag": sag, "theory": theory,
                     "ratio": sag / theory, "slenderness2": s2})
    return rows


def column_ratios(sim: Simulator) -> list[dict]:
    """Columns clamped at the base, shortening under their own weight, against rho g h^2 / (2 E) (a check of the
    axial response, which the correction must leave alone; the formula ignores Poisson and the base clamp)."""
    from .data.shapes import box_surface

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


def calibrate(weights: str | None = None) -> tuple[dict, list[dict], list[dict]]:
    """Fit the correction; returns (calibration, rows without it, rows with it) and writes it into the file."""
    path = weights or default_weights_path()
    model = load_model(path)
    sim = Simulator(path)
    sim.locking = None
    before = cantilever_ratios(sim)
    # Sag is ~1/E, so each uncorrected ratio is the stiffness scale that beam needs: fit scale = c s2^p to them.
    p, log_c = np.polyfit(np.log([r["slenderness2"] for r in before]), np.log([r["ratio"] for r in before]), 1)
    sim.locking = {"coefficient": float(np.exp(log_c)), "exponent": float(p)}
    for _ in range(ITERATIONS):  # large bends respond less than linearly: a few fixed-point steps on c
        after = cantilever_ratios(sim)
        sim.locking["coefficient"] *= float(np.median([r["ratio"] for r in after]))
    after = cantilever_ratios(sim)
    model.calibration = {"locking": sim.locking}
    save_model(model, path, read_info(path) or None)
    return model.calibration, before, after


def run_cli(args) -> int:
    calibration, before, after = calibrate(args.weights)
    print("| L (m) | a (m) | E (Pa) | theory sag (m) | sag before | ratio | sag after | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for b, a in zip(before, after):
        print(f"| {b['length']} | {b['side']} | {b['young']:.0e} | {b['theory']:.4f} | {b['sag']:.4f} | "
              f"{b['ratio']:.3f} | {a['sag']:.4f} | {a['ratio']:.3f} |")
    print(f"calibration {calibration} written to {args.weights or 'the shipped weights'}")
    print("\nCheck, not fitted: columns under their own weight\n")
    print("| size (m) | E (Pa) | theory drop (m) | drop | ratio |\n|---|---|---|---|---|")
    for r in column_ratios(Simulator(args.weights)):
        print(f"| {r['size']} | {r['young']:.0e} | {r['theory']:.4f} | {r['drop']:.4f} | {r['ratio']:.2f} |")
    return 0
