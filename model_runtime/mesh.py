"""Triangle meshes: OBJ reading/writing, validation, and the geometric measures both simulators need."""

from dataclasses import dataclass

import numpy as np

from .errors import MeshError, ParameterError

MAX_VERTICES = 1_000_000


@dataclass
class Mesh:
    vertices: np.ndarray  # (V, 3) float64, metres
    faces: np.ndarray  # (F, 3) int64, triangles

    @property
    def diagonal(self) -> float:
        return bbox_diagonal(self.vertices)


def bbox_diagonal(points: np.ndarray) -> float:
    """Length of the diagonal of the axis-aligned bounding box of points (N, 3): the scale every size is measured in."""
    return float(np.linalg.norm(np.ptp(np.asarray(points), axis=0)))


def read_obj(path: str) -> Mesh:
    """Read vertices and faces (polygons fan-triangulated) from a Wavefront OBJ file."""
    vs, fs = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("v "):
                vs.append([float(x) for x in line.split()[1:4]])
            elif line.startswith("f "):
                idx = [int(t.split("/")[0]) for t in line.split()[1:]]
                idx = [i - 1 if i > 0 else len(vs) + i for i in idx]
                fs += [[idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1)]
    return Mesh(np.array(vs, np.float64).reshape(-1, 3), np.array(fs, np.int64).reshape(-1, 3))


def write_obj(path: str, vertices: np.ndarray, faces: np.ndarray) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.writelines("v %.9g %.9g %.9g\n" % tuple(p) for p in vertices)
        out.writelines("f %d %d %d\n" % tuple(t + 1) for t in faces)


def validate(vertices, faces) -> Mesh:
    """Return a clean Mesh or raise MeshError explaining what is wrong with the input."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces)
    if v.ndim != 2 or v.shape[-1] != 3:
        raise MeshError(f"vertices must have shape (V, 3), got {v.shape}")
    if len(v) == 0:
        raise MeshError("the mesh has no vertices")
    check_vertex_count(len(v))
    if not np.isfinite(v).all():
        raise MeshError(f"{int((~np.isfinite(v).all(1)).sum())} vertices have NaN or infinite coordinates")
    if f.size == 0:
        raise MeshError("the mesh has no faces; NeuROK simulates surfaces "
                        "(loose vertices and edges alone carry no mass)")
    if f.ndim != 2 or f.shape[-1] != 3 or not np.issubdtype(f.dtype, np.integer):
        raise MeshError(f"faces must be integer triangles of shape (F, 3), got {f.shape} {f.dtype}")
    f = f.astype(np.int64)
    if f.min() < 0 or f.max() >= len(v):
        raise MeshError("faces refer to vertices that do not exist")
    mesh = Mesh(v, f)
    if total_area(mesh) <= 1e-12 * max(mesh.diagonal, 1e-30) ** 2 or mesh.diagonal < 1e-6:
        raise MeshError("the mesh has no area (all faces degenerate or the object is smaller than a micrometre)")
    return mesh


def check_vertex_count(count: int) -> None:
    """Refuse a mesh of ``count`` vertices over MAX_VERTICES (the add-on asks before it exports anything)."""
    if count > MAX_VERTICES:
        raise MeshError(f"the mesh has {count:,} vertices; NeuROK handles at most {MAX_VERTICES:,}. "
                        "Decimate it or simulate a proxy and bind it with a Surface Deform modifier")


def check_pins(mesh: Mesh, pins: np.ndarray) -> None:
    """Refuse pins that cannot hold the surface: all of them on loose vertices, or all of the surface pinned.

    A loose vertex (in no face) carries no mass and is attached to nothing, so a pin on it holds nothing: with only
    such pins the object would simply fall, which is not what pinning asked for, so that is refused with the
    reason. When some pins are on the surface they hold the object, and the loose pinned vertices just stay put.
    """
    if not len(pins):
        return
    on_face = np.zeros(len(mesh.vertices), bool)
    on_face[mesh.faces.reshape(-1)] = True
    held = np.unique(pins[on_face[pins]])
    if not len(held):
        raise ParameterError(f"the pinned vertices ({len(np.unique(pins))}) belong to no face, so they hold nothing "
                             "(loose vertices carry no mass); pin vertices of the surface, or remove the pins to "
                             "let the object move freely")
    if len(held) == np.count_nonzero(on_face):
        raise ParameterError("every vertex of the surface is pinned: nothing is left free to move")


def face_areas(mesh: Mesh) -> np.ndarray:
    a, b, c = (mesh.vertices[mesh.faces[:, k]] for k in range(3))
    return 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)


def total_area(mesh: Mesh) -> float:
    return float(face_areas(mesh).sum())


def edge_strain(positions: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(T, E) relative change of each undirected edge's length in positions (T, V, 3) from its length in frame 0."""
    e = np.unique(np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1), axis=0)
    length = np.linalg.norm(positions[:, e[:, 0]] - positions[:, e[:, 1]], axis=-1)
    return length / np.maximum(length[0], 1e-12) - 1.0


def is_closed(mesh: Mesh) -> bool:
    """True when every edge is shared by exactly two faces (a watertight, edge-manifold surface)."""
    f = mesh.faces
    edges = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool(len(counts)) and bool(np.all(counts == 2))


def enclosed_volume(mesh: Mesh) -> float:
    """Signed-volume sum (divergence theorem); meaningful only for closed meshes."""
    a, b, c = (mesh.vertices[mesh.faces[:, k]] for k in range(3))
    return float(abs(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0)


def sample_surface(mesh: Mesh, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Area-uniform surface samples: positions (n, 3), their face index (n,) and barycentrics (n, 3)."""
    areas = face_areas(mesh)
    face = rng.choice(len(areas), size=n, p=areas / areas.sum())
    r1, r2 = rng.random(n), rng.random(n)
    s = np.sqrt(r1)
    bary = np.stack([1 - s, s * (1 - r2), s * r2], axis=1)
    tri = mesh.vertices[mesh.faces[face]]
    return np.einsum("nk,nkd->nd", bary, tri), face, bary


def thinnest_width(vertices: np.ndarray) -> float:
    """Smallest width of a point set across its two minor principal axes (m)."""
    centred = vertices - vertices.mean(0)
    axes = np.linalg.svd(centred, full_matrices=False)[2]
    # Widths at every 5 degrees between the two minor axes: a square cross-section's principal axes are arbitrary
    # within its plane (equal eigenvalues) and may run along its diagonal.
    turn = np.linspace(0.0, np.pi, 36, endpoint=False)
    across = np.cos(turn)[:, None] * axes[1] + np.sin(turn)[:, None] * axes[2]
    return float(np.ptp(centred @ across.T, axis=0).min())


def pinned_patch_samples(vertices: np.ndarray, faces: np.ndarray, pins: np.ndarray, spacing: float) -> np.ndarray:
    """Points at most ``spacing`` apart on every triangle whose three vertices are pinned: the surface the pins
    span. A lattice finer than the surface would otherwise be held only at the pinned vertices themselves, a leaky
    clamp (a cantilever from a surface two triangles across sagged 28% past beam theory on an 8-across lattice)."""
    tri = faces[np.isin(faces, pins).all(1)]
    if not len(tri):
        return np.zeros((0, 3))
    corners = vertices[tri]  # (T, 3, 3)
    longest = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=-1).max(1)
    steps = np.maximum(1, np.ceil(longest / spacing)).astype(int)
    out = []
    for n in np.unique(steps):
        i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        keep = i + j <= n
        bary = np.stack([i[keep], j[keep], n - i[keep] - j[keep]], 1) / n  # (B, 3)
        out.append(np.einsum("bk,tkd->tbd", bary, corners[steps == n]).reshape(-1, 3))
    return np.concatenate(out)


AMBIGUOUS = 0.02  # relative gap between two principal second moments below which their axes are taken as tied
SWEEP = 720  # directions tried within a tied plane
LEAN = 1e-6  # a lean criterion smaller than this (dimensionless) does not tell directions apart


def principal_frame(mesh: Mesh, pins: np.ndarray, gravity=(0.0, 0.0, 0.0)) -> np.ndarray:
    """A rotation (3, 3) whose columns are the scene's own axes in world coordinates: it turns with the mesh about
    gravity, and with mesh and gravity together, so what is computed in it does not depend on the scene's heading.

    With gravity, the third axis points up (against it), as it did for every body the network was trained on, and
    the first is the surface's longest horizontal principal axis; without, the axes are the surface's principal
    axes of its second moment of area, longest first. A direction within a plane of tied moments, and each axis's
    sign, are fixed by what the scene prefers (_leans); a shape symmetric under the remaining choice looks the same
    either way.
    """
    a, b, c = (mesh.vertices[mesh.faces[:, k]] for k in range(3))
    area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
    centroid = ((a + b + c) / 3 * area[:, None]).sum(0) / max(area.sum(), 1e-300)
    a, b, c = a - centroid, b - centroid, c - centroid
    s = a + b + c
    # exact second moment of each triangle about the centroid: A / 12 (sum v v^T + s s^T)
    second = sum(np.einsum("f,fi,fj->ij", area / 12, v, v) for v in (a, b, c, s))
    length = np.sqrt(max(np.trace(second) / max(area.sum(), 1e-300), 1e-300))
    shape = (s / 3 / length, area / max(area.sum(), 1e-300),
             (mesh.vertices[pins].mean(0) - centroid) / length if len(pins) else np.zeros(3))
    g = np.asarray(gravity, float)
    if g @ g > 0:
        up = -g / np.linalg.norm(g)
        plane = np.linalg.svd(np.eye(3) - np.outer(up, up))[0][:, :2]  # any orthonormal basis of the horizontal
        horizontal, told = _principal(plane, second, shape)
        axes, told = np.column_stack([horizontal, up]), np.append(told, -1)  # gravity tells up best
    else:
        axes, told = _principal(np.eye(3), second, shape)
    # The two best-directed axes keep their direction; the third completes a right-handed frame (an axis whose
    # sign the shape cannot tell, of a shape symmetric under turning half a turn about another axis).
    k = int(np.argmax(told))
    axes[:, k] = np.cross(axes[:, (k + 1) % 3], axes[:, (k + 2) % 3])
    return axes


def _principal(basis: np.ndarray, second: np.ndarray, shape) -> tuple[np.ndarray, np.ndarray]:
    """The principal axes (3, d) of the second moment within the span of ``basis`` (3, d), largest first, each
    directed the way the shape leans (_leans), and for each the rank of the criterion that directed it (the last,
    an even moment, cannot); within the first pair of tied moments, the direction it leans most."""
    moments, local = np.linalg.eigh(basis.T @ second @ basis)
    moments, axes = moments[::-1], basis @ local[:, ::-1]
    tied = np.nonzero(moments[:-1] - moments[1:] <= AMBIGUOUS * max(moments[0], 1e-300))[0]
    if len(tied):
        k = tied[0]
        turn = np.linspace(0, 2 * np.pi, SWEEP, endpoint=False)
        candidates = np.cos(turn)[:, None] * axes[:, k] + np.sin(turn)[:, None] * axes[:, k + 1]
        leans = _leans(candidates, *shape)
        telling = leans[np.argmax(np.abs(leans).max(1) > LEAN)]  # the first criterion that tells them apart
        best = candidates[np.argmax(telling)]
        axes[:, k + 1] = np.cross(np.cross(axes[:, k], axes[:, k + 1]), best)
        axes[:, k] = best
    leans = _leans(axes.T, *shape)
    told = np.argmax(np.abs(leans[:-1]) > LEAN, axis=0)  # each axis's first telling criterion
    told[(np.abs(leans[:-1]) <= LEAN).all(0)] = len(leans) - 1
    return axes * np.where(leans[told, np.arange(axes.shape[1])] < 0, -1.0, 1.0), told


def _leans(directions: np.ndarray, centres: np.ndarray, area: np.ndarray, pinned: np.ndarray) -> np.ndarray:
    """How the shape leans along each direction (D, 3), by three criteria in order (3, D): towards its pins, by
    its skew (third moment of area), by its reach (fourth moment); each dimensionless (lengths in the shape's size,
    areas as fractions) and telling where it exceeds LEAN."""
    # the moments as tensors, summed over faces once: a tied plane's sweep then costs nothing per face
    skew = np.einsum("f,fi,fj,fk->ijk", area, centres, centres, centres, optimize=True)
    reach = np.einsum("f,fi,fj,fk,fl->ijkl", area, centres, centres, centres, centres, optimize=True)
    d = directions
    return np.stack([d @ pinned, np.einsum("ijk,di,dj,dk->d", skew, d, d, d, optimize=True),
                     np.einsum("ijkl,di,dj,dk,dl->d", reach, d, d, d, d, optimize=True)])
