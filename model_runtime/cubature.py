"""Where the continuum's energy and mass are integrated: cubature points that the decoder carries.

A solid's points are the centres of the lattice cells inside its surface, weighted by volume; a sheet's are
area-uniform samples of its surface, weighted by area. Each point knows the decoder's basis
fields there and their spatial derivatives, so the deformation gradient is linear in the basis coefficients:
F = F_rest + dPhi a (solids: 3 x 3; sheets: 3 x 2 along a tangent frame, plus second derivatives for bending).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .errors import MeshError
from .mesh import Mesh, enclosed_volume, face_areas, sample_surface, thinnest_width

SOLID_POINTS = 1500  # cubature points for a solid's volume (cell centres): energy and mass sums of ~1 ms
MIN_CELLS_ACROSS = 3  # cells across the thinnest width, so bending varies across the section
MAX_GRID_CELLS = 200_000  # bounding-box cells at most (a thin diagonal plate fills few of them)
SHEET_POINTS = 1024  # surface samples of a sheet


@dataclass
class Cubature:
    """Rest positions (N, 3) m, weights (N,): rest volume (m^3) of a solid's points, rest area (m^2) of a sheet's,
    and for sheets the tangent frame (N, 3, 2) of each point."""

    points: np.ndarray
    weights: np.ndarray
    spacing: float  # m between neighbouring points: the resolution the energy is integrated at
    tangents: np.ndarray | None = None

    @property
    def solid(self) -> bool:
        return self.tangents is None


def solid_points(mesh: Mesh) -> Cubature:
    """Centres of the lattice cells inside a closed surface, about SOLID_POINTS of them and at least
    MIN_CELLS_ACROSS across its thinnest width, weighted so that they sum to the enclosed volume."""
    lo, hi = mesh.vertices.min(0), mesh.vertices.max(0)
    ext = np.maximum(hi - lo, 1e-12)
    volume = enclosed_volume(mesh)
    cell = min((volume / SOLID_POINTS) ** (1 / 3), thinnest_width(mesh.vertices) / MIN_CELLS_ACROSS)
    cell = max(cell, (np.prod(ext) / MAX_GRID_CELLS) ** (1 / 3))
    n = np.maximum(1, np.ceil(ext / cell - 1e-9).astype(int))
    spacing = ext / n
    cells = np.argwhere(inside_cells(mesh, lo, spacing, n))
    if not len(cells) or volume <= 0:
        raise MeshError("the closed surface encloses no volume the lattice can resolve")
    points = lo + (cells + 0.5) * spacing
    return Cubature(points, np.full(len(points), volume / len(points)), float(np.prod(spacing) ** (1 / 3)))


def sheet_points(mesh: Mesh, rng: np.random.Generator) -> Cubature:
    """Area-uniform samples of an open surface with an orthonormal tangent frame from their face's normal."""
    points, face, _ = sample_surface(mesh, SHEET_POINTS, rng)
    tri = mesh.vertices[mesh.faces[face]]
    first = tri[:, 1] - tri[:, 0]
    normal = np.cross(first, tri[:, 2] - tri[:, 0])
    t1 = first / np.linalg.norm(first, axis=1, keepdims=True)
    t2 = np.cross(normal / np.linalg.norm(normal, axis=1, keepdims=True), t1)
    area = float(face_areas(mesh).sum())
    return Cubature(points, np.full(len(points), area / len(points)), math.sqrt(area / len(points)),
                    np.stack([t1, t2], -1))


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


def field_derivatives(field: Callable[[np.ndarray], torch.Tensor], cub: Cubature):
    """A displacement field's values (N, 3, P), first derivatives along each point's rest directions (N, 3, d, P)
    and, for sheets, second derivatives along (t1 t1, t1 t2, t2 t2) (N, 3, 3, P; None for solids), from
    ``field(points)`` (metres per unit coefficient at points (M, 3) in metres).

    Central differences across one cubature cell: the energy is integrated at that resolution, and finer wiggles
    of a learned field (the decoder's Fourier features reach 1/128 of the diagonal) would otherwise enter the
    strain amplified by their wavenumber.
    """
    h = cub.spacing
    directions = np.eye(3)[None].repeat(len(cub.points), 0) if cub.solid else cub.tangents  # (N, 3, d)
    value = field(cub.points)
    ahead = [field(cub.points + h * directions[:, :, j]) for j in range(directions.shape[2])]
    behind = [field(cub.points - h * directions[:, :, j]) for j in range(directions.shape[2])]
    grad = torch.stack([(f - b) / (2 * h) for f, b in zip(ahead, behind)], 2)
    if cub.solid:
        return value, grad, None
    t1, t2 = directions[:, :, 0], directions[:, :, 1]
    mixed = (field(cub.points + h * (t1 + t2)) - field(cub.points + h * (t1 - t2))
             - field(cub.points - h * (t1 - t2)) + field(cub.points - h * (t1 + t2))) / (4 * h**2)
    return value, grad, torch.stack([(ahead[0] - 2 * value + behind[0]) / h**2, mixed,
                                     (ahead[1] - 2 * value + behind[1]) / h**2], 2)
