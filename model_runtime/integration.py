"""Integrating a planned body's latent Lagrangian ODE with torchdiffeq, frame chunk by frame chunk
(progress and cancel between chunks), with its fallbacks: the planned RK4 steps when an adaptive
method spends its budget, error-controlled steps when a fixed-step run stops looking sane, and
errors that say what to change.
"""

import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torchdiffeq import odeint
from torchdiffeq._impl.odeint import SOLVERS  # torchdiffeq's table of methods; it exports none
from torchdiffeq._impl.solvers import FixedGridODESolver

from .body import Plan
from .dynamics import DTYPE, Body, BudgetSpent, Dynamics, State
from .errors import Cancelled, SimulationError, size_hint
from .params import SimParams

# adaptive methods' absolute error per step, in the state's units (m, sqrt(kg) m), times
# _state_scale
ATOL = 1e-7
# error-controlled steps follow large deformations' stiffening; scipy's Dormand-Prince 5(4) runs
# cheaper than dopri5
DEFAULT_METHOD = "rk45"
SCIPY_METHODS = {"rk45": "RK45", "dop853": "DOP853"}  # run by torchdiffeq's scipy_solver
# Methods that take a step size and no tolerances, from torchdiffeq's own table so none (heun3...)
# passes as adaptive
FIXED_STEP_METHODS = frozenset(name for name, solver in SOLVERS.items()
                               if issubclass(solver, FixedGridODESolver))
# Right-hand side evaluations a frame before an adaptive method gives way to the planned RK4 steps:
# free and pinned bodies take 10-40, ground contact 100-400 (RK45 takes 6 a step), a 0.01 mm cloth
# needed more than 300.
MAX_EVALUATIONS_PER_FRAME = 1200

Progress = Callable[[float, str], None]


@torch.no_grad()
def integrate(plan: Plan, p: SimParams, method: str, progress: Progress,
              should_cancel: Callable[[], bool] | None) -> torch.Tensor:
    """States at every frame time (frames+1, state size), integrated in chunks so progress works.

    ``method``: a torchdiffeq method (dopri5, rk4...) or one of SCIPY_METHODS, which torchdiffeq
    runs through scipy. Cancel is checked between chunks and, through Dynamics, within them;
    Cancelled passes through every fallback.
    """
    body, substeps = plan.body, plan.substeps
    dyn = Dynamics(body, should_cancel)
    y0 = _initial_state(dyn, p)
    dt = 1.0 / p.fps
    atol = ATOL * _state_scale(body)

    def solve(y, t, method, rtol=plan.rtol, atol=atol):
        if method in FIXED_STEP_METHODS:
            return odeint(dyn, y, t, method=method, options={"step_size": dt / substeps})[1:]
        dyn.budget = dyn.evaluations + MAX_EVALUATIONS_PER_FRAME * (len(t) - 1)
        try:
            if method not in SCIPY_METHODS:
                return odeint(dyn, y, t, method=method, rtol=rtol, atol=atol)[1:]
            # torchdiffeq passes min_step, which only LSODA takes, to every solver
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The following arguments have no effect",
                                        UserWarning)
                ys = odeint(dyn, y, t, method="scipy_solver", rtol=rtol, atol=atol,
                            options={"solver": SCIPY_METHODS[method]})[1:]
            # scipy stopped early (a step size underflow); torchdiffeq passes it on
            if len(ys) != len(t) - 1:
                raise AssertionError(f"{method} stopped after {len(ys)} of {len(t) - 1} frames")
            return ys
        finally:
            dyn.budget = None

    chunk = max(1, min(24, p.frames // 10 or 1))
    states = [y0]
    limit = 10.0 * body.size + 1e-9
    threads = torch.get_num_threads()
    # The ODE is hundreds of tiny ops per step: threading only adds synchronization (3-10x slower
    # measured).
    torch.set_num_threads(1)
    try:
        for start in range(0, p.frames, chunk):
            if should_cancel and should_cancel():
                raise Cancelled("simulation cancelled")
            stop = min(p.frames, start + chunk)
            t = torch.arange(start, stop + 1, dtype=DTYPE) * dt
            try:
                try:
                    ys = solve(states[-1], t, method)
                except BudgetSpent:  # far stiffer than the plan expected
                    # Bounded fallback (never an endless run that cannot even be cancelled): the
                    # planned RK4 steps.
                    ys = solve(states[-1], t, "rk4")
                if not _sane(body, ys, limit) and method in FIXED_STEP_METHODS:
                    # Large deformations stiffen the body beyond the rest-state estimate the step
                    # was chosen for: redo this chunk with error-controlled steps rather than give
                    # up.
                    ys = solve(states[-1], t, DEFAULT_METHOD, rtol=0.1 * plan.rtol, atol=0.1 * atol)
            # A singular mass matrix, a step size underflow (torchdiffeq asserts), a spent budget.
            except (np.linalg.LinAlgError, AssertionError, BudgetSpent) as exc:
                raise SimulationError(
                    f"the simulation broke down between frames {start} and {stop} (the body "
                    "deformed past what the model can represent); try a stiffer material, more "
                    "damping or drag, or a smaller gravity" + size_hint(2.0 * body.size)) from exc
            if not _sane(body, ys, limit):
                raise SimulationError(
                    f"the simulation diverged between frames {start} and {stop}; try a softer "
                    "material, more damping or drag, or a smaller gravity" + size_hint(2.0 * body.size))
            states.extend(ys)
            progress(0.05 + 0.9 * stop / p.frames, f"frame {stop}/{p.frames}")
    finally:
        torch.set_num_threads(threads)
    return torch.stack(states)


def _state_scale(body: Body) -> float:
    """Factor on ATOL for small or light bodies, whose state is tiny in SI units.

    Modal coordinates are sqrt(kg) m: a 0.1 mm cloth has q ~ 1e-10, far below ATOL, so an absolute
    tolerance would accept any step and the run diverged (measured). The tolerance follows
    sqrt(mass) * size below 0.1 sqrt(kg) m; bodies above that (every ~1 m test scene) keep ATOL
    unchanged.
    """
    return min(1.0, math.sqrt(float(body.mass.sum())) * body.size / 0.1, body.size)


def _sane(body: Body, ys: torch.Tensor, limit: float) -> bool:
    """Finite, and no deformation larger than `limit` metres (a diverging run grows without
    bound)."""
    if not torch.isfinite(ys).all():
        return False
    _, _, q, _, _, _ = State(body).split(ys[-1])
    a = body.latent(q)
    return float((body.phi @ a).abs().max()) <= limit


def _initial_state(dyn: Dynamics, p: SimParams) -> torch.Tensor:
    """Rest configuration with the requested linear and angular velocity (least squares onto the
    coordinates)."""
    body = dyn.body
    r = body.n_latent
    pos = torch.cat([torch.zeros(3, dtype=DTYPE), torch.tensor([1.0, 0, 0, 0], dtype=DTYPE),
                     torch.zeros(r, dtype=DTYPE)]) if body.free else torch.zeros(r, dtype=DTYPE)
    y = torch.cat([pos, torch.zeros(len(pos) - (1 if body.free else 0), dtype=DTYPE)])
    v0 = torch.as_tensor(p.initial_velocity, dtype=DTYPE)
    w0 = torch.as_tensor(p.angular_velocity, dtype=DTYPE)
    if not (v0.any() or w0.any()):
        return y
    x, _, A, _ = dyn.kinematics(y)
    target = v0 + torch.linalg.cross(w0.expand_as(x), x - body.center)
    m3 = body.mass.repeat_interleave(3)[:, None]
    u = torch.linalg.solve(A.T @ (m3 * A), A.T @ (m3[:, 0] * target.reshape(-1)))
    # A mode slowed by mass scaling (added modal mass a, so it runs at omega / sqrt(1 + a)) would
    # turn its velocity into an amplitude sqrt(1 + a) times too large, and 1 + a times the energy: a
    # stiff pinned body thrown at 1 m/s swung 10x further than the reference (v2 seq 20). Scaling
    # its velocity by 1 / sqrt(1 + a) keeps both. At rest the modal coordinates are M-orthonormal
    # and the added inertia is diagonal in them (a stretch inertia too: it and the stiffness are
    # both J_L^T J_L times a constant), so 1 + a is the mass matrix's diagonal.
    if r:
        u[-r:] = u[-r:] / torch.from_numpy(np.diag(dyn.latent_mass(np.zeros(r))).copy()).sqrt()
    y[len(pos):] = u
    return y
