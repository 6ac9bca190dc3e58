"""Procedural triangle meshes for the dataset (grids, boxes, spheres, blobs), flat real cut-outs re-gridded and closed
real meshes decimated to a chosen vertex count."""

import os
from functools import cache

import numpy as np

from ...errors import MeshError
from ...mesh import is_closed, read_obj, validate

SHARED_MESHES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "meshes")


@cache
def shared_mesh(name: str):
    """A mesh of ../shared/meshes, read once per process (every scene of a real family would otherwise reparse it);
    callers must not modify its arrays."""
    return read_obj(os.path.join(SHARED_MESHES, name + ".obj"))


def grid_sheet(nx: int, ny: int, width: float, height: float, hole: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A flat (nx+1) x (ny+1) vertex sheet in the xy plane, centred, with alternating diagonals; with ``hole`` > 0
    the triangles whose centroids lie within that radius (m) of the centre are cut out, with their lone vertices."""
    xs, ys = np.linspace(-width / 2, width / 2, nx + 1), np.linspace(-height / 2, height / 2, ny + 1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    v = np.stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)], axis=1)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    i, j = i.ravel(), j.ravel()
    a, b, c, d = i * (ny + 1) + j, (i + 1) * (ny + 1) + j, (i + 1) * (ny + 1) + j + 1, i * (ny + 1) + j + 1
    flip = (i + j) % 2 == 1
    t1 = np.where(flip[:, None], np.stack([a, b, d], 1), np.stack([a, b, c], 1))
    t2 = np.where(flip[:, None], np.stack([b, c, d], 1), np.stack([a, c, d], 1))
    faces = np.concatenate([t1, t2]).astype(np.int64)
    if hole <= 0.0:
        return v, faces
    faces = faces[np.linalg.norm(v[faces].mean(1)[:, :2], axis=1) > hole]
    used, faces = np.unique(faces, return_inverse=True)
    return v[used], faces.reshape(-1, 3)


def box_surface(counts: tuple[int, int, int], size: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """The closed, outward-oriented surface of an axis-aligned box centred at the origin, counts[k] cells along k."""
    index: dict[tuple, int] = {}
    verts, faces = [], []

    def vid(p):
        key = tuple(np.round(p, 12))
        if key not in index:
            index[key] = len(verts)
            verts.append(p)
        return index[key]

    half = np.asarray(size, float) / 2
    for axis in range(3):
        u, w = (axis + 1) % 3, (axis + 2) % 3
        gu, gw = np.linspace(-half[u], half[u], counts[u] + 1), np.linspace(-half[w], half[w], counts[w] + 1)
        for side in (-1.0, 1.0):
            for i in range(counts[u]):
                for j in range(counts[w]):
                    quad = []
                    for a, b in ((i, j), (i + 1, j), (i + 1, j + 1), (i, j + 1)):
                        p = np.zeros(3)
                        p[axis], p[u], p[w] = side * half[axis], gu[a], gw[b]
                        quad.append(vid(p))
                    if side < 0:
                        quad = quad[::-1]
                    faces += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
    return np.array(verts), np.array(faces, np.int64)


def cantilever_box(size, divisions) -> tuple[np.ndarray, np.ndarray]:
    """A closed, outward-oriented triangulated box [0, sx] x [-sy/2, sy/2] x [-sz/2, sz/2], to be clamped at x = 0;
    ``divisions`` cells along each axis."""
    v, f = box_surface(tuple(divisions), tuple(size))
    return v + [size[0] / 2, 0.0, 0.0], f


def icosphere(subdivisions: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit sphere: an icosahedron subdivided ``subdivisions`` times (12, 42, 162, 642, 2562 vertices)."""
    t = (1 + 5**0.5) / 2
    v = [[-1, t, 0], [1, t, 0], [-1, -t, 0], [1, -t, 0], [0, -1, t], [0, 1, t], [0, -1, -t], [0, 1, -t],
         [t, 0, -1], [t, 0, 1], [-t, 0, -1], [-t, 0, 1]]
    f = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2], [10, 7, 6],
         [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5], [2, 4, 11], [6, 2, 10],
         [8, 6, 7], [9, 8, 1]]
    verts = [np.array(p, float) / np.linalg.norm(p) for p in v]
    for _ in range(subdivisions):
        mid: dict[tuple[int, int], int] = {}

        def midpoint(a, b, mid=mid):
            key = (min(a, b), max(a, b))
            if key not in mid:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                mid[key] = len(verts) - 1
            return mid[key]

        f = [[a, ab, ca] for a, b, c in f for ab, bc, ca in [(midpoint(a, b), midpoint(b, c), midpoint(c, a))]] + \
            [[ab, b, bc] for a, b, c in f for ab, bc in [(midpoint(a, b), midpoint(b, c))]] + \
            [[ca, bc, c] for a, b, c in f for bc, ca in [(midpoint(b, c), midpoint(c, a))]] + \
            [[ab, bc, ca] for a, b, c in f for ab, bc, ca in [(midpoint(a, b), midpoint(b, c), midpoint(c, a))]]
    return np.array(verts), np.array(f, np.int64)


def bumped_sphere(subdivisions: int, rng: np.random.Generator, bumps: int = 4,
                  amplitude: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """A star-shaped blob: the unit sphere with a smooth random radial displacement (never self-intersecting)."""
    v, f = icosphere(subdivisions)
    r = np.ones(len(v))
    for _ in range(bumps):
        freq = rng.normal(size=3) * rng.uniform(1.0, 3.0)
        r += amplitude / bumps * 2 * np.cos(v @ freq + rng.uniform(0, 2 * np.pi))
    return v * np.clip(r, 0.5, None)[:, None], f


def flat_cutout(name: str, target_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    """Re-grid a flat (z = const) real mesh into a near-uniform sheet of ~target_vertices, keeping the grid triangles
    whose centroid lies inside the original outline, then its largest connected piece. Unit width, centred."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    src = shared_mesh(name)
    p = src.vertices[:, :2] - src.vertices[:, :2].min(0)
    p /= p.max()
    extent = p.max(0)
    # the outline fills a fraction of its bounding box; aim the grid so the kept part has ~target vertices
    area = 0.5 * np.abs(np.cross(p[src.faces[:, 1]] - p[src.faces[:, 0]], p[src.faces[:, 2]] - p[src.faces[:, 0]]))
    cell = np.sqrt(area.sum() / target_vertices)
    nx, ny = max(2, int(extent[0] / cell)), max(2, int(extent[1] / cell))
    v, f = grid_sheet(nx, ny, extent[0], extent[1])
    v[:, :2] += extent / 2
    cen = v[f].mean(1)[:, :2]
    inside = np.zeros(len(f), bool)
    a, b, c = p[src.faces[:, 0]], p[src.faces[:, 1]], p[src.faces[:, 2]]
    for start in range(0, len(cen), 256):  # barycentric point-in-triangle test, in chunks to bound memory
        q = cen[start:start + 256, None, :]
        d = np.cross(b - a, c - a)
        d = np.where(np.abs(d) < 1e-18, 1e-18, d)
        s = np.cross(q - a, c - a) / d
        t = np.cross(b - a, q - a) / d
        inside[start:start + 256] = ((s >= 0) & (t >= 0) & (s + t <= 1)).any(1)
    f = f[inside]
    n = len(v)
    adj = coo_matrix((np.ones(len(f) * 3), (f.ravel(), np.roll(f, 1, axis=1).ravel())), shape=(n, n))
    _, label = connected_components(adj, directed=False)
    main = np.bincount(label[f[:, 0]]).argmax()
    f = f[label[f[:, 0]] == main]
    used = np.unique(f)
    remap = np.full(n, -1)
    remap[used] = np.arange(len(used))
    v = v[used]
    v[:, :2] -= v[:, :2].mean(0)
    return v, remap[f]


# Quadric decimation's aggressiveness (fast-simplification's ``agg``, 0-10). At its default of 7, cheburashka came out
# open (non-manifold) at 500-1500 vertices and self-intersecting at 2750-3000; at 3 both closed shared meshes stay
# closed and fill with TetGen at every target from 500 to 3000 vertices.
DECIMATION_AGGRESSIVENESS = 3


def decimated_solid(name: str, target_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    """A closed real mesh from ../shared/meshes decimated to ~``target_vertices`` by quadric edge collapse,
    centred at the origin and scaled to a unit bounding-box diagonal (the scene sets its physical size)."""
    import fast_simplification

    src = shared_mesh(name)
    v, f = src.vertices, src.faces
    if target_vertices < len(v):
        v, f = fast_simplification.simplify(v.astype(np.float32), f.astype(np.int32),
                                            target_reduction=1.0 - target_vertices / len(v),
                                            agg=DECIMATION_AGGRESSIVENESS)
    v = np.array(v, np.float64)  # a copy: the shared mesh is cached
    v -= 0.5 * (v.min(0) + v.max(0))
    v /= np.linalg.norm(np.ptp(v, 0))
    mesh = validate(v, np.asarray(f, np.int64))
    if not is_closed(mesh):
        raise MeshError(f"{name} decimated to {target_vertices} vertices is no longer closed")
    return mesh.vertices, mesh.faces
