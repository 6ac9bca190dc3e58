"""Pinned solids: the continuum's own dynamics in the subspace of the body's low vibration modes and their modal
derivatives.

The solid is embedded in the validated reference's lattice (``lattice.embed_solid``: the same cubes, held nodes
and surface weights, finer across slender bodies), and its nodes move as x = X + U q. U spans the lattice's lowest
linear vibration modes about rest, pins held; their modal derivatives (Barbic and James 2005), the static response
to the change of stiffness along one mode acting on another, since linear modes alone rotate by stretching and lock
under large bending; and the static responses to a uniform load along each axis, the shape a steady load settles
into (docs/decisions.md). q follows the reference's dynamics (stable Neo-Hookean, lumped masses, drag c M,
Rayleigh beta K, pins exact, the reference's penalty contact with the colliders on the surface's vertices) by
implicit midpoint steps, each a minimization by Newton in q, with the elastic energy
integrated by an optimized cubature (An, Kim and James 2008): a few hundred of the lattice's tets with non-negative
weights that reproduce the reduced forces of training poses on the modes' quadratic manifold.

What does not depend on E or density is built once per mesh, pins and Poisson ratio (``Subspace``): for a fixed
Poisson ratio the energy is proportional to E, and the unit-density M-orthonormal modes span the same space at any
density, so a re-simulate after a stiffness, mass, drag or gravity change only integrates.
"""

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.optimize as opt
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .bdf2 import NEWTON_TOLERANCE, RAYLEIGH_REFRESH
from .contact import CONTACT_STIFFNESS, Collider, implicit_viscosity
from .errors import Cancelled, SimulationError
from .frame_motion import FrameMotion
from .lattice import EmbeddedSolid, LatticeSize, embed_solid, held_together, lattice_cell
from .mesh import Mesh, bbox_diagonal, enclosed_volume, face_areas, is_closed
from .params import SimParams
from .tets import StiffnessPattern, TetElasticity, node_masses, signed_tet_volumes
from .wind import make_wind
from .winding import enclosed_by_winding

# The reference's lattice, finer across slender bodies: linear tets lock in bending at Poisson 0.45, and the L/a 5
# rubber cantilever sags 0.84 of Euler-Bernoulli at the reference's 8 cells across its thickness, 0.90 at 12.
LATTICE = LatticeSize(min_cells_across=12, max_lattice_cells=12_000)
MODES = 8  # lowest vibration modes kept; with their 36 modal derivatives and 3 static loads, up to 47 dimensions
CANDIDATES = 4000  # lattice tets the cubature chooses from (a random sample of them when there are more)
POSES = 48  # training poses for the cubature
POSE_REACH = (0.003, 0.3)  # a pose's largest node displacement, as a fraction of the diagonal (log-uniform)
CUBATURE_ERROR = 0.01  # relative error of the training poses' reduced forces at which the cubature stops growing
MAX_CUBATURE = 600  # tets at most in the cubature
# Implicit midpoint's energy error under large deformation falls as h^3: the 0.6 m jelly box of the physics checks
# drifts by 5.9% of its largest kinetic energy over 5 s at 96 steps/s, 0.75% at 192.
STEP_RATE = 192.0  # steps per simulated second at least (whole steps per frame)
MAX_NEWTON = 40  # iterations per step before the step is given up
CHORD_ITERATIONS = 4  # iterations on one reduced stiffness before it is retaken
# A free body's K is singular along its rigid motions; K + s M factorizes, and s at this fraction of the stiffest
# node's K / m moves the elastic modes by less than that fraction of the highest frequency squared.
RIGID_SHIFT = 1e-8


Progress = Callable[[float, str], None]


@dataclass
class Subspace:
    """The solid's lattice and reduced basis for one mesh, pin set and Poisson ratio.

    ``basis`` (3N, r) is M-orthonormal for unit density (so the reduced mass is density x I), zero on held nodes;
    ``vertex_basis`` (V, 3, r) carries it to the surface; the cubature is ``tets`` (C, 4) with ``weights`` (C,)
    multiplying each tet's stiffness factor and volume."""

    body: EmbeddedSolid
    basis: np.ndarray
    vertex_basis: np.ndarray
    tets: np.ndarray
    weights: np.ndarray
    edge: float  # m, the lattice's typical tet edge: Newton's tolerance is a fraction of it
    cubature_error: float  # relative reduced-force error over the training poses

    @property
    def dims(self) -> int:
        return self.basis.shape[1]


def applies(mesh: Mesh, params: SimParams) -> bool:
    """Whether this path simulates the body: a closed solid with pins (free ones: continuum_free)."""
    return is_closed(mesh) and len(params.pins) > 0


def build(mesh: Mesh, params: SimParams, progress: Progress | None = None,
          should_cancel: Callable[[], bool] | None = None) -> "Subspace":
    """What this path builds once for a mesh and its parameters' pins and Poisson ratio (``build_subspace``)."""
    return build_subspace(mesh, params.pins, params.poisson, progress=progress, should_cancel=should_cancel)


def build_subspace(mesh: Mesh, pins: np.ndarray, poisson: float, seed: int = 0, progress: Progress | None = None,
                   should_cancel: Callable[[], bool] | None = None) -> Subspace:
    """Embed the solid, take its modes and modal derivatives and fit the cubature (seconds to tens of seconds):
    progress in [0, 1] and a chance to cancel between the stages."""
    def stage(fraction: float, message: str) -> None:
        if should_cancel is not None and should_cancel():
            raise Cancelled("simulation cancelled")
        if progress is not None:
            progress(fraction, message)

    stage(0.0, "filling the solid with a lattice")
    volume = enclosed_volume(mesh) if is_closed(mesh) else None
    cell = lattice_cell(mesh.vertices, volume or enclosed_by_winding(mesh), LATTICE)
    body = held_together(embed_solid(mesh, np.asarray(pins, np.int64), volume, cell))
    stage(0.35, "the solid's vibration modes")
    unit = SimParams(stiffness=1.0, density=1.0, poisson=poisson)
    lattice = Lattice(body, unit)
    modes, omega = lattice.modes(MODES)
    stage(0.5, "the modes' derivatives")
    derivatives = lattice.modal_derivatives(modes)
    basis = lattice.orthonormal(np.hstack([modes, derivatives, lattice.static_responses()]))
    stage(0.7, "the solid's cubature")
    rng = np.random.default_rng(seed)
    poses = quadratic_poses(modes, derivatives, omega, bbox_diagonal(mesh.vertices), rng)
    tets, weights, error = fit_cubature(lattice, basis, poses, rng)
    stage(1.0, "the solid's subspace is built")
    return subspace(body, basis, tets, weights * body.stiffness[tets], lattice.edge, error)


def subspace(body: EmbeddedSolid, basis: np.ndarray, tets: np.ndarray | None = None, weights: np.ndarray | None = None,
             edge: float | None = None, error: float = 0.0) -> Subspace:
    """The Subspace of an M-orthonormal (unit density) ``basis`` with a cubature of lattice tet indices ``tets`` and
    ``weights``; by default every tet at its own stiffness factor (the exact reduced energy)."""
    tets = np.arange(len(body.tets)) if tets is None else tets
    weights = body.stiffness if weights is None else weights
    carried = basis.reshape(len(body.nodes), 3, -1)[body.tets[body.at]]  # (V, 4, 3, r)
    vertex_basis = np.einsum("vk,vkdr->vdr", body.weights.astype(np.float64), carried)
    edge = edge or typical_edge(body)
    return Subspace(body, basis, vertex_basis, body.tets[tets], weights, edge, error)


def typical_edge(body: EmbeddedSolid) -> float:
    """The lattice's typical tet edge (m): the edge of a regular tet of the median volume, roughly."""
    return float(np.cbrt(6.0 * np.median(np.abs(signed_tet_volumes(body.nodes.astype(np.float64), body.tets)))))


class Lattice:
    """The whole lattice's elasticity and masses: what the modes, modal derivatives and cubature are built from
    (and the reduced runs of ``benchmarks/lattice_subspace.py``). A body with nothing held is free: its six rigid
    motions (``rigid``, M-orthonormal) are kept out of every basis, which then spans deformation alone."""

    def __init__(self, body: EmbeddedSolid, params: SimParams):
        self.x0 = body.nodes.astype(np.float64)
        self.elastic = TetElasticity(self.x0, body.tets, params, body.stiffness)
        n = len(self.x0)
        self.pattern = StiffnessPattern(body.tets, np.arange(3 * n))
        self.m = np.repeat(node_masses(body.node_volume, params.density), 3)
        self.held = np.zeros(3 * n, bool)
        self.held[(3 * body.held[:, None] + np.arange(3)).ravel()] = True
        self.edge = typical_edge(body)
        self.rigid = None if len(body.held) else rigid_motions(self.x0, self.m[::3])

    def stiffness(self, x: np.ndarray) -> sp.csr_matrix:
        return self.pattern.matrix(self.pattern.assemble(self.elastic.hessian_blocks(x)), np.zeros(len(self.m)))

    @functools.cached_property
    def shift(self) -> float:
        """s (1/s^2) in the factorized K + s M: 0 for a held body; for a free one, whose K is singular along its rigid
        motions, RIGID_SHIFT of K's largest diagonal over the mass."""
        if self.rigid is None:
            return 0.0
        return RIGID_SHIFT * float((self.stiffness(self.x0).diagonal() / self.m).max())

    @functools.cached_property
    def rest_solve(self) -> Callable[[np.ndarray], np.ndarray]:
        """Solves (K + shift M) u = f on the free DOFs with the rest stiffness, factorized once (modes, derivatives,
        loads)."""
        free = ~self.held
        K = self.stiffness(self.x0)[free][:, free] + self.shift * sp.diags(self.m[free])
        return spla.splu(K.tocsc(), permc_spec="MMD_AT_PLUS_A").solve

    def deforming(self, U: np.ndarray) -> np.ndarray:
        """U (3N, k) without its rigid motions' part (M-orthogonally), for a free body; U itself for a held one."""
        return U if self.rigid is None else U - self.rigid @ (self.rigid.T @ (self.m[:, None] * U))

    def modes(self, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``count`` lowest linear vibration modes about rest (3N, count), zero on held nodes (a free body's:
        after its six rigid motions), and their angular frequencies (count,) in rad/s for this lattice's material."""
        free = ~self.held
        K = self.stiffness(self.x0)[free][:, free].tocsc()
        inverse = spla.LinearOperator(K.shape, matvec=self.rest_solve, dtype=np.float64)
        rigid = 0 if self.rigid is None else 6
        lam, vec = spla.eigsh(K, k=count + rigid, M=sp.diags(self.m[free]).tocsc(), sigma=-self.shift, which="LM",
                              OPinv=inverse, v0=np.ones(K.shape[0]))  # a fixed start: the same body, the same modes
        order = np.argsort(lam)[rigid:]
        U = np.zeros((len(self.m), count))
        U[free] = vec[:, order]
        return self.deforming(U), np.sqrt(np.maximum(lam[order], 0.0))

    def static_responses(self) -> np.ndarray:
        """The linear static displacement (3N, 3) under a uniform acceleration along each axis, K u = M e: the
        shape a steady load (gravity, a frame's acceleration) settles into, which the lowest modes may not span
        (a bar held along its underside sways in them but squashes under its weight). None (3N, 0) for a free
        body, which a uniform acceleration only carries along."""
        if self.rigid is not None:
            return np.zeros((len(self.m), 0))
        free = ~self.held
        out = np.zeros((len(self.m), 3))
        for d in range(3):
            load = np.zeros(len(self.m))
            load[d::3] = self.m[d::3]
            out[free, d] = self.rest_solve(load[free])
        return out

    def modal_derivatives(self, modes: np.ndarray) -> np.ndarray:
        """Modal derivatives (3N, m(m+1)/2): K Psi_ij = -(dK/dq_i) Phi_j, dK/dq_i by central differences (a free
        body's in the deforming space: the load's rigid part, its net force and torque, taken off first)."""
        free = ~self.held
        step = 1e-4 * self.edge / np.abs(modes).max(axis=0)  # a small fraction of a lattice edge along each mode
        slopes = [(self.stiffness(self.x0 + (s * u).reshape(self.x0.shape))
                   - self.stiffness(self.x0 - (s * u).reshape(self.x0.shape))) / (2.0 * s)
                  for u, s in zip(modes.T, step)]
        loads = [-(slopes[i] @ modes[:, j]) for i in range(modes.shape[1]) for j in range(i, modes.shape[1])]
        loads = np.stack(loads, axis=1)
        if self.rigid is not None:
            loads = loads - self.m[:, None] * (self.rigid @ (self.rigid.T @ loads))
        out = np.zeros_like(loads)
        out[free] = self.rest_solve(loads[free])
        return self.deforming(out)

    def orthonormal(self, U: np.ndarray) -> np.ndarray:
        """An M-orthonormal basis of U's span (held rows zeroed, rigid motions taken off), without its near-dependent
        directions."""
        U = self.deforming(np.where(self.held[:, None], 0.0, U))
        U = U / np.sqrt(np.maximum((self.m[:, None] * U * U).sum(0), 1e-300))  # columns of any scale alike
        lam, vec = np.linalg.eigh(U.T @ (self.m[:, None] * U))
        keep = lam > 1e-10 * lam.max()
        return U @ (vec[:, keep] / np.sqrt(lam[keep]))


def rigid_motions(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The rigid motions (3N, 6) of points x (N, 3) with masses m (N,): translations and rotations about their centre
    of mass, M-orthonormal."""
    offset = x - (m[:, None] * x).sum(0) / m.sum()
    fields = np.concatenate([np.broadcast_to(np.eye(3), (len(x), 3, 3)),
                             np.cross(np.eye(3)[None], offset[:, None, :]).transpose(0, 2, 1)], axis=2)
    fields = fields.reshape(-1, 6)
    gram = fields.T @ (np.repeat(m, 3)[:, None] * fields)
    return fields @ np.linalg.inv(np.linalg.cholesky(gram)).T


def quadratic_poses(modes: np.ndarray, psi: np.ndarray, omega: np.ndarray, diagonal: float,
                    rng: np.random.Generator) -> np.ndarray:
    """Training displacements (P, 3N) on the modes' quadratic manifold, u = Phi a + 1/2 sum_ij Psi_ij a_i a_j (the
    shape a modal amplitude a bends the body into), with lower modes larger (a_i ~ 1/omega_i) and the largest
    displacement log-uniform over POSE_REACH of the diagonal."""
    pairs = [(i, j) for i in range(modes.shape[1]) for j in range(i, modes.shape[1])]
    out = []
    for reach in np.exp(rng.uniform(*np.log(POSE_REACH), POSES)):
        a = rng.normal(size=modes.shape[1]) / omega
        a *= reach * diagonal / np.abs(modes @ a).max()
        quad = np.array([(0.5 if i == j else 1.0) * a[i] * a[j] for i, j in pairs])
        out.append(modes @ a + psi @ quad)
    return np.stack(out)


def fit_cubature(lattice: Lattice, basis: np.ndarray, poses: np.ndarray, rng: np.random.Generator):
    """Greedy non-negative cubature (An, Kim and James 2008): tets and weights (each multiplying the tet's whole
    contribution on the lattice) whose weighted reduced forces match the whole lattice's on every training pose,
    each pose's rows normalized by its force. Returns (tet indices, weights, relative error)."""
    tets = lattice.elastic.tets
    pool = np.arange(len(tets)) if len(tets) <= CANDIDATES else np.sort(rng.choice(len(tets), CANDIDATES, False))
    carried = basis.reshape(len(lattice.x0), 3, -1)[tets].reshape(len(tets), 12, -1)  # (M, 12, r)
    rows, target = [], []
    for u in poses:
        _, g = lattice.elastic.element_energy_and_gradients(lattice.x0 + u.reshape(-1, 3))
        per_tet = np.einsum("mk,mkr->mr", g.reshape(len(tets), 12), carried)  # reduced force of each tet
        total = per_tet.sum(0)
        norm = np.linalg.norm(total) or 1.0
        rows.append(per_tet[pool].T / norm)
        target.append(total / norm)
    A, b = np.vstack(rows), np.concatenate(target)
    chosen, w, residual = [], np.zeros(0), b.copy()
    while len(chosen) < MAX_CUBATURE:
        # scores rounded to 1e-9 of the best, so tied tets (a symmetric body's) are taken in index order whatever
        # the round-off: the same body turned gets the same cubature
        score = A.T @ residual
        score = np.round(score / np.abs(score).max(), 9)
        score[chosen] = -np.inf
        batch = np.argsort(-score, kind="stable")[:max(1, len(chosen) // 10)]
        chosen.extend(int(k) for k in batch if score[k] > 0)
        w, _ = opt.nnls(A[:, chosen], b, maxiter=50 * len(chosen))
        residual = b - A[:, chosen] @ w
        if np.linalg.norm(residual) <= CUBATURE_ERROR * np.linalg.norm(b) or score[batch].max() <= 0:
            break
    keep = w > 0
    return pool[np.asarray(chosen)[keep]], w[keep], float(np.linalg.norm(residual) / np.linalg.norm(b))


class ReducedElasticity:
    """The cubature's energy, reduced force and reduced stiffness of q, for one material."""

    def __init__(self, sub: Subspace, params: SimParams):
        nodes, local = np.unique(sub.tets, return_inverse=True)
        self.x0 = sub.body.nodes[nodes].astype(np.float64)
        self.U = sub.basis.reshape(len(sub.body.nodes), 3, -1)[nodes]  # (n, 3, r)
        self.elastic = TetElasticity(self.x0, local.reshape(-1, 4), params, sub.weights)
        self.carried = self.U[self.elastic.tets].reshape(len(sub.tets), 12, -1)  # (C, 12, r)
        # Newton stops when no node moves by NEWTON_TOLERANCE of an edge: |U dq| <= |dq| . (largest |U| per column)
        self.reach = np.abs(sub.basis).max(axis=0)
        self.tolerance = NEWTON_TOLERANCE * sub.edge

    def _x(self, q: np.ndarray) -> np.ndarray:
        return self.x0 + self.U @ q

    def deformation(self, q: np.ndarray):
        """The cubature tets' deformation gradients (C, 3, 3) at q."""
        return self.elastic.deformation(self._x(q))

    def energy_and_force(self, q: np.ndarray) -> tuple[float, np.ndarray]:
        """Elastic energy (J) and its gradient in q (r,)."""
        e, g = self.elastic.element_energy_and_gradients(self._x(q))
        return e, g.reshape(-1) @ self.carried.reshape(-1, self.carried.shape[-1])

    def stiffness(self, q: np.ndarray) -> np.ndarray:
        """The PSD-projected reduced stiffness U^T K U (r, r)."""
        HU = self.elastic.hessian_blocks(self._x(q)) @ self.carried
        return self.carried.reshape(-1, self.carried.shape[-1]).T @ HU.reshape(-1, HU.shape[-1])


class _Stiffness:
    """The reduced stiffness a step's Newton and Rayleigh damping use, kept from step to step (it is most of a
    step's cost) and retaken, as the reference does, once any cubature tet's F has moved by RAYLEIGH_REFRESH from
    where it was taken, or when Newton stalls on it."""

    def __init__(self, elastic: ReducedElasticity):
        self.elastic = elastic
        self.K: np.ndarray | None = None
        self.F = None

    def at(self, q: np.ndarray, retake: bool = False) -> np.ndarray:
        F = self.elastic.deformation(q)
        if retake or self.K is None or float((F - self.F).abs().max()) > RAYLEIGH_REFRESH:
            self.K, self.F = self.elastic.stiffness(q), F
        return self.K


def contact_masses(sub: Subspace, mesh: Mesh, pins: np.ndarray, density: float) -> np.ndarray:
    """Each vertex's contact mass (V,) kg: the body's mass shared by surface area, none on pinned vertices."""
    area = np.zeros(len(mesh.vertices))
    np.add.at(area, mesh.faces.ravel(), np.repeat(face_areas(mesh) / 3.0, 3))
    area[pins] = 0.0
    return density * float(sub.body.node_volume.sum()) * area / area.sum()


class Contact:
    """Penalty contact of the surface's vertices with static colliders, the reference's law (contact.CONTACT_*):
    energy k m depth^2 / 2, its stiffness Gauss-Newton (k m B^T n n^T B), and a viscosity taken at a step's start:
    Coulomb friction along the surface and critical damping of the penalty along the normal, since the symplectic
    step would keep the penalty's own oscillation (the reference's BDF2 damps it). A vertex's contact mass is the
    body's mass shared by surface area, so a body rests g / (k x its touching fraction of area) deep whatever the
    mesh's resolution; pinned vertices take no contact."""

    def __init__(self, sub: Subspace, mesh: Mesh, pins: np.ndarray, colliders: tuple[Collider, ...], density: float):
        mass = contact_masses(sub, mesh, pins, density)
        keep = mass > 0.0
        self.X, self.B, self.m = mesh.vertices[keep].astype(np.float64), sub.vertex_basis[keep], mass[keep]
        self.colliders = colliders

    def _touching(self, q: np.ndarray):
        """(vertex indices, depths, normals, normals times the basis (T, r)) of the vertices inside each collider."""
        x = self.X + self.B @ q
        for collider in self.colliders:
            depth, normal = collider.penetration(x)
            idx = np.flatnonzero(depth > 0.0)
            if len(idx):
                yield idx, depth[idx], normal[idx], np.einsum("tdr,td->tr", self.B[idx], normal[idx])

    def energy_force_stiffness(self, q: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """Contact energy (J), its gradient in q (r,) and its Gauss-Newton stiffness (r, r)."""
        r = len(q)
        e, g, H = 0.0, np.zeros(r), np.zeros((r, r))
        for idx, depth, _, Bn in self._touching(q):
            w = CONTACT_STIFFNESS * self.m[idx]
            e += 0.5 * float(w @ depth**2)
            g -= (w * depth) @ Bn
            H += Bn.T @ (w[:, None] * Bn)
        return e, g, H

    def viscosity(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """The contacts' reduced viscosity (r, r) at (q, qd): friction mu N / max(slide, SLIP_SPEED) along the
        surface, 2 sqrt(k) m along the normal."""
        D = np.zeros((len(q), len(q)))
        for idx, depth, normal, Bn in self._touching(q):
            along = self.B[idx] - normal[:, :, None] * Bn[:, None, :]  # (I - n n^T) B: the tangential part
            friction, normal_damping = implicit_viscosity(self.m[idx], depth, np.linalg.norm(along @ qd, axis=1))
            D += np.einsum("t,tdr,tds->rs", friction, along, along)
            D += Bn.T @ (normal_damping[:, None] * Bn)
        return D


def simulate(sub: Subspace, mesh: Mesh, params: SimParams, progress: Progress | None = None,
             should_cancel: Callable[[], bool] | None = None, colliders: tuple[Collider, ...] = ()) -> np.ndarray:
    """Vertex positions (frames + 1, V, 3) float32 from rest, with ``colliders`` in the mesh's coordinates."""
    contact = Contact(sub, mesh, params.pins, colliders, params.density) if colliders else None
    return positions(sub, mesh, params.pins, integrate(sub, params, progress, should_cancel, contact)[0])


def positions(sub: Subspace, mesh: Mesh, pins: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Vertex positions (T, V, 3) float32 of reduced coordinates Q (T, r), pins exactly at rest."""
    out = (mesh.vertices[None] + np.einsum("vdr,tr->tvd", sub.vertex_basis, Q)).astype(np.float32)
    out[:, pins] = mesh.vertices[pins]
    if not np.isfinite(out).all():
        raise SimulationError("the simulation produced non-finite positions; try a stiffer material, a lower "
                              "gravity or more drag")
    return out


def energies(sub: Subspace, params: SimParams, Q: np.ndarray, Qd: np.ndarray) -> dict[str, np.ndarray]:
    """Kinetic, elastic (the cubature's) and gravitational energy (J) of each reduced state (T, r)."""
    elastic = ReducedElasticity(sub, params)
    weight = np.asarray(params.gravity) @ _masses(sub, params.density)[1].sum(0)
    return {"kinetic": 0.5 * params.density * np.einsum("tr,tr->t", Qd, Qd),
            "elastic": np.array([elastic.energy_and_force(q)[0] for q in Q]),
            "gravitational": -(Q @ weight)}


def _masses(sub: Subspace, density: float) -> tuple[np.ndarray, np.ndarray]:
    """Node masses (N,) and the nodes' basis times their masses (N, 3, r): what turns node accelerations into a
    reduced force (its sum over nodes, (3, r), does so for a uniform acceleration)."""
    m = node_masses(sub.body.node_volume, density)
    return m, m[:, None, None] * sub.basis.reshape(len(m), 3, -1)


def integrate(sub: Subspace, params: SimParams, progress: Progress | None = None,
              should_cancel: Callable[[], bool] | None = None, contact: Contact | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Reduced coordinates and velocities (frames + 1, r) at every frame from rest: implicit midpoint steps of the
    continuum's dynamics in q, STEP_RATE steps per simulated second at least."""
    p = params
    rho, r = p.density, sub.dims
    elastic = ReducedElasticity(sub, p)
    stiffness = _Stiffness(elastic)
    n = len(sub.body.nodes)
    x0 = sub.body.nodes.astype(np.float64)
    U3 = sub.basis.reshape(n, 3, r)
    m, mU = _masses(sub, rho)
    wind = make_wind(p.wind)
    frame = None if p.frame_motion is None else FrameMotion(p.frame_motion, p.fps)
    gravity = np.asarray(p.gravity, np.float64)
    steady = gravity @ mU.sum(0)

    def push(t, q, qd):
        """Reduced external force: gravity, wind and an animated object's inertial forces at time t (explicit)."""
        if wind is None and frame is None:
            return steady
        x, xd = x0 + U3 @ q, U3 @ qd
        a = np.broadcast_to(gravity, x.shape) if wind is None else gravity + wind.acceleration(t, x)
        if frame is not None:
            felt, turn = frame.acceleration(t, x, xd)
            a = a @ turn - felt
        return np.einsum("nds,nd->s", mU, a)

    steps = max(1, math.ceil(STEP_RATE / p.fps - 1e-9))
    h = 1.0 / (p.fps * steps)
    # the initial velocity field v + w x (x - centre of mass), projected M-orthogonally onto the subspace
    centre = (m[:, None] * x0).sum(0) / m.sum()
    velocity = np.asarray(p.initial_velocity, np.float64) + np.cross(np.asarray(p.angular_velocity, np.float64),
                                                                      x0 - centre)
    qd0 = np.einsum("nds,nd->s", mU, velocity) / rho
    state = (np.zeros(r), qd0, None)
    qs, qds = [state[0]], [state[1]]
    for frame_index in range(p.frames):
        if should_cancel is not None and should_cancel():
            raise Cancelled("simulation cancelled")
        for k in range(steps):
            t = (frame_index * steps + k) * h
            state = _step(elastic, stiffness, contact, rho, p, push(t, state[0], state[1]), *state, h)
        qs.append(state[0])
        qds.append(state[1])
        if progress is not None:
            progress((frame_index + 1) / p.frames, f"frame {frame_index + 1} of {p.frames}")
    return np.stack(qs), np.stack(qds)


def _step(elastic: ReducedElasticity, stiffness: _Stiffness, contact: Contact | None, rho: float, p: SimParams,
          force: np.ndarray, q, qd, qd_prev, h):
    """One implicit midpoint step: the midpoint y = q + h/2 v_mid minimizes Phi(y) = rho/2 |y - q - h/2 qd|^2 +
    (h/2)^2 [Psi(y) - f.y + 1/h |y - q|_D^2] with Psi elastic plus contact energy and D = c rho I + beta K(q) plus
    the contacts' viscosity at (q, qd), then q' = 2 y - q and
    qd' = 4 (y - q) / h - qd; returns (q', qd', qd). Symplectic, so no numerical damping (the reference's BDF2
    damps); A-stable, so no mode sets the step. Newton's matrix is ``stiffness`` at the step's start, retaken
    where the iterations stall (the r x r solve is free; the stiffness is what costs), with a backtracking line
    search on Phi; Newton starts from the velocity's trend (Adams-Bashforth 2)."""
    r = len(q)
    tau2, alpha, q_hat = 0.25 * h * h, 2.0 / h, q + 0.5 * h * qd
    y = q_hat if qd_prev is None else q + 0.5 * h * (1.5 * qd - 0.5 * qd_prev)
    K = stiffness.at(q)
    damp = p.drag * rho * np.eye(r) + p.damping * K
    if contact is not None:
        damp = damp + contact.viscosity(q, qd)
    no_contact = (0.0, 0.0, 0.0)

    def potential(y_):
        """Phi, its gradient and the contacts' stiffness at y_."""
        e, g = elastic.energy_and_force(y_)
        e_c, g_c, H_c = no_contact if contact is None else contact.energy_force_stiffness(y_)
        d = y_ - q
        phi = 0.5 * rho * (y_ - q_hat) @ (y_ - q_hat) + tau2 * (e + e_c - force @ y_ + 0.5 * alpha * d @ damp @ d)
        return phi, rho * (y_ - q_hat) + tau2 * (g + g_c - force + alpha * damp @ d), H_c

    phi, g, H_c = potential(y)
    for iteration in range(MAX_NEWTON):
        if iteration and iteration % CHORD_ITERATIONS == 0:
            K = stiffness.at(y, retake=True)
        dy = -np.linalg.solve(rho * np.eye(r) + tau2 * (K + H_c + alpha * damp), g)
        s = 1.0
        while True:
            phi_new, g_new, H_new = potential(y + s * dy)
            if phi_new <= phi + 1e-4 * s * (g @ dy) or s < 1e-6:
                break
            s *= 0.5
        y, phi, g, H_c = y + s * dy, phi_new, g_new, H_new
        if s * float(np.abs(dy) @ elastic.reach) <= elastic.tolerance:
            return 2.0 * y - q, 2.0 * alpha * (y - q) - qd, qd
    raise SimulationError("the solid's step did not converge; try a stiffer material, a lower gravity or more drag")
