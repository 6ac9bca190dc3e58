"""Inside or outside a triangle soup: the generalized winding number (Jacobson et al. 2013).

w(q) = sum of the solid angles its triangles subtend at q, over 4 pi: 1 inside a closed outward surface, 0 outside,
and still near 0 or 1 away from the holes of a slightly open one, the seams of a self-intersecting one or the
overlaps of a multi-part one (2 where two parts overlap). So a lattice can be filled from such meshes without a
conforming tetrahedralization. Solid angles by Van Oosterom and Strackee (1983), exact for the triangles near a query
point and by one dipole per cluster of triangles for those far from it (Barill et al. 2018's first-order term).
"""

import numpy as np

from .mesh import Mesh

CLUSTER_SIZE = 48  # triangles per far-field cluster, about: smaller cost more distance tests, larger more exact pairs
FAR = 2.0  # a cluster is far beyond this many of its radii: there its dipole erred by <= 0.03 in w on the test meshes
PAIRS_PER_CHUNK = 2_000_000  # query-triangle pairs evaluated exactly at once: bounds the memory to ~100 MB
INSIDE = 0.5  # |w| above this is inside: the surface itself sits at 1/2
# A mesh that is not closed is still a solid when most of the space it bounds is unambiguous: the volume with
# |w| > SURE at least SOLID_RATIO times that with AMBIGUOUS < |w| < SURE. A sheet has |w| < 1/2 almost everywhere.
SURE, AMBIGUOUS, SOLID_RATIO = 0.8, 0.2, 3.0
PROBE_CELLS = 24  # grid nodes along the longest side of the bounding box for that classification


def _solid_angles(q: np.ndarray, tri: np.ndarray) -> np.ndarray:
    """(Q,) summed solid angle (sr) of triangles ``tri`` (T, 3, 3) seen from points ``q`` (Q, 3)."""
    out = np.zeros(len(q))
    step = max(1, PAIRS_PER_CHUNK // max(len(tri), 1))
    corner = [[tri[None, :, k, d] for d in range(3)] for k in range(3)]  # (1, T) arrays, by corner and axis
    for s in range(0, len(q), step):
        p = [q[s:s + step, d, None] for d in range(3)]
        (ax, ay, az), (bx, by, bz), (cx, cy, cz) = ([corner[k][d] - p[d] for d in range(3)] for k in range(3))
        la, lb, lc = np.sqrt(ax * ax + ay * ay + az * az), np.sqrt(bx * bx + by * by + bz * bz), np.sqrt(
            cx * cx + cy * cy + cz * cz)
        det = ax * (by * cz - bz * cy) + ay * (bz * cx - bx * cz) + az * (bx * cy - by * cx)
        den = (la * lb * lc + (ax * bx + ay * by + az * bz) * lc + (bx * cx + by * cy + bz * cz) * la
               + (cx * ax + cy * ay + cz * az) * lb)
        out[s:s + step] = 2.0 * np.arctan2(det, den).sum(1)
    return out


def winding_numbers(vertices: np.ndarray, faces: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Generalized winding number (M,) of the surface (``vertices``, ``faces``) at ``points`` (M, 3)."""
    tri = np.asarray(vertices, np.float64)[np.asarray(faces)]
    points = np.asarray(points, np.float64)
    area = 0.5 * np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])  # area vectors (T, 3)
    centre = tri.mean(1)
    # Clusters: triangles binned by centroid on a grid of about len(tri) / CLUSTER_SIZE boxes.
    lo, ext = centre.min(0), np.maximum(np.ptp(centre, 0), 1e-12)
    bins = max(1, round((len(tri) / CLUSTER_SIZE) ** (1.0 / 3.0)))
    key = np.ravel_multi_index(np.minimum((bins * (centre - lo) / ext).astype(int), bins - 1).T, (bins,) * 3)
    total = np.zeros(len(points))
    for k in np.unique(key):
        members = tri[key == k]
        n = area[key == k].sum(0)
        weight = np.linalg.norm(area[key == k], axis=1)
        p = (members.mean(1) * weight[:, None]).sum(0) / max(weight.sum(), 1e-300)
        radius = float(np.linalg.norm(members - p, axis=-1).max())
        r = p - points
        dist = np.sqrt((r * r).sum(1))
        near = dist <= FAR * radius
        far = ~near
        total[far] += (r[far] @ n) / dist[far] ** 3
        if near.any():
            total[near] += _solid_angles(points[near], members)
    return total / (4.0 * np.pi)


def probe_grid(vertices: np.ndarray, cells: int) -> np.ndarray:
    """Nodes (P, 3) of a grid of cubes with ``cells`` along the longest side of the points' bounding box."""
    lo, hi = vertices.min(0), vertices.max(0)
    h = float((hi - lo).max()) / cells
    axes = [np.linspace(a, b, max(2, round((b - a) / h) + 1)) for a, b in zip(lo, hi, strict=True)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)


def enclosed_by_winding(mesh: Mesh) -> float:
    """The volume (m^3) the surface, closed or not, encloses unambiguously enough to be filled as a solid (see
    SURE, AMBIGUOUS, SOLID_RATIO), from the winding number on a probe grid; 0 for open sheets and thin shells (a
    flag, a bowl's wall)."""
    grid = probe_grid(mesh.vertices, PROBE_CELLS)
    w = np.abs(winding_numbers(mesh.vertices, mesh.faces, grid))
    sure = np.count_nonzero(w > SURE)
    if sure == 0 or sure < SOLID_RATIO * np.count_nonzero((w > AMBIGUOUS) & (w < SURE)):
        return 0.0
    spacing = np.ptp(mesh.vertices, 0) / np.maximum(np.array([len(np.unique(grid[:, k])) for k in range(3)]) - 1, 1)
    return float(np.count_nonzero(w > INSIDE) * np.prod(spacing))
