"""Static lean of base-pinned blocks under sideways gravity: the learned model against the validated reference.

    .venv/bin/python benchmarks/stubby_lean.py --aspects 1 2 4

A square block of side a = 0.2 m and height aspect x a is pinned over its base, its Young's modulus set for a
nominal self-weight strain rho g h / E, and gravity turned sideways; drag settles it over 3 s. Printed: the top
face's mean sideways displacement in the reference (``simulate_reference``, the settings validated against beam
theory in docs/physics-validation.md), in the model, and in the linear elasticity the model's stiffness is matched
to (``model_runtime.lab.statics``, for pinned solids), with Euler-Bernoulli's q L^4 / 8EI for comparison (it ignores
shear, so it undershoots stubby blocks), and the ratio model / reference.
"""

import argparse
import time

import numpy as np

from model_runtime.lab import statics
from model_runtime.lab.data import shapes
from model_runtime.lab.data.reference import simulate_reference
from model_runtime.mesh import validate
from model_runtime.params import make_params
from model_runtime.simulator import Simulator

SIDE, DENSITY, G = 0.2, 1000.0, 9.81


def lean(sim: Simulator, aspect: float, strain: float) -> dict:
    height = aspect * SIDE
    v, f = shapes.box_surface((3, 3, max(3, round(3 * aspect))), (SIDE, SIDE, height))
    v[:, 2] += height / 2
    pins = np.nonzero(v[:, 2] <= 1e-9)[0]
    stiffness = DENSITY * G * height / strain
    p = make_params(frames=72, fps=24.0, gravity=(G, 0.0, 0.0), stiffness=stiffness, density=DENSITY, poisson=0.3,
                    damping=0.0, drag=6.0, pins=pins, num_vertices=len(v))
    t = time.perf_counter()
    ref = simulate_reference(v, f, p)
    seconds = time.perf_counter() - t
    pred = sim.simulate(v, f, p)
    top = v[:, 2] >= height - 1e-9
    moment = stiffness * SIDE**4 / 12
    sag = statics.self_weight_sag(validate(v, f), pins, 0.3, v[top], DENSITY * SIDE**2 * height)
    return {"reference": float(ref[-1][top, 0].mean() - v[top, 0].mean()),
            "model": float(pred[-1][top, 0].mean() - v[top, 0].mean()),
            "continuum": float((sag @ p.gravity)[:, 0].mean() / stiffness),
            "euler_bernoulli": DENSITY * G * SIDE**2 * height**4 / (8 * moment), "reference_seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aspects", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="height / side")
    ap.add_argument("--strain", type=float, default=0.03, help="nominal self-weight strain rho g h / E")
    args = ap.parse_args()
    sim = Simulator()
    print("aspect | reference mm | model mm | continuum mm | Euler-Bernoulli mm | model / reference")
    for aspect in args.aspects:
        r = lean(sim, aspect, args.strain)
        print(f"{aspect:6g} | {1e3 * r['reference']:12.2f} | {1e3 * r['model']:8.2f} | {1e3 * r['continuum']:12.2f} | "
              f"{1e3 * r['euler_bernoulli']:18.2f} | {r['model'] / r['reference']:.2f}   "
              f"(reference {r['reference_seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
