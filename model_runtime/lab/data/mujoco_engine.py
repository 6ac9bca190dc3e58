"""Cloth in MuJoCo: a flex of triangles with a St Venant-Kirchhoff membrane and quadratic discrete bending.

Solids left MuJoCo for ``implicit_fem`` (issue 23): its St Venant-Kirchhoff tets collapsed under strong compression
and its explicit steps cost 10-200 CPU s per simulated second. Cloth stays (docs/physics-validation.md, "Cloth left
VBD"): its bending meets plate theory and its energy is conserved.

Units are the product's: pascals, kg/m^3, metres, seconds. Drag ``-c m v`` is a per-node joint damping ``c m``
(integrated implicitly, so any c is stable); material damping is MuJoCo's stiffness-proportional (Rayleigh)
damping in seconds, the same meaning ``damping`` has for the solids and the Newton cloth path.
"""

import math
from collections.abc import Callable

import numpy as np

from ... import elasticity
from ...errors import Cancelled, SimulationError
from ...mesh import bbox_diagonal
from ...params import SimParams
from .elements import fill_loose_masses, lumped_triangle_masses

# Two integrators:
# - MuJoCo's Euler, semi-implicit (symplectic) for elastic forces and implicit for joint damping (our drag). It
#   conserves energy (data validate) and needs the explicit stability limit: a step below the time an elastic wave
#   takes to cross an edge; CFL is the fraction of that time used. Undamped cloth always takes it.
# - Stiffness-proportional (Rayleigh) damping beta tightens that limit (see cloth_stable_step), so damped cloth
#   takes the discrete-time integrator, which solves (M + dt D + dt^2 K) each step, unless its damped explicit step
#   is affordable: at most MAX_DAMPED_EXPLICIT_RATE steps/s, or at most DAMPED_EXPLICIT_COST times the undamped
#   steps. The explicit path is preferred although it may cost more, because it is exact where the implicit one
#   is not (its own numerical damping exceeds a weak material damping's).
# The solve is iterative: at MuJoCo's default cap (100 iterations) a 1k-node body came out under-converged; 200
# iterations at 1e-9 matched 1000 at 1e-12. Damping makes the system stiffer to solve, hence 1e-6. A converged solve
# stops early, so the cap is generous, and running out of it (reported as a singular inertia) counts as a failed
# step. A step that blows up or does not converge is retried at half the step, RETRIES times.
CFL = 0.4
MIN_STEP_RATE = 240.0  # Euler steps per simulated second at least, for soft sheets whose wave limit allows fewer
# Damped cloth on the discrete-time integrator needs many steps: a 0.5 m cotton sheet (the cloth
# preset, Rayleigh damping 5 ms) swinging from one pinned edge, lowest point at 1.25 s, 1.5 s, 1.75 s: explicit
# Euler at 200,000 steps/s -0.170, -0.264, -0.345 m; discrete at 240/s -0.328, -0.410, -0.435; 960/s -0.234, -0.319,
# -0.364; 2,400/s -0.207, -0.277, -0.322; 9,600/s -0.180, -0.297, -0.429; 24,000/s -0.175, -0.285, -0.406. At
# 240/s it damped the swing as VBD did. The explicit step with that damping would need ~190,000 steps/s.
CLOTH_DAMPED_STEP_RATE = 9600.0
MAX_DAMPED_EXPLICIT_RATE = 15000.0
DAMPED_EXPLICIT_COST = 2.5
SOLVE_ITERATIONS = 1000
SOLVE_TOLERANCE = 1e-6
RETRIES = 3
CONTACT_FRICTION = 0.5
# Ground contact time constant, s (MuJoCo's default is 0.02): a 0.2 m jelly cube dropped 0.15 m went 8 mm into the
# ground on impact and rests 1.5 mm deep, against 16 mm and 4.7 mm with the default.
CONTACT_TIME = 0.005


def _model_xml(nodes: np.ndarray, elements: np.ndarray, pinned: np.ndarray, params: SimParams, dt: float,
               integrator: str) -> str:
    """A flex of triangles ``elements`` (M, 3): cloth of ``params.thickness``, with MuJoCo's St Venant-Kirchhoff
    membrane and quadratic bending energy."""
    g = " ".join(f"{x:.9g}" for x in params.gravity)
    point = " ".join(f"{x:.9g}" for x in nodes.ravel())
    element = " ".join(str(int(i)) for i in elements.ravel())
    pin = f'<pin id="{" ".join(str(int(i)) for i in pinned)}"/>' if len(pinned) else ""
    edge = float(np.linalg.norm(nodes[elements[:, 0]] - nodes[elements[:, 1]], axis=1).mean())
    dim = elements.shape[1] - 1
    shell = f' thickness="{params.thickness:.9g}" elastic2d="both"' if dim == 2 else ""
    if params.ground is None:
        contact, ground = '<contact contype="0" conaffinity="0" selfcollide="none"/>', ""
    else:
        contact = (f'<contact contype="1" conaffinity="1" selfcollide="none" solref="{CONTACT_TIME} 1" '
                   f'friction="{CONTACT_FRICTION}"/>')
        ground = f'<geom type="plane" size="0 0 1" pos="0 0 {float(params.ground):.9g}" contype="1" conaffinity="1"/>'
    return f"""<mujoco>
  <option timestep="{dt:.9g}" integrator="{integrator}" gravity="{g}" iterations="{SOLVE_ITERATIONS}"
          tolerance="{SOLVE_TOLERANCE:g}"/>
  <worldbody>
    {ground}
    <flexcomp name="body" type="direct" dim="{dim}" point="{point}" element="{element}" mass="1"
              radius="{0.05 * edge:.9g}">
      {contact}
      <edge equality="false"/>
      <elasticity young="{params.stiffness:.9g}" poisson="{params.poisson:.9g}" damping="{params.damping:.9g}"{shell}/>
      {pin}
    </flexcomp>
  </worldbody>
</mujoco>"""


def cloth_stable_step(vertices: np.ndarray, faces: np.ndarray, params: SimParams, damping: float = 0.0) -> float:
    """The explicit step limit of a cloth: the shorter of the time a membrane wave (plane stress)
    takes to cross the shortest edge and that of the fastest bending wave the mesh holds, w = kappa (pi / edge)^2
    with kappa = sqrt(D / rho h) (symplectic Euler needs w dt < 2), tightened by Rayleigh ``damping`` beta (s):
    symplectic Euler on x'' = -w^2 x - beta w^2 x' is stable for w^2 dt^2 + 2 beta w^2 dt < 4, so the step is
    sqrt(beta^2 + T^2) - beta for a crossing time T."""
    nu, h = params.poisson, params.thickness
    wave = math.sqrt(params.stiffness / (params.density * (1.0 - nu**2)))
    pairs = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    edge = float(np.linalg.norm(vertices[pairs[:, 1]] - vertices[pairs[:, 0]], axis=1).min())
    kappa = math.sqrt(params.stiffness * h * h / (12.0 * (1.0 - nu**2) * params.density))
    return _explicit_step(min(edge / wave, 2.0 * edge**2 / (math.pi**2 * kappa)), damping)


def _explicit_step(crossing: float, damping: float) -> float:
    return CFL * (math.sqrt(damping**2 + crossing**2) - damping)


def choose_cloth_integrator(vertices: np.ndarray, faces: np.ndarray, params: SimParams) -> tuple[str, float]:
    """(MuJoCo integrator, steps per simulated second) for this cloth; see the notes at the top of the module."""
    return _choose(lambda damping: cloth_stable_step(vertices, faces, params, damping), params.damping,
                   CLOTH_DAMPED_STEP_RATE)


def _choose(step: Callable[[float], float], damping: float, implicit_rate: float) -> tuple[str, float]:
    undamped = max(MIN_STEP_RATE, 1.0 / step(0.0))
    if damping <= 0.0:
        return "Euler", undamped
    damped = max(MIN_STEP_RATE, 1.0 / step(damping))
    if damped <= max(MAX_DAMPED_EXPLICIT_RATE, DAMPED_EXPLICIT_COST * undamped):
        return "Euler", damped
    return "discrete", implicit_rate


def cloth_energy(rest: np.ndarray, faces: np.ndarray, positions: np.ndarray, params: SimParams) -> dict:
    """The elastic energy (J) MuJoCo's cloth (simulate_cloth) derives its forces from, per frame of ``positions``
    (T, V, 3): "membrane", St Venant-Kirchhoff in plane stress, A (mu h |E|^2 + lambda_s tr(E)^2 / 2) per triangle
    with E the Green strain in its rest plane and lambda_s = E h nu / (1 - nu^2); "bending", MuJoCo's quadratic
    discrete bending energy, 1/2 sum_ij B_ij x_i . x_j over the four vertices of each interior edge, B from the
    compiled model (valid for a flat rest shape, where MuJoCo's curved-rest term vanishes). Both reproduce
    MuJoCo's passive forces to ~1e-8 (tests/test_physics_validation.py)."""
    rest = np.asarray(rest, np.float64)
    faces = np.asarray(faces, np.int64)
    x = np.asarray(positions, np.float64)
    mu_s, lam_s = elasticity.plane_stress_moduli(params.stiffness, params.poisson, params.thickness)
    a, b, c = (rest[faces[:, k]] for k in range(3))
    e1, e2 = b - a, c - a
    u = e1 / np.linalg.norm(e1, axis=1, keepdims=True)
    normal = np.cross(e1, e2)
    area = 0.5 * np.linalg.norm(normal, axis=1)
    w = np.cross(normal / (2.0 * area[:, None]), u)
    rest_edges = np.stack([np.stack([(e1 * u).sum(1), (e2 * u).sum(1)], 1),
                           np.stack([(e1 * w).sum(1), (e2 * w).sum(1)], 1)], 1)  # in the triangle's own plane
    edges = np.stack([x[:, faces[:, 1]] - x[:, faces[:, 0]], x[:, faces[:, 2]] - x[:, faces[:, 0]]], -1)
    F = edges @ np.linalg.inv(rest_edges)
    E = 0.5 * (np.swapaxes(F, -1, -2) @ F - np.eye(2))
    membrane = (area * (mu_s * (E**2).sum((-1, -2)) + 0.5 * lam_s * np.trace(E, axis1=-2, axis2=-1) ** 2)).sum(1)
    model = _mujoco().MjModel.from_xml_string(_model_xml(rest, faces, np.zeros(0, np.int64), params, 1e-3, "Euler"))
    count = int(model.flex_edgenum[0])
    flap = model.flex_edgeflap[:count]
    inner = flap[:, 1] >= 0
    stencil = np.concatenate([model.flex_edge[:count], flap], 1)[inner]  # (H, 4): edge, then opposite vertices
    B = model.flex_bending.reshape(count, 17)[inner, :16].reshape(-1, 4, 4)
    P = x[:, stencil]  # (T, H, 4, 3)
    bending = 0.5 * np.einsum("hij,thik,thjk->t", B, P, P)
    return {"membrane": membrane, "bending": bending}


class _Unstable(Exception):
    pass


def _mujoco():
    """Import MuJoCo with its warnings silenced instead of printed and appended to MUJOCO_LOG.TXT in the working
    directory: instability is detected from the ``MjData.warning`` counters and the positions instead."""
    import mujoco

    mujoco.set_mju_user_warning(lambda message: None)
    return mujoco


def simulate_cloth(
    vertices: np.ndarray,
    faces: np.ndarray,
    params: SimParams,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> np.ndarray:
    """Simulate an open triangle mesh as cloth of ``params.thickness``; return float32 positions (frames+1, V, 3).

    A MuJoCo 2D flex: St Venant-Kirchhoff membrane in plane stress and MuJoCo's quadratic discrete bending energy
    (cloth_energy), lumped triangle masses, pins held exactly, drag, Rayleigh damping, and retries at smaller steps.
    Why not VBD (the reference's cloth until 2026-12-04, docs/physics-validation.md): a clamped strip came out
    40-67x softer in bending than plate theory at any VBD setting tried, and an undamped swinging sheet lost a third
    of its energy in 2 s.
    """
    x0 = np.asarray(vertices, np.float64)
    faces = np.asarray(faces, np.int64)
    mass = lumped_triangle_masses(x0, faces, params.density * params.thickness)
    fill_loose_masses(mass)
    pinned = np.unique(np.asarray(params.pins, np.int64))
    integrator, rate = choose_cloth_integrator(x0, faces, params)
    return _with_retries(lambda steps: _run(x0, faces, params, mass, pinned, steps, integrator, progress,
                                            should_cancel), rate, params.fps, integrator)


def _with_retries(run: Callable[[int], np.ndarray], rate: float, fps: float, integrator: str) -> np.ndarray:
    """run(steps per frame) at ``rate`` steps/s, retried at half the step RETRIES times when it blows up."""
    for attempt in range(RETRIES + 1):
        steps = max(1, math.ceil(rate * 2**attempt / fps - 1e-9))
        try:
            return run(steps)
        except _Unstable as exc:
            last = exc
    raise SimulationError(f"the reference simulation diverged at frame {last} even at {steps} steps per frame "
                          f"({integrator} integrator)")


def _run(x0, elements, params, mass, pinned, steps, integrator, progress, should_cancel) -> np.ndarray:
    """One attempt at ``steps`` per frame; ``elements``: the cloth's triangles."""
    mujoco = _mujoco()

    n = len(x0)
    dt = 1.0 / (params.fps * steps)
    try:
        model = mujoco.MjModel.from_xml_string(_model_xml(x0, elements, pinned, params, dt, integrator))
    except ValueError as exc:
        raise SimulationError(f"MuJoCo could not build this body: {exc}") from exc
    body = model.flex_vertbodyid[:n]
    free = np.ones(n, bool)
    free[pinned] = False
    if (body[free] <= 0).any():
        raise SimulationError("MuJoCo did not give every free node its own body")
    model.body_mass[body[free]] = mass[free]
    # Lumped point masses: a tiny isotropic inertia keeps the mass matrix positive definite.
    model.body_inertia[body[free]] = 1e-6 * mass[free, None] * float(np.mean(np.ptp(x0, 0))) ** 2
    dof = model.body_dofadr[body[free]][:, None] + np.arange(3)  # three world-aligned slide joints per node
    model.dof_damping[dof.ravel()] = params.drag * np.repeat(mass[free], 3)

    data = mujoco.MjData(model)
    mujoco.mj_setConst(model, data)  # derived constants (dof_M0, invweights) from the masses set above
    spin = np.cross(np.asarray(params.angular_velocity), x0 - x0.mean(0))
    v0 = np.asarray(params.initial_velocity, np.float64) + spin
    data.qvel[dof.ravel()] = v0[free].ravel()

    out = np.empty((params.frames + 1, n, 3), np.float32)
    out[0] = x0
    failed = [int(mujoco.mjtWarning.mjWARN_BADQACC), int(mujoco.mjtWarning.mjWARN_INERTIA)]
    limit = 10.0 * bbox_diagonal(x0)  # a node this far from where it started has blown up
    for frame in range(1, params.frames + 1):
        if should_cancel is not None and should_cancel():
            raise Cancelled("the reference simulation was cancelled")
        mujoco.mj_step(model, data, nstep=steps)
        x = data.flexvert_xpos[:n]
        if any(data.warning[w].number > 0 for w in failed) or not np.isfinite(x).all():
            raise _Unstable(frame)
        if np.linalg.norm(x - x.mean(0) - (x0 - x0.mean(0)), axis=1).max() > limit:
            raise _Unstable(frame)
        out[frame] = x
        if progress is not None:
            progress(frame / params.frames, f"frame {frame}/{params.frames}")
    out[:, pinned] = x0[pinned].astype(np.float32)
    return out
