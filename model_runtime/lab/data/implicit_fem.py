"""Solids by implicit finite elements: linear tets of stable Neo-Hookean material, BDF2 steps, Newton's method.

Why not MuJoCo's flex FEM any more (issue 23): its St Venant-Kirchhoff tets collapse under strong compression and
have no restoring force once inverted, so soft bodies hanging from a small clamp were refused, and its explicit
step, bound by the elastic wave speed, cost 10-200 CPU s per simulated second. Here the law is the learned
dynamics' own (``model_runtime.elasticity``: stable Neo-Hookean, well-posed through inversion) and the step is an
implicit one set by the frame rate, not by the wave speed.

Each step minimizes the incremental potential (BDF2; the first step backward Euler)
    Phi(x) = 1/2 |x - x_hat|_M^2 + tau^2 [Psi(x) - g.Mx + alpha/2 |x - x_p|_(cM + beta K_n)^2 + contact(x)]
whose stationary point is M a = f(x) - c M v - beta K_n v with v = alpha (x - x_p): Newton on the per-element
PSD-projected Hessian (a sparse direct solve, reused while it still converges: see _Stepper), with a backtracking
line search on Phi. Drag c (1/s) and stiffness-proportional Rayleigh damping beta (s, K_n the projected stiffness
at the step's start, up to RAYLEIGH_REFRESH) are implicit; the ground is a penalty with lagged friction. Held nodes
are eliminated: they never move. Units: pascals, kg/m^3, metres, seconds.
"""

import math
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse.linalg as spla

from ...bdf2 import NEWTON_TOLERANCE, RAYLEIGH_REFRESH, STEP_RATE, bdf2
from ...contact import CONTACT_FRICTION, CONTACT_STIFFNESS, SLIP_SPEED
from ...errors import Cancelled, SimulationError
from ...params import SimParams
from ...tets import StiffnessPattern, TetElasticity, node_masses

MAX_NEWTON = 40  # iterations per step before the step is retried at half the size
CHORD_ITERATIONS = 10  # iterations on the last factorized Hessian before a step computes and factorizes a new one
RETRIES = 3  # halvings of the step before a frame is given up


class _NotConverged(Exception):
    pass


def simulate_solid(
    nodes: np.ndarray,
    tets: np.ndarray,
    params: SimParams,
    node_volume: np.ndarray,
    pinned: np.ndarray,
    tet_scale: np.ndarray | None = None,
    center: np.ndarray | None = None,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    steps_per_frame: int | None = None,
    velocities: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Simulate a tetrahedral solid; return float32 positions (frames+1, N, 3) of its N nodes.

    ``node_volume``: lumped volume per node (m^3; times density gives its mass), ``pinned``: node indices held in
    place, ``tet_scale``: per-tet stiffness factor (the fraction of a lattice cell the body fills), ``center``: the
    point the initial angular velocity turns about (default: the nodes' mean), ``steps_per_frame``: default from
    STEP_RATE; ``velocities``: when given, an array (frames+1, N, 3) filled with the solver's own velocities;
    ``start``: the free nodes' positions at frame 0 when not at rest (e.g. squashed inside out). Raises
    ``SimulationError`` when a step produces NaN or does not converge even at smaller steps.
    """
    x0 = np.asarray(nodes, np.float64)
    tets = np.asarray(tets, np.int64)
    n = len(x0)
    held = np.zeros(n, bool)
    held[np.asarray(pinned, np.int64)] = True
    free_dof = np.full(3 * n, -1)
    free_dof[np.repeat(~held, 3)] = np.arange(3 * int((~held).sum()))
    if not (~held).any():
        raise SimulationError("the pins hold the whole body: nothing is left free to move")
    elastic = TetElasticity(x0, tets, params, tet_scale)
    pattern = StiffnessPattern(tets, free_dof)
    mass = node_masses(node_volume, params.density)
    edge = float(np.cbrt(6.0 * np.median(elastic.volume)))  # a lattice cube's edge
    stepper = _Stepper(elastic, pattern, np.repeat(mass, 3)[~np.repeat(held, 3)], held, params,
                       NEWTON_TOLERANCE * edge)

    c = x0.mean(0) if center is None else np.asarray(center, np.float64)
    v = np.asarray(params.initial_velocity, np.float64) + np.cross(np.asarray(params.angular_velocity), x0 - c)
    v[held] = 0.0
    steps = steps_per_frame or max(1, math.ceil(STEP_RATE / params.fps - 1e-9))
    out = np.empty((params.frames + 1, n, 3), np.float32)
    first = x0.copy()
    if start is not None:
        first[~held] = np.asarray(start, np.float64)[~held]
    out[0] = first
    if progress is not None:
        progress(0.0, f"{n} nodes, {steps} steps a frame")
    started = time.perf_counter()
    if velocities is not None:
        velocities[0] = v
    state = (first, v, None, None)  # x, v, previous x, previous v (None: the next step is backward Euler)
    for frame in range(1, params.frames + 1):
        if should_cancel is not None and should_cancel():
            raise Cancelled("the reference simulation was cancelled")
        for attempt in range(RETRIES + 1):
            k = steps * 2**attempt
            try:
                trial = state if attempt == 0 else (state[0], state[1], None, None)
                for _ in range(k):
                    trial = stepper.step(*trial, 1.0 / (params.fps * k))
                break
            except _NotConverged as exc:
                if attempt == RETRIES:
                    raise SimulationError(f"the reference simulation did not converge at frame {frame} even at {k} "
                                          f"steps per frame: {exc}") from None
        state = trial if attempt == 0 else (trial[0], trial[1], None, None)
        out[frame] = state[0]
        if velocities is not None:
            velocities[frame] = state[1]
        if progress is not None:
            left = (time.perf_counter() - started) * (params.frames - frame) / frame  # the cost estimate, s
            progress(frame / params.frames, f"frame {frame}/{params.frames}, ~{left:.0f} s left")
    return out


class _Stepper:
    """BDF2 steps of one body, by Newton's method made cheap where the body changes slowly.

    Each step first iterates on the last factorized Hessian (the chord method: one pair of triangular solves an
    iteration, no element Hessians); a step that does not converge within CHORD_ITERATIONS that way falls back to
    full Newton steps, whose Hessian is factorized anew and kept for the steps that follow. The factorization is in
    single precision (1.8x faster): it only steers the iterations, whose residual is always double."""

    def __init__(self, elastic: TetElasticity, pattern: StiffnessPattern, mass: np.ndarray, held: np.ndarray,
                 params: SimParams, tolerance: float):
        self.elastic, self.pattern, self.m, self.params, self.tol = elastic, pattern, mass, params, tolerance
        self.held, self.free = held, np.repeat(~held, 3)
        self.gravity = np.tile(np.asarray(params.gravity, np.float64), len(held))[self.free]
        self.z = (np.arange(3 * len(held)) % 3 == 2)[self.free]  # the ground is the plane z = params.ground
        self.factor = None
        self.factor_contact = None  # the ground-contact DOFs the factorized Hessian's penalty term covers
        self.stiffness = self.stiffness_at = None  # the last assembled elastic stiffness, and the F it was taken at

    def _assemble(self, x: np.ndarray) -> None:
        self.stiffness = self.pattern.assemble(self.elastic.hessian_blocks(x))
        self.stiffness_at = self.elastic.deformation(x)

    def _solve(self, r: np.ndarray) -> np.ndarray:
        """The last factorized Hessian's inverse applied to r."""
        return self.factor.solve(r.astype(np.float32)).astype(np.float64)

    def step(self, x, v, x_prev, v_prev, h):
        """One BDF2 step of size h (backward Euler when there is no previous state); returns the next state."""
        tau2, alpha, xp, x_hat, start = bdf2(x, v, x_prev, v_prev, h)
        p, m, free, ground = self.params, self.m, self.free, self.params.ground
        full = x.copy()

        def place(y_):
            full.ravel()[free] = y_
            return full

        # Rayleigh damping needs the stiffness at the step's start: one from a body that has turned since damps the
        # turn (a jelly head swinging on its pins moved 30% less in 0.5 s with the chord's stale one). It is
        # reassembled once any element's F has moved by RAYLEIGH_REFRESH from where it was assembled.
        if self.stiffness is None or p.damping > 0.0 and float(
                (self.elastic.deformation(x) - self.stiffness_at).abs().max()) > RAYLEIGH_REFRESH:
            self._assemble(x)
        rayleigh_data = self.stiffness
        rayleigh = self.pattern.matrix(rayleigh_data, np.zeros(len(m))) if p.damping > 0.0 else None
        yp, y_hat = xp.ravel()[free], x_hat.ravel()[free]
        # Per-DOF viscosity: drag, plus friction on the nodes in ground contact at the step's start (normal force
        # and sliding speed lagged from there, so the friction is linear in the new velocity).
        viscous = p.drag * m
        if ground is not None:
            normal = CONTACT_STIFFNESS * m * np.maximum(0.0, ground - x.ravel()[free]) * self.z
            if normal.any():
                slide = np.linalg.norm(v[~self.held][:, :2], axis=1)
                friction = CONTACT_FRICTION * normal[self.z] / np.maximum(slide, SLIP_SPEED)
                viscous = viscous + np.repeat(friction, 3) * ~self.z

        def damping_force(y_):
            d = y_ - yp
            return viscous * d + (p.damping * (rayleigh @ d) if rayleigh is not None else 0.0)

        def in_contact(y_):
            return (y_ < ground) & self.z if ground is not None else np.zeros(len(y_), bool)

        def contact_stiffness(y_):
            return CONTACT_STIFFNESS * m * in_contact(y_)

        def chord_fits(y_):
            # The penalty outweighs a node's inertia ~50x at these steps, so iterations on a factorization made
            # with another contact set contract too slowly: a new contact set gets a fresh Newton step.
            return ground is None or np.array_equal(in_contact(y_), self.factor_contact)

        def potential(y_, elastic_energy):
            d = y_ - yp
            rest = elastic_energy - np.dot(m * self.gravity, y_) + 0.5 * alpha * np.dot(d, damping_force(y_))
            if ground is not None:
                pen = np.maximum(0.0, ground - y_) * self.z
                rest += 0.5 * CONTACT_STIFFNESS * np.dot(m * pen, pen)
            return 0.5 * np.dot(m * (y_ - y_hat), y_ - y_hat) + tau2 * rest

        def evaluate(y_):
            """Psi and the gradient of Phi at y_."""
            elastic_energy, elastic_gradient = self.elastic.energy_and_gradient(place(y_))
            push = contact_stiffness(y_) * (ground - y_) if ground is not None else 0.0
            return elastic_energy, m * (y_ - y_hat) + tau2 * (elastic_gradient.ravel()[free] - m * self.gravity
                                                              + alpha * damping_force(y_) - push)

        def newton_direction(y_, g_):
            """A full Newton step: fresh element Hessians, factorized for the chord iterations that follow."""
            self._assemble(place(y_))
            K = self.stiffness + (alpha * p.damping) * rayleigh_data if rayleigh is not None else self.stiffness
            H = self.pattern.matrix(tau2 * K, m + tau2 * (alpha * viscous + contact_stiffness(y_)))
            self.factor = spla.splu(H.astype(np.float32).tocsc(), permc_spec="MMD_AT_PLUS_A",
                                    options={"SymmetricMode": True})
            self.factor_contact = in_contact(y_)
            return -self._solve(g_)

        y = start.ravel()[free]
        energy, g = evaluate(y)
        chord = CHORD_ITERATIONS > 0 and self.factor is not None and chord_fits(y)
        dy = -self._solve(g) if chord else newton_direction(y, g)
        for iteration in range(MAX_NEWTON):
            if not np.isfinite(dy).all():
                raise _NotConverged("the Newton step is not finite")
            phi0, slope, s = potential(y, energy), float(np.dot(g, dy)), 1.0
            while slope < 0.0:
                y_new = y + s * dy
                e_new, g_new = evaluate(y_new)  # the gradient too: the first trial is nearly always taken
                if np.isfinite(e_new) and potential(y_new, e_new) <= phi0 + 1e-4 * s * slope:
                    break
                s *= 0.5
                if s < 1e-6:
                    break
            if slope >= 0.0 or s < 1e-6:  # the chord matrix gives no descent here: a fresh Newton step
                if not chord:
                    if float(np.abs(dy).max()) <= self.tol:  # already converged: round-off hides the descent
                        break
                    raise _NotConverged("the line search found no descent")
                chord = False
                dy = newton_direction(y, g)
                continue
            y, energy, g = y_new, e_new, g_new
            # The next step, on the factorization at hand, tells whether this one converged: the error left is that
            # step times rate / (1 - rate) for iterations that contract at ``rate`` (the chord's are linear).
            last, dy = s * float(np.abs(dy).max()), -self._solve(g)
            size = float(np.abs(dy).max())
            rate = size / max(last, 1e-300)
            if rate < 1.0 and size * max(1.0, rate / (1.0 - rate)) <= self.tol:
                break
            if not chord_fits(y) or chord and iteration + 1 >= CHORD_ITERATIONS:
                chord = False
                dy = newton_direction(y, g)
        else:
            raise _NotConverged(f"Newton's method ran out of {MAX_NEWTON} iterations")
        x_new = place(y).copy()
        v_new = np.zeros_like(x)
        v_new.ravel()[free] = alpha * (y - yp)
        return x_new, v_new, x, v
