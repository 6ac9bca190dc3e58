"""The ground-truth simulator: any triangle mesh + SimParams -> vertex positions over time.

Geometry decides the physics: a mesh that bounds a volume is a solid, whether closed or only nearly so
(``winding.enclosed_by_winding``: a teapot's open seams, Suzanne's eyes, self-intersecting or overlapping parts);
an open sheet is a shell (cloth) of ``params.thickness``. Solids are embedded in a regular lattice of well-shaped
tets, filled where the surface's winding number says inside, and stepped by implicit stable Neo-Hookean FEM
(``implicit_fem``), which meets beam theory; cloth is a MuJoCo shell flex (``mujoco_engine``). The v1 dataset was
made with the older all-VBD settings on TetGen tets (``DATASET``, ``newton_engine``).
"""

import contextlib
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import MeshError
from ...mesh import Mesh, enclosed_volume, is_closed, pinned_patch_samples, thinnest_width, validate
from ...params import SimParams
from . import newton_engine
from .elements import mean_edge_length, signed_tet_volumes
from .implicit_fem import simulate_solid
from .mujoco_engine import simulate_cloth
from .newton_engine import simulate_body
from .winding import INSIDE, enclosed_by_winding, winding_numbers

MIN_FILL = 0.05  # lattice tets the body barely touches keep this fraction of its stiffness
MAX_INTERIOR_FACTOR = 0.5  # interior nodes at most this fraction of surface vertices (keeps big meshes affordable)


def tetrahedralize(mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
    """The v1 dataset's conforming fill (``DATASET``; the reference's lattice needs none): quality tets inside a
    closed surface: nodes (N, 3) whose first V rows are the surface vertices, tets (M, 4).

    Interior resolution follows the surface's mean edge length (max tet volume ~ edge^3), coarsened for very
    dense surfaces so the interior never dominates the cost.
    """
    import tetgen

    v = mesh.vertices
    edge = mean_edge_length(v, mesh.faces)
    max_volume = 0.5 * edge**3
    # A body whose volume at the surface's resolution would need far more interior nodes than surface ones
    # (a large, finely tessellated solid) gets a coarser interior.
    max_volume = max(max_volume, enclosed_volume(mesh) / (MAX_INTERIOR_FACTOR * len(v)))
    try:
        # TetGen writes _skipped.face/.node into the working directory when it rejects a surface: not into ours
        with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
            nodes, tets, _, _ = tetgen.TetGen(v, mesh.faces.astype(np.int32)).tetrahedralize(
                nobisect=True, quality=True, minratio=2.0, mindihedral=0.0, maxvolume=max_volume, quiet=True)
    except RuntimeError as exc:
        raise MeshError(f"TetGen could not fill this closed mesh (self-intersecting?): {exc}") from exc
    nodes = np.asarray(nodes, np.float64)
    tets = np.asarray(tets, np.int64).reshape(-1, 4)
    if len(nodes) < len(v) or not np.allclose(nodes[: len(v)], v, atol=1e-9 * mesh.diagonal):
        raise MeshError("TetGen moved or dropped surface vertices (duplicate vertices?); cannot simulate as a solid")
    if len(tets) == 0:
        raise MeshError("TetGen produced no tetrahedra for this closed mesh")
    flip = signed_tet_volumes(nodes, tets) < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]  # Newton expects positive orientation
    return nodes, tets


# The six Kuhn tetrahedra of a unit cube: tet for axis order (a, b, c) runs 0 -> e_a -> e_a + e_b -> (1, 1, 1).
_PERMS = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
# Cubes the surface passes through are filled by sampling the winding number at this many points along each edge
# (a fill known to 1 / SUBSAMPLES^3); cubes wholly inside or outside are decided by their corners.
SUBSAMPLES = 2


def _kuhn_corners():
    out = []
    for a, b, _ in _PERMS:
        c0 = np.zeros(3, int)
        c1 = c0.copy()
        c1[a] = 1
        c2 = c1.copy()
        c2[b] = 1
        out.append([c0, c1, c2, np.ones(3, int)])
    return np.array(out)  # (6, 4, 3)


def build_cage(points, vertices, faces, cell, volume=None):
    """A regular lattice of cubes of about ``cell`` metres, each split into six Kuhn tetrahedra (conforming, all of
    one shape), keeping the cubes that the solid bounded by (``vertices``, ``faces``) fills or that any of
    ``points`` touch. Inside is where the surface's generalized winding number exceeds 1/2 (``winding``), so the
    surface may be slightly open, self-intersecting or in overlapping parts.

    Returns nodes (N, 3), tets (M, 4) positively oriented, fill (M,) the fraction of each cube the solid fills,
    node volumes (N,) (lumped mass per unit density: the solid's volume spread with barycentric weights; scaled to
    ``volume`` (m^3) when given, e.g. the exact volume of a closed mesh), and (tet, weights (P, 4)) locating each of
    ``points`` in the lattice. The grid spans the surface's bounding box exactly, so a box is represented without a
    staircase.
    """
    vertices = np.asarray(vertices, np.float64)
    lo = vertices.min(0)
    ext = vertices.max(0) - lo
    n = np.maximum(1, np.ceil(ext / cell - 1e-9).astype(int))
    sp = ext / n
    corners = _kuhn_corners()
    lut = np.full(9, -1)
    for k, (a, b, _) in enumerate(_PERMS):
        lut[a * 3 + b] = k

    def locate(p):
        u = (p - lo) / np.where(sp > 0, sp, 1.0)
        c = np.clip(np.floor(u).astype(int), 0, n - 1)
        f = np.clip(u - c, 0.0, 1.0)
        order = np.argsort(-f, axis=1, kind="stable")  # u_a >= u_b >= u_c
        perm = lut[order[:, 0] * 3 + order[:, 1]]
        fs = np.take_along_axis(f, order, 1)
        w = np.stack([1 - fs[:, 0], fs[:, 0] - fs[:, 1], fs[:, 1] - fs[:, 2], fs[:, 2]], 1)
        return c, perm, w

    # Cubes decided by their corners, unless the surface passes through them (its vertices, or samples of its
    # triangles at half a cube, lie in them): those are sampled inside.
    grid = np.stack(np.meshgrid(*[np.arange(k + 1) for k in n], indexing="ij"), -1).reshape(-1, 3)
    node_in = (np.abs(winding_numbers(vertices, faces, lo + grid * sp)) > INSIDE).reshape(n + 1)
    cube_corners = np.stack([node_in[i:i + n[0], j:j + n[1], k:k + n[2]]
                             for i in (0, 1) for j in (0, 1) for k in (0, 1)], -1)
    surface = np.concatenate([points, pinned_patch_samples(vertices, faces, np.arange(len(vertices)), 0.5 * cell)])
    crossed = np.zeros(tuple(n), bool)
    crossed[tuple(locate(surface)[0].T)] = True
    full = cube_corners.all(-1) & ~crossed
    mixed = crossed | (cube_corners.any(-1) & ~full)
    offsets = (np.stack(np.meshgrid(*[np.arange(SUBSAMPLES)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5)
    mixed_idx = np.argwhere(mixed)
    samples = lo + ((mixed_idx[:, None, :] + offsets[None] / SUBSAMPLES) * sp).reshape(-1, 3)
    inside = np.abs(winding_numbers(vertices, faces, samples)) > INSIDE
    samples = samples[inside]
    cube_volume = float(np.prod(sp))
    fill_cube = full.astype(np.float64)
    fill_cube[tuple(mixed_idx.T)] = inside.reshape(-1, SUBSAMPLES**3).mean(1)
    # Full cubes: each Kuhn tet gives a quarter of its sixth to each corner (centroid-exact); sampled ones spread
    # each inside sample's volume by its barycentric weights, as the centroid of its sub-cube.
    full_idx = np.argwhere(full)
    centroids = lo + (np.repeat(full_idx, 6, 0) + np.tile(corners.mean(1), (len(full_idx), 1))) * sp
    piece = np.concatenate([np.full(len(centroids), cube_volume / 6.0),
                            np.full(len(samples), cube_volume / SUBSAMPLES**3)])
    solid = np.concatenate([centroids, samples])
    sc, _, _ = locate(np.concatenate([points, solid]))
    cid = np.ravel_multi_index(sc.T, n)
    cells = np.union1d(cid, np.flatnonzero(fill_cube.ravel() > 0))
    cidx = np.stack(np.unravel_index(cells, n), 1)  # (C, 3)
    corner_nodes = cidx[:, None, None, :] + corners[None]  # (C, 6, 4, 3)
    gid = np.ravel_multi_index(corner_nodes.reshape(-1, 3).T, n + 1)
    used, inv = np.unique(gid, return_inverse=True)
    tets = inv.reshape(-1, 4)
    nodes = lo + np.stack(np.unravel_index(used, n + 1), 1) * sp

    def tet_of(p):
        cc, perm, w = locate(p)
        return np.searchsorted(cells, np.ravel_multi_index(cc.T, n)) * 6 + perm, w

    tp, wp = tet_of(points)
    tc, wc = tet_of(solid)
    fill = np.repeat(fill_cube.ravel()[cells], 6)
    mass = np.zeros(len(nodes))
    np.add.at(mass, tets[tc].reshape(-1), (wc * piece[:, None]).reshape(-1))
    if volume is not None and mass.sum() > 0:
        mass *= volume / mass.sum()
    # Kuhn tets of odd permutations come out negatively oriented: swap two nodes (and their weights)
    flip = signed_tet_volumes(nodes, tets) < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]
    wp2 = wp.copy()
    fl = flip[tp]
    wp2[fl] = wp[fl][:, [0, 2, 1, 3]]
    return nodes, tets, np.clip(fill, 0.0, 1.0), mass, tp, wp2


@dataclass(frozen=True)
class SolverSettings:
    """How a body is simulated.

    Cloth (open sheets) runs on ``cloth_engine``: "mujoco" (``mujoco_engine.simulate_cloth``, its step set by the
    membrane's wave speed) or "newton" (VBD at ``substep_rate`` x ``iterations``). Solids are ``embedded`` in a
    lattice of about ``lattice_cells`` cubes (or cubes of ``cell`` metres when given) whose nodes are simulated and
    carry the surface vertices along by barycentric interpolation, stepped by ``solid_engine`` ("implicit":
    ``implicit_fem``, its step set by the frame rate; "newton": VBD like cloth); without ``embedded`` the
    conforming TetGen mesh of a closed surface itself runs on VBD (the v1 dataset)."""

    substep_rate: float  # VBD substeps per simulated second (rounded up to whole substeps per frame)
    iterations: int
    embedded: bool
    lattice_cells: int = 1500
    cell: float | None = None
    solid_engine: str = "newton"
    cloth_engine: str = "newton"
    # Linear tets lock in bending: a cantilever's sag reached 0.90 of Euler-Bernoulli's at 6 cells across its
    # thickness and 0.96 at 8 (docs/physics-validation.md), so the lattice is refined until the body's thinnest
    # principal extent is ``min_cells_across`` cells, within ``max_lattice_cells`` cubes.
    min_cells_across: int = 8
    max_lattice_cells: int = 8000


# ``python -m model_runtime reference`` and ``data validate``: see docs/physics-validation.md for what they meet.
# Cloth left VBD (2026-12-04): at every setting tried (288 x 32 to 1152 x 64 substeps/s x iterations) a clamped
# strip sagged 40-67x plate theory, and an undamped swinging sheet lost a third of its energy in 2 s.
# substep_rate and iterations remain for the VBD paths (DATASET, and cloth_engine="newton").
REFERENCE = SolverSettings(substep_rate=288.0, iterations=32, embedded=True, solid_engine="implicit",
                           cloth_engine="mujoco")
# The v1 dataset (issue 3): conforming tets, 12 x 2. Kept so that dataset can be regenerated bit for bit.
DATASET = SolverSettings(substep_rate=newton_engine.SUBSTEPS * 24.0, iterations=newton_engine.ITERATIONS,
                         embedded=False)


def lattice_cell(vertices: np.ndarray, volume: float, settings: SolverSettings) -> float:
    """Edge (m) of the embedding lattice's cubes: ``settings.cell`` when given, else about ``lattice_cells`` cubes
    for the body's volume, refined so its thinnest principal extent is ``min_cells_across`` cubes across, but never
    beyond ``max_lattice_cells`` cubes."""
    if settings.cell is not None:
        return settings.cell
    cell = min((volume / settings.lattice_cells) ** (1.0 / 3.0), thinnest_width(vertices) / settings.min_cells_across)
    return max(cell, (volume / settings.max_lattice_cells) ** (1.0 / 3.0))


@dataclass(frozen=True)
class EmbeddedSolid:
    """A solid's lattice (``build_cage``) with what simulating it needs: per-tet stiffness factor, lumped node
    volumes (m^3), the held nodes, and where each surface vertex rides (tet ``at`` (V,), barycentric ``weights``)."""

    nodes: np.ndarray
    tets: np.ndarray
    stiffness: np.ndarray
    node_volume: np.ndarray
    held: np.ndarray
    at: np.ndarray
    weights: np.ndarray

    def surface(self, cage: np.ndarray) -> np.ndarray:
        """Surface vertex positions (T, V, 3) carried by lattice node positions ``cage`` (T, N, 3)."""
        return np.einsum("pk,fpkd->fpd", self.weights.astype(np.float64),
                         np.asarray(cage)[:, self.tets[self.at]].astype(np.float64))


def embed_solid(mesh: Mesh, pins: np.ndarray, volume: float | None, cell: float) -> EmbeddedSolid:
    """The lattice of cubes of ``cell`` metres that simulates the solid ``mesh`` bounds (``volume``: its exact
    volume when closed), with ``pins`` (vertex indices) held."""
    v = mesh.vertices
    patch = pinned_patch_samples(v, mesh.faces, pins, 0.5 * cell)
    nodes, tets, fill, node_volume, at, weights = build_cage(np.vstack([v, patch]), v, mesh.faces, cell, volume)
    # A node is held when it carries weight for a pinned vertex or for a point of the surface the pins span, so
    # pinned vertices are exactly still and a clamped face is clamped between its vertices too.
    hold = np.concatenate([pins, np.arange(len(v), len(v) + len(patch))])
    held = np.unique(tets[at[hold]][weights[hold] > 1e-9]) if hold.size else np.zeros(0, np.int64)
    if held.size >= len(nodes):
        raise MeshError("the pins hold the whole body: nothing is left free to move")
    return EmbeddedSolid(nodes, tets, np.maximum(fill, MIN_FILL), node_volume, held, at[: len(v)],
                         weights[: len(v)])


def simulate_reference(
    vertices,
    faces,
    params: SimParams,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    settings: SolverSettings | str = "reference",
) -> np.ndarray:
    """Simulate the mesh; return float32 positions (params.frames + 1, V, 3) with frame 0 the input vertices.

    ``settings``: "reference" (the validated settings, the default), "dataset" (those the v1 dataset was made
    with) or a ``SolverSettings``.
    """
    if isinstance(settings, str):
        if settings not in ("reference", "dataset"):
            raise ValueError(f"unknown solver settings {settings!r}")
        settings = REFERENCE if settings == "reference" else DATASET
    mesh = validate(vertices, faces)
    pins = np.asarray(params.pins, np.int64)
    if pins.size and pins.max() >= len(mesh.vertices):
        raise MeshError(f"pin index {int(pins.max())} is out of range for a mesh of {len(mesh.vertices)} vertices")
    if progress is not None:
        progress(0.0, "building the physics model")
    substeps = max(1, math.ceil(settings.substep_rate / params.fps - 1e-9))
    run = dict(progress=progress, should_cancel=should_cancel, substeps=substeps, iterations=settings.iterations)
    v = mesh.vertices
    closed = is_closed(mesh)
    # Without the lattice (v1's settings) only closed meshes are solids, as v1 was made.
    volume = enclosed_volume(mesh) if closed else enclosed_by_winding(mesh) if settings.embedded else 0.0
    if closed and volume <= 1e-9 * mesh.diagonal**3:
        raise MeshError("this closed mesh encloses no volume (flat or folded onto itself): nothing to fill as a solid")
    if not closed and volume == 0.0:
        if settings.cloth_engine == "mujoco":
            positions = simulate_cloth(v, mesh.faces, params, progress=progress, should_cancel=should_cancel)
        else:
            positions = simulate_body(v, mesh.faces, params, **run)
    elif not settings.embedded:
        nodes, tets = tetrahedralize(mesh)
        positions = simulate_body(nodes, mesh.faces, params, tets=tets, **run)[:, : len(v)]
    else:
        body = embed_solid(mesh, pins, volume if closed else None, lattice_cell(v, volume, settings))
        if settings.solid_engine == "implicit":
            cage = simulate_solid(body.nodes, body.tets, params, body.node_volume, body.held, tet_scale=body.stiffness,
                                  center=v.mean(0), progress=progress, should_cancel=should_cancel)
        else:
            cage = simulate_body(body.nodes, body.tets[:, :3], params, tets=body.tets, node_mass=body.node_volume,
                                 tet_scale=body.stiffness, pinned=body.held, center=v.mean(0), **run)
        positions = body.surface(cage).astype(np.float32)
    positions = np.ascontiguousarray(positions[:, : len(v)])
    positions[:, pins] = v[pins]
    positions[0] = v
    return positions
