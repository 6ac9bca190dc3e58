"""Building and stepping a Newton (VBD) model for one mesh and one set of physical parameters.

Both the dataset and ``python -m model_runtime reference`` go through ``simulate_body``, with the same fixed solver
settings (``SUBSTEPS``, ``ITERATIONS``): VBD is not converged at affordable settings, so its result depends on them
and the learned model must be judged against exactly what it was trained on.

Geometry decides the physics: a tetrahedral body (``tets`` given) is a volumetric Neo-Hookean solid; a triangle
surface alone is a cloth/shell with membrane and bending stiffness derived from E, nu and the thickness.
"""

import math
import os
from collections.abc import Callable

import numpy as np

from ..errors import Cancelled, SimulationError
from ..params import SimParams

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


def lame(stiffness: float, poisson: float) -> tuple[float, float]:
    """Lame parameters (mu, lambda) in Pa from Young's modulus and Poisson ratio."""
    mu = stiffness / (2.0 * (1.0 + poisson))
    lam = stiffness * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
    return mu, lam


def membrane_moduli(params: SimParams) -> tuple[float, float]:
    """A sheet's Lame parameters in plane stress per unit width (N/m): mu h and E h nu / (1 - nu^2)."""
    h, nu = params.thickness, params.poisson
    return lame(params.stiffness, nu)[0] * h, params.stiffness * h * nu / (1.0 - nu**2)


def fill_loose_masses(mass: np.ndarray) -> None:
    """In place: vertices of no triangle/tet carry no mass; give them a typical one so they fall freely."""
    loose = mass <= 0.0
    mass[loose] = float(np.mean(mass[~loose])) if (~loose).any() else 1.0


TET_EDGES = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))  # local vertex pairs of a tetrahedron's six edges


def signed_tet_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Volume of each tetrahedron (M,), positive when its vertices are positively oriented."""
    a, b, c, d = (nodes[tets[:, k]] for k in range(4))
    return np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a)) / 6.0


def lumped_tet_masses(nodes: np.ndarray, tets: np.ndarray, density) -> np.ndarray:
    """Each tetrahedron gives rho * V_tet / 4 to each of its four vertices (``density``: one value or one per tet)."""
    m = np.zeros(len(nodes))
    np.add.at(m, tets.reshape(-1), np.repeat(density * np.abs(signed_tet_volumes(nodes, tets)) / 4.0, 4))
    return m


def lumped_triangle_masses(vertices: np.ndarray, faces: np.ndarray, areal_density: float) -> np.ndarray:
    """Each triangle gives rho_A * A / 3 to each of its three vertices."""
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    m = np.zeros(len(vertices))
    np.add.at(m, faces.reshape(-1), np.repeat(areal_density * area / 3.0, 3))
    return m


def mean_edge_length(vertices: np.ndarray, faces: np.ndarray) -> float:
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return float(np.linalg.norm(vertices[e[:, 0]] - vertices[e[:, 1]], axis=1).mean())


def _bending_stiffness(vertices: np.ndarray, faces: np.ndarray, plate_modulus: float) -> float:
    """Newton's per-edge bending energy is 1/2 k L_e (theta - theta0)^2; the discrete-shell energy of a plate with
    bending modulus D is 1/2 D 3 L_e^2 / A_e (theta - theta0)^2 (A_e: both adjacent triangles), so k = 3 D L_e / A_e,
    taken at the mesh's mean edge length and triangle area (the meshes here are near-uniform)."""
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    tri_area = float(np.mean(0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)))
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
        mu, lam = lame(params.stiffness, params.poisson)
        builder.add_soft_mesh(pos=wp.vec3(0.0, 0.0, 0.0), rot=ident, scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0),
                              vertices=[wp.vec3(*p) for p in x0], indices=np.asarray(tets, np.int32).reshape(-1),
                              density=params.density, k_mu=mu, k_lambda=lam, k_damp=params.damping * mu,
                              particle_radius=radius)
        mass = lumped_tet_masses(x0, tets, params.density) if node_mass is None else params.density * node_mass
    else:
        h = params.thickness
        plate = params.stiffness * h**3 / (12.0 * (1.0 - params.poisson**2))
        k_bend = _bending_stiffness(x0, faces, plate)
        mu_s, lam_s = membrane_moduli(params)
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
