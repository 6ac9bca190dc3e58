"""Building and stepping a Newton (VBD) model for one mesh and one set of physical parameters.

No longer the reference: ``python -m model_runtime reference`` runs ``implicit_fem`` (solids) and ``mujoco_engine``
(cloth). VBD remains for the v1 dataset's settings (``reference.DATASET``: TetGen solids and VBD cloth, fixed
``SUBSTEPS`` x ``ITERATIONS``, not converged, so v1 is reproducible only with exactly these) and for
``SolverSettings`` that name it (``cloth_engine="newton"`` or ``solid_engine="newton"``) in comparisons.

Geometry decides the physics: a tetrahedral body (``tets`` given) is a volumetric Neo-Hookean solid; a triangle
surface alone is a cloth/shell with membrane and bending stiffness derived from E, nu and the thickness.
"""

import math
import os
from collections.abc import Callable

import numpy as np

from ... import elasticity
from ...errors import Cancelled, SimulationError
from ...mesh import Mesh, face_areas
from ...params import SimParams
from .elements import fill_loose_masses, lumped_tet_masses, lumped_triangle_masses, mean_edge_length

# Fixed solver settings for the dataset and the reference alike (12 substeps of 1/288 s at 24 fps, 2 VBD
# iterations each). Measured on this CPU on a clamped box beam: substeps converge VBD far better than iterations
# (64x2 beat 32x10 and 8x30), but each substep costs ~2 ms of launch overhead plus ~1.5 ms per iteration at ~400
# nodes, so 12x2 is what a 48-frame sequence affords in ~3 s. It is NOT converged: stiff slender bodies come out
# several times softer than beam theory (issue 8); the dataset's E is the solver's nominal value at these settings.
SUBSTEPS = 12
ITERATIONS = 2
CONTACT_STIFFNESS_PER_KG = 2.0e4  # ground penalty, N/m per kg of body mass: ~1 mm of penetration under 1 g at rest
CONTACT_FRICTION = 0.5

_warp_ready = False


def _init_warp():
    """Import warp/newton once per process, quietly, with the kernel cache where WARP_CACHE_PATH says."""
    global _warp_ready
    import warp as wp

    if not _warp_ready:
        wp.config.quiet = True
        if os.environ.get("WARP_CACHE_PATH"):
            wp.config.kernel_cache_dir = os.environ["WARP_CACHE_PATH"]
        wp.init()
        _warp_ready = True
    return wp


def _bending_stiffness(vertices: np.ndarray, faces: np.ndarray, plate_modulus: float) -> float:
    """Newton's per-edge bending energy is 1/2 k L_e (theta - theta0)^2; the discrete-shell energy of a plate with
    bending modulus D is 1/2 D 3 L_e^2 / A_e (theta - theta0)^2 (A_e: both adjacent triangles), so k = 3 D L_e / A_e,
    taken at the mesh's mean edge length and triangle area (the meshes here are near-uniform)."""
    tri_area = float(np.mean(face_areas(Mesh(vertices, faces))))
    return 3.0 * plate_modulus * mean_edge_length(vertices, faces) / max(2.0 * tri_area, 1e-30)


def simulate_body(
    vertices: np.ndarray,
    faces: np.ndarray,
    params: SimParams,
    tets: np.ndarray | None = None,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    substeps: int = SUBSTEPS,
    iterations: int = ITERATIONS,
    node_mass: np.ndarray | None = None,
    tet_scale: np.ndarray | None = None,
    pinned: np.ndarray | None = None,
    center: np.ndarray | None = None,
) -> np.ndarray:
    """Simulate and return float32 positions (frames+1, N, 3) of all N simulated nodes.

    ``vertices`` are all nodes (for a tet body: surface vertices first, then interior nodes); ``faces`` the surface
    triangles; ``tets`` (M, 4) makes it a volumetric body, otherwise it is cloth of ``params.thickness``.
    ``node_mass``, ``tet_scale``, ``pinned`` and ``center`` serve embedded bodies
    (``reference.simulate_reference``): ``node_mass`` are lumped masses per unit density (m^3) replacing the
    tets' own, ``tet_scale`` multiplies each tet's Lame parameters (the fraction of it the real body fills),
    ``pinned`` are the node indices held in place (default ``params.pins``), ``center`` the point the initial
    angular velocity turns about (default: the nodes' mean).
    """
    wp = _init_warp()
    import newton

    x0 = np.asarray(vertices, np.float64)
    n = len(x0)
    g = np.asarray(params.gravity, np.float64)
    builder = newton.ModelBuilder(gravity=wp.vec3(*g))
    if tets is not None:
        t = np.asarray(tets)
        edge = float(np.linalg.norm(x0[t[:, 0]] - x0[t[:, 1]], axis=1).mean())
    else:
        edge = mean_edge_length(x0, faces)
    radius = 0.1 * edge
    ident = wp.quat_identity()
    if tets is not None:
        mu, lam = elasticity.lame(params.stiffness, params.poisson)
        builder.add_soft_mesh(pos=wp.vec3(0.0, 0.0, 0.0), rot=ident, scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0),
                              vertices=[wp.vec3(*p) for p in x0], indices=np.asarray(tets, np.int32).reshape(-1),
                              density=params.density, k_mu=mu, k_lambda=lam, k_damp=params.damping * mu,
                              particle_radius=radius)
        mass = lumped_tet_masses(x0, tets, params.density) if node_mass is None else params.density * node_mass
    else:
        h = params.thickness
        plate = elasticity.bending_modulus(params.stiffness, params.poisson, h)
        k_bend = _bending_stiffness(x0, faces, plate)
        mu_s, lam_s = elasticity.plane_stress_moduli(params.stiffness, params.poisson, h)
        builder.add_cloth_mesh(pos=wp.vec3(0.0, 0.0, 0.0), rot=ident, scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0),
                               vertices=[wp.vec3(*p) for p in x0], indices=np.asarray(faces, np.int32).reshape(-1),
                               density=params.density * h, tri_ke=mu_s, tri_ka=lam_s, tri_kd=params.damping * mu_s,
                               edge_ke=k_bend, edge_kd=params.damping * k_bend, particle_radius=radius)
        mass = lumped_triangle_masses(x0, faces, params.density * h)
    if len(builder.particle_mass) != n:
        raise SimulationError(f"Newton built {len(builder.particle_mass)} particles for {n} vertices")
    fill_loose_masses(mass)
    if node_mass is not None:  # embedded nodes barely inside the body: a floor keeps them from being stiff-and-massless
        mass = np.maximum(mass, 0.02 * float(np.mean(mass)))
    mass[np.asarray(params.pins if pinned is None else pinned, np.int64)] = 0.0  # zero mass = kinematic: pinned
    builder.particle_mass = [float(m) for m in mass]
    if params.ground is not None:
        builder.add_ground_plane(height=float(params.ground))
    builder.color(include_bending=tets is None)
    model = builder.finalize(device="cpu")
    if tet_scale is not None:
        mat = model.tet_materials.numpy()
        mat *= np.asarray(tet_scale, np.float32)[:, None]
        model.tet_materials.assign(mat)
    model.soft_contact_ke = CONTACT_STIFFNESS_PER_KG * float(mass.sum())
    model.soft_contact_kd = 0.0
    model.soft_contact_mu = CONTACT_FRICTION

    solver = newton.solvers.SolverVBD(model, iterations=iterations)
    s0, s1 = model.state(), model.state()
    control = model.control()
    pipe = newton.CollisionPipeline(model) if params.ground is not None else None
    contacts = pipe.contacts() if pipe is not None else None

    free = mass > 0.0
    centroid = x0.mean(0) if center is None else np.asarray(center, np.float64)
    v0 = np.asarray(params.initial_velocity) + np.cross(np.asarray(params.angular_velocity), x0 - centroid)
    v0[~free] = 0.0
    s0.particle_qd.assign(v0.astype(np.float32))
    s0.particle_q.assign(x0.astype(np.float32))

    dt = 1.0 / (params.fps * substeps)
    drag_scale = math.exp(-params.drag * dt)  # exact decay of dv/dt = -c v over one substep
    out = np.empty((params.frames + 1, n, 3), np.float32)
    out[0] = x0
    for frame in range(1, params.frames + 1):
        if should_cancel is not None and should_cancel():
            raise Cancelled("the reference simulation was cancelled")
        for _ in range(substeps):
            s0.clear_forces()
            if pipe is not None:
                pipe.collide(s0, contacts)
            solver.step(s0, s1, control, contacts, dt)
            s0, s1 = s1, s0
            if drag_scale != 1.0:
                qd = s0.particle_qd.numpy()  # CPU arrays share memory with numpy
                qd *= drag_scale
        out[frame] = s0.particle_q.numpy()
        if not np.isfinite(out[frame]).all():
            raise SimulationError(f"the simulation diverged at frame {frame} (non-finite positions)")
        if progress is not None:
            progress(frame / params.frames, f"frame {frame}/{params.frames}")
    out[:, ~free] = x0[~free].astype(np.float32)  # pins exactly where they were (VBD keeps them; float32 noise)
    return out
