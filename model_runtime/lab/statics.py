"""Linear statics of a closed solid: the settled sag of a pinned solid under its own weight in linear elasticity, an
independent discretization that the tests and benchmarks/stubby_lean.py compare the simulator's pinned solids with.

The solid is the set of lattice cells whose centres lie inside the surface, each a trilinear brick with Wilson's
incompatible (bubble) modes condensed out: unlike plain trilinear bricks or linear tets, which lock in bending
(plain bricks sagged 5% short at 3 cells across a cantilever), they bend exactly, so a few cells across a beam
suffice (tested against Euler-Bernoulli). The node nearest to each pinned vertex, and to points half a cell apart
on every surface triangle whose vertices are all pinned, is clamped (see Lattice.held_nodes).
"""

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
import scipy.spatial

from ..errors import MeshError
from ..mesh import Mesh, enclosed_volume, pinned_patch_samples, thinnest_width

TARGET_CELLS = 600  # bricks for the body's volume: the solve takes ~0.1-0.3 s
MIN_FILLED = 0.5  # the bricks must hold this fraction of the enclosed volume for their sag to stand for the body
MIN_CELLS_ACROSS = 3  # bubble bricks bend exactly; three cells resolve the shear across a stubby body
MAX_GRID_CELLS = 40_000  # bounding-box cells at most (a thin diagonal plate fills few of them)
_GAUSS = 1.0 / math.sqrt(3.0)
_CORNERS = np.array(list(itertools.product((0, 1), repeat=3)))  # brick node k at offset _CORNERS[k]


def elasticity_matrix(poisson: float) -> np.ndarray:
    """(6, 6) isotropic stress-strain matrix at E = 1 Pa, strains in Voigt order xx, yy, zz, xy, yz, zx (shear as
    engineering strain)."""
    lam = poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = 1.0 / (2 * (1 + poisson))
    D = np.zeros((6, 6))
    D[:3, :3] = lam
    D[np.arange(3), np.arange(3)] += 2 * mu
    D[np.arange(3, 6), np.arange(3, 6)] = mu
    return D


def strain_matrix(grads: np.ndarray) -> np.ndarray:
    """(..., 6, 3k) strain-displacement matrix from the spatial gradients (..., k, 3) of k shape functions, with
    (x, y, z) per function and the strains of elasticity_matrix."""
    *batch, k, _ = grads.shape
    B = np.zeros((*batch, 6, k, 3))
    gx, gy, gz = grads[..., 0], grads[..., 1], grads[..., 2]
    B[..., 0, :, 0], B[..., 1, :, 1], B[..., 2, :, 2] = gx, gy, gz
    B[..., 3, :, 0], B[..., 3, :, 1] = gy, gx
    B[..., 4, :, 1], B[..., 4, :, 2] = gz, gy
    B[..., 5, :, 0], B[..., 5, :, 2] = gz, gx
    return B.reshape(*batch, 6, 3 * k)


def brick_stiffness(size: np.ndarray, poisson: float) -> np.ndarray:
    """(24, 24) stiffness at E = 1 Pa of a rectangular brick with edges ``size`` (m), nodes in _CORNERS order and
    (x, y, z) per node; bubble modes 1 - xi_k^2 per axis and component condensed out (2x2x2 Gauss)."""
    D = elasticity_matrix(poisson)
    half = np.asarray(size, float) / 2
    signs = 2 * _CORNERS - 1
    K = np.zeros((33, 33))
    for xi in itertools.product((-_GAUSS, _GAUSS), repeat=3):
        xi = np.array(xi)
        factors = 1 + signs * xi  # (8, 3)
        grads = np.empty((11, 3))
        for j in range(3):
            grads[:8, j] = signs[:, j] * np.prod(np.delete(factors, j, axis=1), axis=1) / 8
        grads[8:] = np.diag(-2 * xi)  # bubbles
        B = strain_matrix(grads / half)  # d/dxi -> d/dx
        K += B.T @ D @ B * np.prod(half)
    kuu, kub, kbb = K[:24, :24], K[:24, 24:], K[24:, 24:]
    return kuu - kub @ np.linalg.solve(kbb, kub.T)


def inside_cells(mesh: Mesh, lo: np.ndarray, spacing: np.ndarray, n: np.ndarray) -> np.ndarray:
    """(nx, ny, nz) mask of lattice cells whose centre is inside the closed surface: rays along +z from each column
    of centres, counting crossings above each centre (odd: inside)."""
    tri = mesh.vertices[mesh.faces]
    # Columns are nudged off the lattice by an irrational fraction of a cell, so a ray never runs exactly through
    # an edge or vertex that lies on a lattice plane (a box's do) and is counted twice.
    origin = lo[:2] + spacing[:2] * (0.5 + np.array([math.sqrt(2), math.sqrt(3)]) * 1e-6)
    u = (tri[:, :, :2] - origin) / spacing[:2]  # triangle corners in column units
    first = np.clip(np.ceil(u.min(1)), 0, n[:2]).astype(int)
    last = np.clip(np.floor(u.max(1)), -1, n[:2] - 1).astype(int)
    counts = np.maximum(last - first + 1, 0)
    per_tri = counts[:, 0] * counts[:, 1]
    t = np.repeat(np.arange(len(tri)), per_tri)
    local = np.arange(len(t)) - np.repeat(np.cumsum(per_tri) - per_tri, per_tri)
    cx = first[t, 0] + local // np.maximum(counts[t, 1], 1)
    cy = first[t, 1] + local % np.maximum(counts[t, 1], 1)
    p = np.stack([cx, cy], 1).astype(float)
    a, b, c = u[t, 0], u[t, 1], u[t, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])
    ok = np.abs(det) > 1e-14
    det = np.where(ok, det, 1.0)
    s = ((p[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (p[:, 1] - a[:, 1])) / det
    r = ((b[:, 0] - a[:, 0]) * (p[:, 1] - a[:, 1]) - (p[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])) / det
    hit = ok & (s >= 0) & (r >= 0) & (s + r <= 1)
    z = (1 - s - r) * tri[t, 0, 2] + s * tri[t, 1, 2] + r * tri[t, 2, 2]
    below = np.clip(np.ceil((z[hit] - lo[2]) / spacing[2] - 0.5), 0, n[2]).astype(int)  # centres under the hit
    column = cx[hit] * n[1] + cy[hit]
    above = np.zeros((n[0] * n[1], n[2] + 1), int)
    np.add.at(above, (column, np.zeros_like(column)), 1)
    np.add.at(above, (column, below), -1)
    return (np.cumsum(above, axis=1)[:, :-1] % 2 == 1).reshape(n)


@dataclass
class Lattice:
    """The solid as bubble bricks: node positions, stiffness at E = 1 Pa, lumped volumes, cell edges."""

    nodes: np.ndarray  # (N, 3)
    bricks: np.ndarray  # (C, 8) node indices
    stiffness: scipy.sparse.csr_matrix  # (3N, 3N)
    node_volume: np.ndarray  # (N,) m^3
    spacing: np.ndarray
    body_volume: float  # the closed surface's enclosed volume, m^3

    def node_mass(self, total: float) -> np.ndarray:
        return self.node_volume * (total / self.node_volume.sum())

    def held_nodes(self, points: np.ndarray) -> np.ndarray:
        """Nodes a pin at each of ``points`` holds: its nearest node. A clamped face on a lattice plane then holds
        that plane's nodes (the pinned triangles are sampled half a cell apart); on a curved surface, holding every
        corner of the cells the pinned points lie in clamps a layer up to a cell deep and made a sphere pinned over
        a cap 2x too stiff against a converged conforming tet mesh (nearest nodes: within 7%)."""
        return np.unique(_nearest(points, self.nodes))


def assemble(blocks: np.ndarray, elements: np.ndarray, nodes: int) -> scipy.sparse.csr_matrix:
    """(3 nodes, 3 nodes) sparse sum of element matrices ``blocks`` (E, 3k, 3k) over ``elements`` (E, k) node
    indices, with (x, y, z) per node."""
    dof = (3 * elements[:, :, None] + np.arange(3)).reshape(len(elements), -1)
    width = dof.shape[1]
    return scipy.sparse.csr_matrix((blocks.ravel(), (np.repeat(dof, width, axis=1).ravel(),
                                                     np.tile(dof, (1, width)).ravel())), (3 * nodes, 3 * nodes))


def build_lattice(mesh: Mesh, poisson: float) -> Lattice:
    """Bricks filling the closed surface: about TARGET_CELLS for its volume, at least MIN_CELLS_ACROSS across its
    thinnest width, the grid spanning its bounding box exactly (a box is represented without a staircase)."""
    lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
    ext = np.maximum(hi - lo, 1e-12)
    thinnest, body_volume = thinnest_width(mesh.vertices), enclosed_volume(mesh)
    cell = min((body_volume / TARGET_CELLS) ** (1 / 3), thinnest / MIN_CELLS_ACROSS)
    cell = max(cell, (np.prod(ext) / MAX_GRID_CELLS) ** (1 / 3))
    if thinnest < MIN_CELLS_ACROSS / 2 * cell:  # a thin plate across its bounding box: cells thicker than the body
        raise MeshError("the body is too thin for its stiffness to be calibrated on a lattice")
    n = np.maximum(1, np.ceil(ext / cell - 1e-9).astype(int))
    spacing = ext / n
    cells = np.argwhere(inside_cells(mesh, lo, spacing, n))
    if not len(cells):
        raise MeshError("the body is too thin for its stiffness to be calibrated on a lattice")
    used, bricks = np.unique(np.ravel_multi_index((cells[:, None, :] + _CORNERS[None]).reshape(-1, 3).T, n + 1),
                             return_inverse=True)
    bricks = bricks.reshape(-1, 8)
    ke = brick_stiffness(spacing, poisson)
    K = assemble(np.broadcast_to(ke, (len(bricks), 24, 24)), bricks, len(used))
    volume = np.bincount(bricks.ravel(), minlength=len(used)) * (np.prod(spacing) / 8.0)
    return Lattice(nodes=lo + np.stack(np.unravel_index(used, n + 1), 1) * spacing, bricks=bricks, stiffness=K,
                   node_volume=volume, spacing=spacing, body_volume=body_volume)


def self_weight_sag(mesh: Mesh, pins: np.ndarray, poisson: float, points: np.ndarray, mass: float) -> np.ndarray:
    """(P, 3, 3) static displacement (m) at ``points`` of the pinned solid at E = 1 Pa under a unit body force
    (1 m/s^2 on its ``mass`` kg) along each axis: [p, component, axis of the force].

    The sag under gravity g at Young's modulus E is (this @ g) / E. Raises MeshError when nothing pins the body or
    the lattice cannot represent it (too thin or too finely branched to fill MIN_FILLED of it with connected cells).
    """
    lat = build_lattice(mesh, poisson)
    held_points = np.vstack([mesh.vertices[pins],
                             pinned_patch_samples(mesh.vertices, mesh.faces, pins, 0.5 * float(lat.spacing.min()))])
    if not len(held_points):
        raise MeshError("a body without pins has no static equilibrium to calibrate against")
    held = lat.held_nodes(held_points)
    # Cells that touch the pinned part only through cells left out (a thin neck) would float free: only the
    # pieces connected to a held node count, and they must be most of the body.
    n = len(lat.nodes)
    links = scipy.sparse.coo_matrix((np.ones(7 * len(lat.bricks)), (np.repeat(lat.bricks[:, 0], 7),
                                                                     lat.bricks[:, 1:].ravel())), (n, n))
    _, piece = scipy.sparse.csgraph.connected_components(links, directed=False)
    attached = np.isin(piece, piece[held])
    if lat.node_volume[attached].sum() < MIN_FILLED * lat.body_volume:
        raise MeshError("the body is too thin for its stiffness to be calibrated on a lattice")
    free = np.setdiff1d(np.nonzero(attached)[0], held)
    free_dof = (3 * free[:, None] + np.arange(3)).ravel()
    loads = np.zeros((3 * len(lat.nodes), 3))
    for b in range(3):
        loads[b::3, b] = lat.node_mass(mass)
    u = np.zeros_like(loads)
    u[free_dof] = scipy.sparse.linalg.splu(lat.stiffness[free_dof][:, free_dof].tocsc()).solve(loads[free_dof])
    # Each point takes the displacement of the nearest node of a solid cell (points outside the staircase of
    # cells, on a curved surface, sit within half a cell of one).
    return u.reshape(len(lat.nodes), 3, 3)[_nearest(points, lat.nodes)]


def _nearest(points: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    return scipy.spatial.cKDTree(nodes).query(points)[1] if len(points) else np.zeros(0, np.int64)
