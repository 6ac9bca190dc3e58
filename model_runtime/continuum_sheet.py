"""Sheets (open surfaces: cloth): the continuum's own dynamics on a coarse triangulation that carries the mesh.

The decoder's smooth span locks a sheet's membrane (docs/decisions.md: a strip 6-9x too stiff in frequency in the
learned span), so a sheet's generalized coordinates are the positions of a coarse sheet's nodes: the mesh itself
when it is small, its quadric-error decimation (fast_simplification, borders and holes kept) otherwise. Each vertex
rides the nearest coarse triangle, at its barycentric coordinates and its distance along the triangle's normal. The
nodes follow the sheet law (``shells``: plane-stress membrane plus discrete-shell bending in SI units from E, nu and
the thickness), lumped masses from the mesh's own area, drag c M, Rayleigh beta K, pins exact, and the reference's
penalty contact on the nodes, stepped by implicit midpoint as the pinned solids are (continuum_solid.py), each step
a Newton minimization with sparse solves.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.spatial import cKDTree

from .bdf2 import NEWTON_TOLERANCE, RAYLEIGH_REFRESH
from .contact import CONTACT_STIFFNESS, Collider, implicit_viscosity
from .errors import Cancelled, SimulationError
from .frame_motion import FrameMotion
from .mesh import Mesh, bbox_diagonal, face_areas, is_closed
from .params import SimParams
from .shells import ShellElasticity
from .tets import StiffnessPattern
from .tets import node_masses as tet_node_masses
from .wind import make_wind

MAX_NODES = 600  # a sheet with more vertices is simulated on a decimation to about this many nodes
STEP_RATE = 192.0  # steps per simulated second at least (whole steps per frame), as the pinned solids take
MAX_NEWTON = 40  # iterations per step before it is retried as two half steps
RETRIES = 3  # halvings of a step before the simulation is given up
CHORD_ITERATIONS = 4  # iterations on one kept stiffness before it is retaken
CANDIDATES = 8  # nearest coarse triangles (by centroid) among which a vertex finds the closest point
# the average vector field's elastic force, int_0^1 grad Psi(q + s (q' - q)) ds, by two-point Gauss (node s, weight):
# exact for the membrane's cubic gradient, so a step without dissipation keeps the membrane's energy exactly
AVERAGE_POINTS = ((0.5 - 0.5 / math.sqrt(3.0), 0.5), (0.5 + 0.5 / math.sqrt(3.0), 0.5))
QUANTUM = 2.0**-24  # decimation sees coordinates rounded to this fraction of the diagonal, so a turned scene
#                     (whose coordinates differ by round-off) is decimated the same way

Progress = Callable[[float, str], None]


@dataclass
class Sheet:
    """A mesh's coarse sheet: ``nodes`` (n, 3) and ``triangles`` (T, 3) at rest, ``held`` (n,) nodes the pins hold,
    ``area`` (n,) of the mesh each node carries (m^2: the mass per unit area times it is the node's mass), and
    each vertex's triangle ``at`` (V,), barycentric ``weights`` (V, 3) and ``offset`` (V,) along its normal (m)."""

    nodes: np.ndarray
    triangles: np.ndarray
    held: np.ndarray
    area: np.ndarray
    at: np.ndarray
    weights: np.ndarray
    offset: np.ndarray
    edge: float  # m, the median coarse edge: Newton's tolerance is a fraction of it

    def carry(self, x: np.ndarray) -> np.ndarray:
        """Vertex positions (V, 3) of node positions x (n, 3)."""
        corners = x[self.triangles[self.at]]  # (V, 3, 3)
        normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
        return np.einsum("vk,vkd->vd", self.weights, corners) + self.offset[:, None] * normal


def applies(mesh: Mesh, params: SimParams) -> bool:
    """Whether this path simulates the body: an open surface (a sheet)."""
    return not is_closed(mesh)


def build(mesh: Mesh, params: SimParams, progress: Progress | None = None,
          should_cancel: Callable[[], bool] | None = None) -> Sheet:
    """What this path builds once for a mesh and its parameters' pins (``build_sheet``; too quick to report on)."""
    return build_sheet(mesh, params.pins)


def build_sheet(mesh: Mesh, pins: np.ndarray) -> Sheet:
    """The coarse sheet of a mesh and its pins (vertex indices): a fraction of a second."""
    vertices = mesh.vertices.astype(np.float64)
    if len(vertices) <= MAX_NODES or len(mesh.faces) <= 2 * MAX_NODES:
        nodes, triangles, used = _used(vertices, mesh.faces.astype(np.int64))
    else:
        import fast_simplification

        quantum = QUANTUM * bbox_diagonal(vertices)
        nodes, triangles = fast_simplification.simplify(np.round(vertices / quantum) * quantum,
                                                        mesh.faces.astype(np.int64), target_count=2 * MAX_NODES)
        nodes, triangles, _ = _used(np.asarray(nodes, np.float64), np.asarray(triangles, np.int64))
        used = None  # the nodes are not the mesh's vertices
    if not len(triangles):
        raise SimulationError("the surface has no triangle with an area to simulate")
    at, weights, offset = _embed(vertices, nodes, triangles)
    held = np.zeros(len(nodes), bool)
    if used is None:  # every node of a triangle that carries a pinned vertex is held
        held[triangles[at[pins]].ravel()] = True
    else:  # the mesh is its own sheet: exactly the pinned vertices are held
        held[np.flatnonzero(np.isin(used, pins))] = True
    vertex_area = np.zeros(len(vertices))
    np.add.at(vertex_area, mesh.faces.ravel(), np.repeat(face_areas(mesh) / 3.0, 3))
    area = np.zeros(len(nodes))
    np.add.at(area, triangles[at].ravel(), (weights * vertex_area[:, None]).ravel())
    edges = np.linalg.norm(nodes[triangles] - nodes[np.roll(triangles, 1, axis=1)], axis=-1)
    return Sheet(nodes, triangles, held, area, at, weights, offset, float(np.median(edges)))


def _used(nodes: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Drop degenerate triangles and the nodes no triangle uses: the nodes, triangles, and which of the given nodes
    each kept one is."""
    a, b, c = (nodes[triangles[:, k]] for k in range(3))
    keep = np.linalg.norm(np.cross(b - a, c - a), axis=1) > 1e-12 * bbox_diagonal(nodes) ** 2
    used, inverse = np.unique(triangles[keep], return_inverse=True)
    return nodes[used], inverse.reshape(-1, 3), used


def _embed(points: np.ndarray, nodes: np.ndarray, triangles: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each point's closest coarse triangle among the CANDIDATES nearest by centroid: its index (P,), the
    barycentric coordinates (P, 3) of the closest point and the signed distance (P,) along the triangle's normal."""
    corners = nodes[triangles]
    k = min(CANDIDATES, len(triangles))
    _, near = cKDTree(corners.mean(1)).query(points, k=k)
    near = near.reshape(len(points), k)
    bary = _closest_barycentric(points[:, None], corners[near])  # (P, k, 3)
    closest = np.einsum("pkc,pkcd->pkd", bary, corners[near])
    best = np.linalg.norm(points[:, None] - closest, axis=-1).argmin(1)
    at = near[np.arange(len(points)), best]
    c = corners[at]
    normal = np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
    offset = ((points - c[:, 0]) * normal).sum(1)
    # the in-plane point's own barycentric coordinates, negative outside the triangle: a vertex the decimation's
    # border passes inside of is carried where it is, not onto the border
    weights = _plane_barycentric(points - offset[:, None] * normal, c)
    return at, weights, offset


def _plane_barycentric(p: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (..., 3) of points p (..., 3) in the planes of triangles tri (..., 3, 3)."""
    a, b, c = tri[..., 0, :], tri[..., 1, :], tri[..., 2, :]
    ab, ac, ap = b - a, c - a, p - a
    d00, d01, d11 = (ab * ab).sum(-1), (ab * ac).sum(-1), (ac * ac).sum(-1)
    d20, d21 = (ap * ab).sum(-1), (ap * ac).sum(-1)
    det = np.maximum(d00 * d11 - d01 * d01, 1e-300)
    v, w = (d11 * d20 - d01 * d21) / det, (d00 * d21 - d01 * d20) / det
    return np.stack([1.0 - v - w, v, w], -1)


def _closest_barycentric(p: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """Barycentric coordinates (..., 3) of the point of each triangle tri (..., 3, 3) closest to p (..., 3): the
    plane's projection when it falls inside, else the closest point of the nearest edge."""
    inside = _plane_barycentric(p, tri)
    projected = np.einsum("...c,...cd->...d", inside, tri)
    best, best_distance = inside, np.where((inside >= 0).all(-1), np.linalg.norm(p - projected, axis=-1), np.inf)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        start, edge = tri[..., i, :], tri[..., j, :] - tri[..., i, :]
        s = np.clip(((p - start) * edge).sum(-1) / np.maximum((edge * edge).sum(-1), 1e-300), 0.0, 1.0)
        distance = np.linalg.norm(p - start - s[..., None] * edge, axis=-1)
        candidate = np.zeros_like(inside)
        np.put_along_axis(candidate, np.full(s.shape + (1,), i), (1.0 - s)[..., None], -1)
        np.put_along_axis(candidate, np.full(s.shape + (1,), j), s[..., None], -1)
        closer = distance < best_distance
        best, best_distance = np.where(closer[..., None], candidate, best), np.where(closer, distance, best_distance)
    return best


class _Contact:
    """Penalty contact of the free nodes with static colliders, the reference's law (contact.CONTACT_*) as the
    pinned solids take it: energy k m depth^2 / 2 with Gauss-Newton stiffness k m n n^T, and a viscosity taken at a
    step's start, Coulomb friction along the surface plus critical damping of the penalty along the normal. The
    stiffness and viscosity are 3 x 3 blocks (K, 3, 3) at the touching nodes (K,)."""

    def __init__(self, mass: np.ndarray, colliders: tuple[Collider, ...]):
        self.m, self.colliders = mass, colliders

    def _touching(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        idx, depths, normals = [], [], []
        for collider in self.colliders:
            depth, normal = collider.penetration(x)
            inside = np.flatnonzero(depth > 0.0)
            idx.append(inside)
            depths.append(depth[inside])
            normals.append(normal[inside])
        return np.concatenate(idx), np.concatenate(depths), np.concatenate(normals)

    def energy_force_stiffness(self, x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Energy (J), gradient (n, 3), and the touching nodes with their stiffness blocks."""
        idx, depth, normal = self._touching(x)
        w = CONTACT_STIFFNESS * self.m[idx]
        g = np.zeros_like(x)
        np.add.at(g, idx, -(w * depth)[:, None] * normal)
        return 0.5 * float(w @ depth**2), g, idx, w[:, None, None] * normal[:, :, None] * normal[:, None, :]

    def viscosity(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The touching nodes and their viscosity blocks at (x, v): friction mu N / max(slide, SLIP_SPEED) along
        the surface, 2 sqrt(k) m along the normal."""
        idx, depth, normal = self._touching(x)
        nn = normal[:, :, None] * normal[:, None, :]
        slide = np.linalg.norm(v[idx] - (v[idx] * normal).sum(1, keepdims=True) * normal, axis=1)
        friction, normal_damping = implicit_viscosity(self.m[idx], depth, slide)
        return idx, friction[:, None, None] * (np.eye(3) - nn) + normal_damping[:, None, None] * nn


def simulate(sheet: Sheet, mesh: Mesh, params: SimParams, progress: Progress | None = None,
             should_cancel: Callable[[], bool] | None = None, colliders: tuple[Collider, ...] = ()) -> np.ndarray:
    """Vertex positions (frames + 1, V, 3) float32 from rest, with ``colliders`` in the mesh's coordinates."""
    return positions(sheet, mesh, params.pins, integrate(sheet, params, progress, should_cancel, colliders)[0])


def positions(sheet: Sheet, mesh: Mesh, pins: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Vertex positions (T, V, 3) float32 of node positions X (T, n, 3), pins exactly at rest."""
    out = np.stack([sheet.carry(x) for x in X]).astype(np.float32)
    out[0] = mesh.vertices
    out[:, pins] = mesh.vertices[pins]
    if not np.isfinite(out).all():
        raise SimulationError("the simulation produced non-finite positions; try a stiffer material, a lower "
                              "gravity or more drag")
    return out


def node_masses(sheet: Sheet, params: SimParams) -> np.ndarray:
    """Lumped node masses (kg): the mesh's area each node carries times the mass per unit area rho h (floored as
    a lattice's nodes are, so that a node few vertices ride keeps a mass)."""
    return tet_node_masses(sheet.area * params.thickness, params.density)


def energies(sheet: Sheet, params: SimParams, X: np.ndarray, Xd: np.ndarray) -> dict[str, np.ndarray]:
    """Kinetic, elastic and gravitational energy (J) of each state (T, n, 3)."""
    m = node_masses(sheet, params)
    elastic = ShellElasticity(sheet.nodes, sheet.triangles, params.stiffness, params.poisson, params.thickness)
    return {"kinetic": 0.5 * np.einsum("n,tnd,tnd->t", m, Xd, Xd),
            "elastic": np.array([elastic.energy(x) for x in X]),
            "gravitational": -np.einsum("n,tnd,d->t", m, X - sheet.nodes, np.asarray(params.gravity))}


def integrate(sheet: Sheet, params: SimParams, progress: Progress | None = None,
              should_cancel: Callable[[], bool] | None = None, colliders: tuple[Collider, ...] = ()
              ) -> tuple[np.ndarray, np.ndarray]:
    """Node positions and velocities (frames + 1, n, 3) at every frame from rest: implicit midpoint steps,
    STEP_RATE steps per simulated second at least."""
    p = params
    x0 = sheet.nodes
    m = node_masses(sheet, p)
    free = ~sheet.held
    free_dof = np.full(3 * len(x0), -1)
    free_dof[np.repeat(free, 3)] = np.arange(3 * int(free.sum()))
    system = _System(ShellElasticity(x0, sheet.triangles, p.stiffness, p.poisson, p.thickness), free_dof,
                     _Contact(m[free], colliders) if colliders else None, sheet.edge)
    wind = make_wind(p.wind)
    frame = None if p.frame_motion is None else FrameMotion(p.frame_motion, p.fps)
    gravity = np.asarray(p.gravity, np.float64)

    def push(t, x, v):
        """External acceleration of every node at time t: gravity, wind and an animated object's inertial ones."""
        a = np.broadcast_to(gravity, x.shape) if wind is None else gravity + wind.acceleration(t, x)
        if frame is not None:
            felt, turn = frame.acceleration(t, x, v)
            a = a @ turn - felt
        return a

    steps = max(1, math.ceil(STEP_RATE / p.fps - 1e-9))
    h = 1.0 / (p.fps * steps)
    centre = (m[:, None] * x0).sum(0) / m.sum()
    v = np.asarray(p.initial_velocity, np.float64) + np.cross(np.asarray(p.angular_velocity, np.float64), x0 - centre)
    v[sheet.held] = 0.0
    x = x0.copy()
    xs, vs = [x.copy()], [v.copy()]
    v_prev = None
    for frame_index in range(p.frames):
        if should_cancel is not None and should_cancel():
            raise Cancelled("simulation cancelled")
        for k in range(steps):
            t = (frame_index * steps + k) * h
            force = (m[:, None] * push(t, x, v))[free]
            x_new, v_new = system.advance(m[free], p, force, x, v, v_prev, h)
            v_prev, x, v = v[free], x_new, v_new
        xs.append(x.copy())
        vs.append(v.copy())
        if progress is not None:
            progress((frame_index + 1) / p.frames, f"frame {frame_index + 1} of {p.frames}")
    return np.stack(xs), np.stack(vs)


class _Banded:
    """Cholesky factorizations of symmetric positive definite matrices on one sparsity pattern (their entries given
    in the pattern's order), in the band that reverse Cuthill-McKee's ordering gives it: a sheet's nodes couple
    only to their neighbours, so the band is narrow."""

    def __init__(self, pattern: StiffnessPattern):
        structure = pattern.matrix(np.ones(pattern.nnz), 0.0)
        self.order = reverse_cuthill_mckee(structure, symmetric_mode=True)
        where = np.empty_like(self.order)
        where[self.order] = np.arange(len(self.order))
        rows = np.repeat(np.arange(pattern.size), np.diff(pattern.indptr))
        i, j = where[rows], where[pattern.indices]
        self.upper = np.flatnonzero(i <= j)
        self.width = int((j - i)[self.upper].max())
        self.shape = (self.width + 1, pattern.size)
        self.slot = (self.width + i - j)[self.upper] * pattern.size + j[self.upper]

    def factor(self, data: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The solve x = A^-1 b of the matrix A with entries ``data`` on the pattern."""
        band = np.zeros(self.shape)
        band.ravel()[self.slot] = data[self.upper]
        try:
            factor = la.cholesky_banded(band, lower=False, check_finite=False)
        except np.linalg.LinAlgError as error:
            raise SimulationError("the sheet's step lost its positive stiffness; try a stiffer material, a lower "
                                  "gravity or more drag") from error

        def solve(b: np.ndarray) -> np.ndarray:
            x = np.empty_like(b)
            x[self.order] = la.cho_solve_banded((factor, False), b[self.order], check_finite=False)
            return x
        return solve


class _System:
    """A sheet's implicit midpoint step over its free nodes, with the held nodes at rest. Matrices are entry vectors
    on the stiffness's sparsity pattern."""

    def __init__(self, elastic: ShellElasticity, free_dof: np.ndarray, contact: _Contact | None, edge: float):
        self.elastic, self.contact = elastic, contact
        self.free = free_dof.reshape(-1, 3)[:, 0] >= 0
        self.pattern = StiffnessPattern(elastic.elements, free_dof)
        self.banded = _Banded(self.pattern)
        self.tolerance = NEWTON_TOLERANCE * edge
        # the pattern's entry of each free node's 3 x 3 diagonal block (n, 9), where contacts add theirs
        pattern = self.pattern
        keys = np.repeat(np.arange(pattern.size), np.diff(pattern.indptr)) * pattern.size + pattern.indices
        dof = 3 * np.arange(pattern.size // 3)[:, None] + np.arange(3)
        self.block_slot = np.searchsorted(keys, (dof[:, :, None] * pattern.size + dof[:, None, :]).reshape(-1, 9))
        self.K: np.ndarray | None = None
        self.F = None
        self.solve: tuple[float, Callable[[np.ndarray], np.ndarray]] | None = None  # (step size, its solve)

    def _kept(self, x: np.ndarray, retake: bool = False) -> np.ndarray:
        """The stiffness Newton and Rayleigh damping take, kept from step to step (with its factorization) and
        retaken, as the reference does, once a triangle's F moves by RAYLEIGH_REFRESH from where it was taken, or
        when Newton stalls on it."""
        F = self.elastic.deformation(x)
        if retake or self.K is None or np.abs(F - self.F).max() > RAYLEIGH_REFRESH:
            self.K = self.pattern.assemble(self.elastic.hessian_blocks(x))
            self.F, self.solve = F, None
        return self.K

    def _blocks(self, idx: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """Entries on the pattern of 3 x 3 ``blocks`` at free nodes ``idx``."""
        return np.bincount(self.block_slot[idx].ravel(), blocks.ravel(), self.pattern.nnz)

    def step(self, m: np.ndarray, p: SimParams, force: np.ndarray, x: np.ndarray, v: np.ndarray,
             v_prev: np.ndarray | None, h: float) -> tuple[np.ndarray, np.ndarray]:
        """One implicit midpoint step (as continuum_solid._step, in node coordinates) with the average vector
        field's elastic force, so that without dissipation the step keeps the energy: the free nodes' midpoint y
        minimizes Phi(y) = 1/2 |y - q - h/2 v|_M^2 + (h/2)^2 [Psi_avf(y) + Psi_c(y) - f.y + 1/h |y - q|_D^2] with
        D = c M + beta K(q) plus the contacts' viscosity, then q' = 2 y - q and v' = 4 (y - q) / h - v."""
        free, pattern = self.free, self.pattern
        q, qd = x[free], v[free]
        tau2, alpha, q_hat = 0.25 * h * h, 2.0 / h, q + 0.5 * h * qd
        y = q_hat if v_prev is None else q + 0.5 * h * (1.5 * qd - 0.5 * v_prev)
        mass = np.repeat(m, 3)
        K = self._kept(x)
        damp = p.damping * K
        touching = False
        if self.contact is not None:
            idx, blocks = self.contact.viscosity(q, qd)
            touching = len(idx) > 0
            damp = damp + self._blocks(idx, blocks)
        damp_matrix = pattern.matrix(damp, p.drag * mass)
        full = x.copy()
        start = self.elastic.energy(x)

        def potential(y_):
            # the elastic part is the average vector field's: int_0^1 (Psi(q + 2 s (y - q)) - Psi(q)) / (2 s) ds,
            # whose gradient in y is the mean elastic gradient along the step's chord
            e, g, H_c = 0.0, np.zeros_like(y_), 0.0
            for s_, w in AVERAGE_POINTS:
                full[free] = q + 2.0 * s_ * (y_ - q)
                e_s, g_s = self.elastic.energy_and_gradient(full)
                e, g = e + 0.5 * w * (e_s - start) / s_, g + w * g_s[free]
            if self.contact is not None:
                e_c, g_c, idx, blocks = self.contact.energy_force_stiffness(y_)
                e, g, H_c = e + e_c, g + g_c, self._blocks(idx, blocks)
            d = (y_ - q).ravel()
            dd = damp_matrix @ d
            r = (y_ - q_hat).ravel()
            phi = 0.5 * r @ (mass * r) + tau2 * (e - force.ravel() @ y_.ravel() + 0.5 * alpha * d @ dd)
            return phi, mass * r + tau2 * (g.ravel() - force.ravel() + alpha * dd), H_c

        phi, g, H_c = potential(y)
        solve = self.solve[1] if self.solve is not None and self.solve[0] == h and not touching else None
        s = 1.0
        for iteration in range(MAX_NEWTON):
            if iteration and (iteration % CHORD_ITERATIONS == 0 or s < 1.0):  # stale, or the last step was cut
                full[free] = y
                K, solve = self._kept(full, retake=True), None
            if solve is None:
                A = tau2 * (K + alpha * damp + H_c)
                A[pattern.diag_slot] += mass * (1.0 + tau2 * alpha * p.drag)
                solve = self.banded.factor(A)
                if not touching:
                    self.solve = (h, solve)
            dy = -solve(g).reshape(-1, 3)
            s = 1.0
            while True:
                phi_new, g_new, H_new = potential(y + s * dy)
                if phi_new <= phi + 1e-4 * s * (g @ dy.ravel()) or s < 1e-6:
                    break
                s *= 0.5
            y, phi, g, H_c = y + s * dy, phi_new, g_new, H_new
            if s * float(np.abs(dy).max()) <= self.tolerance:
                x_new, v_new = x.copy(), np.zeros_like(v)
                x_new[free], v_new[free] = 2.0 * y - q, 2.0 * alpha * (y - q) - qd
                return x_new, v_new
        raise _NotConverged

    def advance(self, m: np.ndarray, p: SimParams, force: np.ndarray, x: np.ndarray, v: np.ndarray,
                v_prev: np.ndarray | None, h: float, retries: int = RETRIES) -> tuple[np.ndarray, np.ndarray]:
        """``step``, or where its Newton does not converge (a sheet buckling or whipping faster than the step), two
        steps of half the size, as the reference does (force held at the step's start)."""
        try:
            return self.step(m, p, force, x, v, v_prev, h)
        except _NotConverged:
            if not retries:
                raise SimulationError("the sheet's step did not converge; try a stiffer material, a lower gravity "
                                      "or more drag") from None
        x, v = self.advance(m, p, force, x, v, None, 0.5 * h, retries - 1)
        return self.advance(m, p, force, x, v, None, 0.5 * h, retries - 1)


class _NotConverged(Exception):
    """A step's Newton iterations ran out."""
