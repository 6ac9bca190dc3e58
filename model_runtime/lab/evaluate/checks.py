"""Physics checks of the simulator on a pinned cloth strip and a pinned soft box: energy drift without
drag or damping, pin error, and that more drag, gravity and stiffness move the body the way physics says."""

import time

import numpy as np

from ... import mesh as meshlib
from ...params import SimParams, make_params
from ...simulator import continuum_path, turned
from ..data import shapes
from .metrics import pin_error

SETTLE_DRAG = 4.0  # 1/s: settles a swing to a few percent within the 2 s of a sag check


def check_bodies() -> dict:
    sv, sf = shapes.grid_sheet(21, 5, 1.0, 0.2)  # cloth strip along x, pinned at x = min
    bv, bf = shapes.box_surface((12, 3, 3), (0.6, 0.12, 0.12))  # soft cantilever
    return {"cloth_strip": (sv, sf, "cloth"), "soft_box": (bv, bf, "jelly")}


def run_states(sim, vertices, faces, p: SimParams) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Positions (T+1, V, 3) and the kinetic, elastic and gravitational energy (J) per frame, through the path the
    simulator takes for this body."""
    mesh = meshlib.validate(vertices, faces)
    path = continuum_path(mesh, p)
    built, local, axes = sim.built(path, mesh, p)
    local_params = turned(p, axes)
    X, Xd = path.integrate(built, local_params)
    positions = path.positions(built, local, p.pins, X) @ axes.T.astype(np.float32)
    return positions, path.energies(built, local_params, X, Xd)


def physics_checks(sim, seconds: float = 5.0, fps: float = 24.0, check_seconds: float = 2.0) -> dict:
    return {name: check_body(sim, v, f, material, seconds, fps, check_seconds)
            for name, (v, f, material) in check_bodies().items()}


def check_body(sim, v: np.ndarray, f: np.ndarray, material: str, seconds: float = 5.0, fps: float = 24.0,
               check_seconds: float = 2.0) -> dict:
    """Energy drift, pin error and the three monotonicity checks for one body pinned at its x = min end."""
    pins = np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0]
    diag = meshlib.bbox_diagonal(v)

    def params(**kw):
        base = dict(frames=int(round(check_seconds * fps)), fps=fps, material=material, pins=pins,
                    num_vertices=len(v))
        return make_params(**{**base, **kw})

    def sag_and_kinetic(p):
        x, e = run_states(sim, v, f, p)
        settled = x[-max(1, len(x) // 4):]
        return float((x[0, :, 2] - settled[:, :, 2]).mean()), float(e["kinetic"][1:].mean())

    t0 = time.time()
    pos, energy = run_states(sim, v, f, params(frames=int(round(seconds * fps)), drag=0.0, damping=0.0))
    total = energy["kinetic"] + energy["elastic"] + energy["gravitational"]
    kinetic = energy["kinetic"]
    scale = max(float(kinetic.max()), 1e-12)
    res = {"vertices": len(v), "material": material, "seconds_simulated": seconds,
           "energy_drift": float(np.abs(total - total[0]).max() / scale),
           "energy_drift_final": float(abs(total[-1] - total[0]) / scale),
           "max_kinetic_J": float(kinetic.max()), "pin_error": pin_error(pos, pins, diag),
           "energy_curve": [float(x) for x in total]}
    drags = [0.0, 1.0, 4.0]
    ke = [sag_and_kinetic(params(drag=d))[1] for d in drags]
    gravities = [2.0, 9.81, 20.0]
    sg = [sag_and_kinetic(params(gravity=(0, 0, -g), drag=SETTLE_DRAG))[0] for g in gravities]
    base_e = params().stiffness
    stiff = [base_e, 4 * base_e, 16 * base_e]
    ss = [sag_and_kinetic(params(stiffness=e, drag=SETTLE_DRAG))[0] for e in stiff]
    res["drag"] = {"values_per_s": drags, "mean_kinetic_J": ke,
                   "monotonic": bool(all(a > b for a, b in zip(ke, ke[1:])))}
    res["gravity"] = {"values_m_s2": gravities, "sag_m": sg,
                      "monotonic": bool(all(a < b for a, b in zip(sg, sg[1:])))}
    res["stiffness"] = {"values_pa": stiff, "sag_m": ss,
                        "monotonic": bool(all(a > b for a, b in zip(ss, ss[1:])))}
    res["seconds"] = time.time() - t0
    return res
