"""``python -m model_runtime data validate``: the reference simulator against closed-form mechanics (issue 8).

Every scene runs through ``reference.simulate_reference`` at its own settings (``reference.REFERENCE``); the
table lists measured vs analytic values, the tolerance and pass/fail. ``--quick`` runs a small subset.
"""

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from ...bdf2 import STEP_RATE
from ...lattice import build_cage, lattice_cell
from ...mesh import bbox_diagonal
from ...params import make_params
from ...tets import TetElasticity, node_masses
from .elements import lumped_triangle_masses
from .implicit_fem import simulate_solid
from .mujoco_engine import CFL, CLOTH_DAMPED_STEP_RATE, choose_cloth_integrator, cloth_energy, simulate_cloth
from .reference import REFERENCE, SolverSettings, simulate_reference
from .shapes import cantilever_box, grid_sheet

G = 9.81
SOLID_PRESETS = ("rubber", "jelly", "elastic_beam")  # the material presets meant for solids (the others are cloth)


@dataclass
class Check:
    name: str
    measured: float
    expected: float
    tolerance: float  # relative, or absolute when ``absolute``
    unit: str = ""
    absolute: bool = False
    note: str = ""

    @property
    def error(self) -> float:
        if self.absolute:
            return abs(self.measured - self.expected)
        return abs(self.measured - self.expected) / max(abs(self.expected), 1e-30)

    @property
    def ok(self) -> bool:
        return bool(np.isfinite(self.measured)) and self.error <= self.tolerance


def _run(v, f, settings, **kw):
    params = make_params(num_vertices=len(v), **kw)
    return simulate_reference(v, f, params, settings=settings), params


def free_fall(settings, drag: float) -> Check:
    v, f = cantilever_box((0.1, 0.1, 0.1), (2, 2, 2))
    t_end, fps = 1.0, 24
    # Jelly: the motion is rigid whatever the material, and a softer one takes fewer explicit steps.
    pos, _ = _run(v, f, settings, frames=int(t_end * fps), fps=fps, drag=drag, material="jelly", damping=0.0)
    c = pos.astype(np.float64).mean(1)[:, 2]
    if drag == 0.0:
        return Check("free fall, no drag: centroid drop at 1 s", c[0] - c[-1], 0.5 * G * t_end**2, 0.01, "m")
    vel = (c[-2] - c[-1]) * fps  # speed at t = 1 - 1/(2 fps)
    t = t_end - 0.5 / fps
    return Check(f"free fall, drag c={drag:g}/s: speed at {t:.3f} s", vel, G / drag * (1 - math.exp(-drag * t)), 0.02,
                 "m/s")


def fit_oscillation(z: np.ndarray, fps: float) -> tuple[float, float]:
    """Fit z(t) = A + B cos(wt) + C sin(wt) by least squares over w; return (A, w / 2 pi).

    A released cantilever swings about its static deflection A at its first bending frequency; higher modes ride
    on top, which fool zero-crossing counts but barely move a least-squares fit of the dominant one.
    """
    t = np.arange(len(z)) / fps

    def residual(w):
        basis = np.stack([np.ones_like(t), np.cos(w * t), np.sin(w * t)], 1)
        coef, *_ = np.linalg.lstsq(basis, z, rcond=None)
        return float(np.sum((basis @ coef - z) ** 2)), coef

    span = t[-1]
    grid = 2 * math.pi * np.arange(1.0 / span, fps / 8, 0.25 / span)  # at least one period, 32 samples a period
    w = grid[int(np.argmin([residual(x)[0] for x in grid]))]
    lo, hi = w - 2 * math.pi * 0.25 / span, w + 2 * math.pi * 0.25 / span
    for _ in range(60):  # golden-section refinement around the best grid point
        a, b = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        lo, hi = (lo, b) if residual(a)[0] < residual(b)[0] else (a, hi)
    w = 0.5 * (lo + hi)
    return float(residual(w)[1][0]), w / (2 * math.pi)


def cantilever(settings, length, thick, stiffness, density, per_thickness=None, surface_across=2, seconds=None,
               fps=120):
    """Clamped at x = 0, gravity -z, no drag or damping: returns (static sag, first frequency, lattice cubes across
    the thickness, seconds).

    The surface is a box of ``surface_across`` triangle strips across each side; the lattice is the reference's
    own (``settings``) or, given ``per_thickness``, cubes of that fraction of the thickness. The record lasts
    ``seconds`` or, by default, three periods of the analytic first mode (only its length depends on theory; the
    frequency is measured)."""
    if seconds is None:
        seconds = 3.0 / beam_theory(length, thick, stiffness, density)[1]
    across = per_thickness or surface_across
    v, f = cantilever_box((length, thick, thick), (round(across * length / thick), across, across))
    pins = np.nonzero(v[:, 0] <= 1e-9)[0]
    s = replace(settings, embedded=True, cell=settings.cell if per_thickness is None else thick / per_thickness)
    # build_cage fits a whole number of cubes across, rounding the cell down to fit
    across_lattice = math.ceil(thick / lattice_cell(v, length * thick**2, s) - 1e-6)
    start = time.perf_counter()
    pos, _ = _run(v, f, s, frames=int(seconds * fps), fps=fps, stiffness=stiffness, density=density, poisson=0.3,
                  damping=0.0, pins=pins)
    tip = np.nonzero(v[:, 0] >= length - 1e-9)[0]
    z = pos[:, tip, 2].astype(np.float64).mean(1) - v[tip, 2].mean()
    static, freq = fit_oscillation(z, fps)
    return -static, freq, across_lattice, time.perf_counter() - start


def beam_theory(length, thick, stiffness, density):
    sag = 3 * density * G * length**4 / (2 * stiffness * thick**2)
    freq = 1.875**2 / (2 * math.pi) * math.sqrt(stiffness * thick**2 / 12.0 / (density * length**4))
    return sag, freq


def catenary_sag(length: float, span: float) -> float:
    """Mid-span sag of an inextensible chain of ``length`` hung between two points ``span`` apart."""
    lo, hi = 1e-6, 1e6  # parameter a of y = a cosh(x / a): length 2 a sinh(span / 2a) decreases with a
    for _ in range(200):
        a = math.sqrt(lo * hi)
        if 2 * a * math.sinh(span / (2 * a)) > length:
            lo = a
        else:
            hi = a
    return a * (math.cosh(span / (2 * a)) - 1.0)


def cloth_strip(settings, length=1.0, span=0.8, width=0.04, segments=40) -> tuple[Check, float]:
    # Rest shape: a circular arc of the strip's length hanging between the pins (any shape of that length would do).
    lo, hi = 1e-6, math.pi
    for _ in range(100):  # half-angle theta with arc length / chord = theta / sin(theta)
        th = 0.5 * (lo + hi)
        lo, hi = (th, hi) if th / math.sin(th) < length / span else (lo, th)
    r = span / (2 * math.sin(th))
    ang = np.linspace(-th, th, segments + 1)
    x, z = r * np.sin(ang), -r * (np.cos(ang) - math.cos(th))
    v = np.array([[xi, y, zi] for xi, zi in zip(x, z, strict=True) for y in (0.0, width)])
    f = []
    for i in range(segments):
        a, b, c, d = 2 * i, 2 * i + 1, 2 * i + 2, 2 * i + 3
        f += [(a, c, b), (b, c, d)]
    pins = np.array([0, 1, 2 * segments, 2 * segments + 1])
    pos, _ = _run(v, np.array(f), settings, frames=72, fps=24, material="cloth", drag=4.0, pins=pins)
    sag = -float(pos[-1, :, 2].min())
    return Check(f"cloth strip L={length:g} m, span {span:g} m: mid sag vs catenary", sag, catenary_sag(length, span),
                 0.05, "m", note="ends pinned, settled with drag"), bbox_diagonal(v)


def solid_energy(seconds: float, fps: float, material: str | None = None, steps_per_frame: int | None = None,
                 **overrides) -> tuple[np.ndarray, float]:
    """A clamped 1 x 0.1 x 0.1 m beam released under gravity with no drag or damping, on the reference's solid
    engine: its total energy per frame (kinetic from the solver's own velocities, gravitational, and the stable
    Neo-Hookean energy its forces derive from) and the largest kinetic energy (J). ``steps_per_frame``: the
    solver's default (implicit_fem.STEP_RATE) unless given."""
    length, thick, res = 1.0, 0.1, 3
    v, f = cantilever_box((length, thick, thick), (round(res * length / thick), res, res))
    nodes, tets, fill, volume, _, _ = build_cage(v, v, f, thick / res)
    pins = np.nonzero(nodes[:, 0] <= 1e-9)[0]
    params = make_params(frames=round(seconds * fps), fps=fps, material=material, damping=0.0, drag=0.0,
                         **overrides)
    vel = np.zeros((params.frames + 1, len(nodes), 3))
    pos = simulate_solid(nodes, tets, params, volume, pins, tet_scale=fill, velocities=vel,
                         steps_per_frame=steps_per_frame).astype(np.float64)
    mass = node_masses(volume, params.density)
    mass[pins] = 0.0
    kinetic = 0.5 * np.sum(mass[:, None] * vel**2, axis=(1, 2))
    elastic = TetElasticity(nodes, tets, params, fill).energies(pos)
    return kinetic - pos @ np.asarray(params.gravity) @ mass + elastic, float(kinetic.max())


def energy_check(seconds: float = 2.0, fps: float = 480.0, steps_per_frame: int = 4) -> Check:
    """The beam of solid_energy at E = 1e7 Pa: its total energy must stay within 2% of the largest kinetic energy
    (the energy the body exchanges); the drift is the total's range over the run. BDF2 loses energy of its own, as
    (w h)^3 over a fixed time: 3.5% at 480 steps/s, hence ``steps_per_frame`` steps a frame, where what is left
    would show a mismatch between the forces and the energy they are meant to derive from (numerical_damping
    measures the loss at the product's frame rate)."""
    total, kinetic = solid_energy(seconds, fps, steps_per_frame=steps_per_frame, stiffness=1e7, density=1000.0,
                                  poisson=0.3)
    drift = float((total.max() - total.min()) / kinetic)
    return Check(f"energy, clamped beam E=1e7 no drag/damping, {seconds:g} s at {fps * steps_per_frame:g} steps/s: "
                 "drift / max kinetic", drift, 0.0, 0.02, absolute=True)


def numerical_damping(material: str, seconds: float = 2.0, fps: float = 24.0) -> float:
    """The implicit scheme's own damping for a solid preset at the product's frame rate: the fraction of the largest
    kinetic energy the undamped, undragged beam of solid_energy has lost after ``seconds``."""
    total, kinetic = solid_energy(seconds, fps, material)
    return float((total[0] - total[-1]) / kinetic)


def sheet_grid(length: float, width: float, cells: int, across: int) -> tuple[np.ndarray, np.ndarray]:
    """shapes.grid_sheet moved to [0, length] x [0, width], so pins and tips are picked by exact coordinates."""
    v, f = grid_sheet(cells, across, length, width)
    return v + [length / 2, width / 2, 0.0], f


def square_cloth(side: float, cells: int) -> tuple[np.ndarray, np.ndarray]:
    """A flat square sheet_grid, [0, side]^2."""
    return sheet_grid(side, side, cells, cells)


def cloth_energy_check(seconds: float = 2.0, pinned: bool = True) -> tuple[Check, dict]:
    """A square cloth released flat under gravity with no drag or damping: pinned along one edge it swings down like
    a pendulum (``pinned`` False: it falls freely, which checks this bookkeeping). Frames are taken at every step
    of the MuJoCo cloth's explicit Euler, whose positions advance by the new velocity, so backward differences are
    the solver's own velocities. Total energy: kinetic of the lumped triangle masses, gravitational, and the
    membrane and bending energy MuJoCo's forces derive from (mujoco_engine.cloth_energy). The drift is the total's
    largest change over the run, relative to the largest kinetic energy; also returned: the largest kinetic,
    membrane and bending energies (J), the total per frame and the step rate. The engine is run directly, at a
    frame rate beyond the product's limit of 1000 fps."""
    v, f = square_cloth(0.5, 16)
    pins = np.nonzero(v[:, 1] == 0.0)[0] if pinned else np.zeros(0, np.int64)
    params = make_params(num_vertices=len(v), material="cloth", drag=0.0, damping=0.0, pins=pins)
    _, fps = choose_cloth_integrator(v, f, params)
    params = replace(params, fps=fps, frames=round(seconds * fps))
    pos = simulate_cloth(v, f, params).astype(np.float64)
    mass = lumped_triangle_masses(v, f, params.density * params.thickness)
    mass[pins] = 0.0
    vel = np.diff(pos, axis=0) * fps
    kinetic = np.concatenate([[0.0], 0.5 * np.sum(mass[:, None] * vel**2, axis=(1, 2))])
    elastic = cloth_energy(v, f, pos, params)
    total = kinetic - pos @ np.asarray(params.gravity) @ mass + elastic["membrane"] + elastic["bending"]
    drift = float(np.abs(total - total[0]).max() / kinetic.max())
    what = "pinned on one edge, swinging" if pinned else "falling freely"
    return (Check(f"energy, cloth 0.5 m {what}, no drag/damping, {seconds:g} s: drift / max kinetic", drift, 0.0, 0.02,
                  absolute=True),
            {"kinetic": float(kinetic.max()), "membrane": float(elastic["membrane"].max()),
             "bending": float(elastic["bending"].max()), "total": total, "rate": fps})


def cloth_cantilever(settings, cells: int = 20, stiffness: float = 2e8) -> Check:
    """Bending: a 10 x 2 cm strip of 1 mm sheet clamped along one short edge (two rows of vertices) sags under its
    own weight, settled by drag; tip sag against beam theory, q L^4 / 8 E I per width (a strip this narrow bends
    as a beam: its free edges let it curl across; plate theory, with 1 - nu^2, would be 9% smaller), L the length
    beyond the clamp. ``cells`` along the strip, a fifth of them across."""
    length, width, thick, density = 0.1, 0.02, 1e-3, 300.0
    v, f = sheet_grid(length, width, cells, max(2, cells // 5))
    cell = length / cells
    pins = np.nonzero(v[:, 0] <= cell + 1e-12)[0]
    pos, _ = _run(v, f, settings, frames=72, fps=24, stiffness=stiffness, density=density, poisson=0.3,
                  thickness=thick, damping=0.0, drag=30.0, pins=pins)
    tip = -float(pos[-12:, v[:, 0] > length - 1e-9, 2].mean())
    free = length - cell
    theory = density * thick * G * free**4 / (8.0 * stiffness * thick**3 / 12.0)
    return Check(f"cloth strip 10 x 2 cm x 1 mm clamped, E={stiffness:.0e}, {cells} cells along: tip sag vs beam "
                 "theory", tip, theory, 0.25, "m", note="settled with drag")


def run_validation(quick: bool = False, settings: SolverSettings = REFERENCE, log=print) -> list[Check]:
    checks: list[Check] = []
    t0 = time.perf_counter()
    checks.append(free_fall(settings, 0.0))
    checks.append(free_fall(settings, 2.0))
    log(f"  free fall done ({time.perf_counter() - t0:.0f} s)")
    # Beams of moderate stiffness (tip sag ~7% of the length, where small-deflection theory still holds to ~1%):
    # the explicit solid engine's cost grows with the wave speed sqrt(E / rho) over the cell size.
    base = dict(length=1.0, thick=0.1, stiffness=2e7, density=1000.0)
    short = dict(length=0.6, thick=0.05, stiffness=1.8e7, density=1000.0)
    # At the reference's own lattice (8 cubes across the thickness), from two surface meshes of each beam.
    absolute = [(base, 2)] if quick else [(base, 2), (base, 5), (short, 2)]
    for b, across in absolute:
        sag, freq, cells, secs = cantilever(settings, surface_across=across, **b)
        th_sag, th_freq = beam_theory(**b)
        tag = (f"L={b['length']:g} a={b['thick']:g} E={b['stiffness']:.1e} rho={b['density']:g}, surface "
               f"{across}/a, lattice {cells}/a")
        checks.append(Check(f"cantilever {tag}: static tip sag", sag, th_sag, 0.10, "m"))
        checks.append(Check(f"cantilever {tag}: 1st bending freq", freq, th_freq, 0.10, "Hz"))
        log(f"  beam {tag} done ({secs:.0f} s)")
    if not quick:
        # Ratios at a coarser lattice: locking stiffens every beam alike, so it cancels out of them.
        sags = {k: cantilever(settings, per_thickness=4, **{**base, **change})[0]
                for k, change in (("ref", {}), ("E", {"stiffness": 2 * base["stiffness"]}),
                                  ("rho", {"density": 2 * base["density"]}))}
        checks.append(Check("sag ratio E x2 (expect rho/E ratio 0.5), 4/a", sags["E"] / sags["ref"], 0.5, 0.05))
        checks.append(Check("sag ratio rho x2 (expect 2.0), 4/a", sags["rho"] / sags["ref"], 2.0, 0.05))
        log(f"  sag ratios done ({time.perf_counter() - t0:.0f} s)")
        checks.append(energy_check())
        log(f"  energy done ({time.perf_counter() - t0:.0f} s)")
        c, _ = cloth_strip(settings)
        checks.append(c)
        log(f"  cloth strip done ({time.perf_counter() - t0:.0f} s)")
        checks.append(cloth_energy_check()[0])
        log(f"  cloth energy done ({time.perf_counter() - t0:.0f} s)")
        checks.append(cloth_cantilever(settings))
        log(f"  cloth bending done ({time.perf_counter() - t0:.0f} s)")
    checks.append(pin_check(settings))
    return checks


def pin_check(settings) -> Check:
    v, f = cantilever_box((0.3, 0.1, 0.1), (6, 2, 2))  # stubby: the lattice needs no refinement across it
    pins = np.nonzero(v[:, 0] <= 1e-9)[0]
    pos, _ = _run(v, f, settings, frames=6, fps=24, stiffness=1e6, density=1000.0, damping=0.0, pins=pins)
    diag = bbox_diagonal(v)
    moved = float(np.abs(pos[:, pins] - v[pins]).max()) / diag
    return Check("pinned vertices: max move / diagonal", moved, 0.0, 1e-6, absolute=True)


def format_table(checks: list[Check]) -> str:
    rows = ["| check | measured | analytic | error | tolerance | result |", "|---|---|---|---|---|---|"]
    for c in checks:
        err = f"{c.error:.2e}" if c.absolute else f"{100 * c.error:+.1f}%".replace("+", "")
        signed = "" if c.absolute else f" ({100 * (c.measured - c.expected) / c.expected:+.1f}%)"
        tol = f"{c.tolerance:.0e}" if c.absolute else f"{100 * c.tolerance:g}%"
        rows.append(f"| {c.name} | {c.measured:.4g} {c.unit} | {c.expected:.4g} {c.unit} | {err}{signed} | {tol} | "
                    f"{'pass' if c.ok else 'FAIL'} |")
    return "\n".join(rows)


def main(quick: bool = False) -> int:
    start = time.perf_counter()
    s = REFERENCE
    solids = (f"solids embedded in a lattice of ~{s.lattice_cells} cubes (at least {s.min_cells_across} across, at "
              f"most {s.max_lattice_cells}) on implicit stable Neo-Hookean FEM (BDF2, >= {STEP_RATE:g} steps/s)"
              if s.solid_engine == "implicit" else "solids on VBD")
    cloth = (f"cloth on MuJoCo flex shells (Euler, CFL {CFL:g}; damped: discrete at {CLOTH_DAMPED_STEP_RATE:g}/s)"
             if s.cloth_engine == "mujoco" else
             f"cloth on Newton VBD at {s.substep_rate:g} substeps/s x {s.iterations} iterations")
    print(f"reference settings: {cloth}; {solids}")
    checks = run_validation(quick=quick)
    print(format_table(checks))
    if not quick:
        for name in SOLID_PRESETS:
            print(f"numerical damping, {name} beam at 24 fps, no drag or damping: {numerical_damping(name):.1%} of "
                  "the largest kinetic energy lost in 2 s")
    print(f"{sum(c.ok for c in checks)}/{len(checks)} checks passed in {time.perf_counter() - start:.0f} s")
    return 0 if all(c.ok for c in checks) else 1
