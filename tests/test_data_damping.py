"""Weakly damped soft solids take MuJoCo's explicit Euler with Rayleigh damping (mujoco_engine.choose_integrator):
it damps as the material says, where the implicit solve at 240 steps/s adds as much damping again of its own."""

from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from model_runtime.data import mujoco_engine as M
from model_runtime.data.reference import REFERENCE, simulate_reference
from model_runtime.data.shapes import box_surface
from model_runtime.params import make_params

FPS = 240
BETA = 3e-3  # s: a 10 Hz mode has damping ratio pi beta f = 0.09


def _cube(integrator=None):
    """A 0.1 m jelly cube (E 20 kPa: 5% self-weight strain) clamped at its base and released under gravity: the mean
    height of its top face over 1 s, and the integrator and steps/s it ran at."""
    v, f = box_surface((2, 2, 2), (0.1, 0.1, 0.1))
    pins = np.nonzero(v[:, 2] <= v[:, 2].min() + 1e-9)[0]
    top = np.nonzero(v[:, 2] >= v[:, 2].max() - 1e-9)[0]
    chosen = {}
    original = M.choose_integrator

    def choose(*args):
        chosen["run"] = integrator or original(*args)
        return chosen["run"]

    M.choose_integrator = choose
    try:
        params = make_params(frames=FPS, fps=FPS, stiffness=2e4, density=1000.0, poisson=0.3, damping=BETA,
                             pins=pins, drag=0.0)
        pos = simulate_reference(v, f, params, settings=replace(REFERENCE, cell=0.025))
    finally:
        M.choose_integrator = original
    return pos[:, top, 2].astype(np.float64).mean(1) - v[top, 2].mean(), chosen["run"]


def _decay(z):
    """Fit z = A + exp(-s t) (B cos wt + C sin wt); return (s, w)."""
    t = np.arange(len(z)) / FPS

    def residual(x):
        a, b, c, s, w = x
        return a + np.exp(-s * t) * (b * np.cos(w * t) + c * np.sin(w * t)) - z

    fits = [least_squares(residual, [z[-1], -z[-1], 0.0, 1.0, w0]) for w0 in 2 * np.pi * np.array([5, 10, 20])]
    return tuple(min(fits, key=lambda r: r.cost).x[3:])


def test_a_weakly_damped_soft_body_takes_the_explicit_path_and_decays_at_the_rayleigh_rate():
    z, (integrator, rate) = _cube()
    assert integrator == "Euler" and rate < M.MAX_DAMPED_EXPLICIT_RATE
    s, w = _decay(z)
    # Rayleigh damping beta K: the dominant mode's envelope decays as exp(-beta w^2 t / 2). Measured: 7.27/s
    # against 6.91/s (+5%).
    assert abs(s / (BETA * w * w / 2) - 1) < 0.15, f"decay {s:.2f}/s, Rayleigh {BETA * w * w / 2:.2f}/s"
    # The implicit solve at 20x the step is the converged answer: the explicit run stays within 1.2% of its swing.
    reference, _ = _cube(("discrete", 4800.0))
    assert np.abs(z - reference).max() < 0.03 * np.abs(reference).max()
    coarse, _ = _cube(("discrete", M.DAMPED_STEP_RATE))
    assert _decay(coarse)[0] > 1.5 * s  # measured 15.8/s: why the implicit path is kept for what needs it only
