"""A solid's embedding lattice: regular cubes split into Kuhn tetrahedra, filled where the surface's winding
number says inside, with the nodes the pins hold and where each surface vertex rides. The reference's solids
(lab/data/reference.py) and the product's pinned solids (continuum_solid.py) are simulated on it."""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from .errors import MeshError
from .mesh import Mesh, pinned_patch_samples, thinnest_width
from .tets import signed_tet_volumes
from .winding import INSIDE, winding_numbers

MIN_FILL = 0.05  # lattice tets the body barely touches keep this fraction of its stiffness


@dataclass(frozen=True)
class LatticeSize:
    """How fine a body's lattice is: about ``lattice_cells`` cubes for its volume (cubes of ``cell`` metres when
    given), refined until its thinnest principal extent is ``min_cells_across`` cubes, within ``max_lattice_cells``
    (reference.SolverSettings carries the same fields)."""

    lattice_cells: int = 1500
    min_cells_across: int = 8
    max_lattice_cells: int = 8000
    cell: float | None = None


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


def lattice_cell(vertices: np.ndarray, volume: float, settings: LatticeSize) -> float:
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


def held_together(body: EmbeddedSolid) -> EmbeddedSolid:
    """The solid without the lattice's pieces that join its held part (a free body's largest piece) only along a
    cube's edge or at a corner. Such a hinge turns at no cost in energy: a zero-frequency mode that a reduced basis
    of modes and their derivatives cannot take (on a v2 cheburashka one cube hanging by an edge left 9 of 47 basis
    directions, and it did not move). Their vertices ride the nearest kept tet, extrapolated, and their mass moves
    to the nearest kept node."""
    m = len(body.tets)
    faces = np.sort(body.tets[:, [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]], axis=-1).reshape(-1, 3)
    _, face = np.unique(faces, axis=0, return_inverse=True)
    face = face.ravel()
    links = sp.coo_matrix((np.ones(len(face)), (np.repeat(np.arange(m), 4), m + face)), shape=(m + face.max() + 1,) * 2)
    label = connected_components(links, directed=False)[1][:m]
    held = np.zeros(len(body.nodes), bool)
    held[body.held] = True
    # a free body (nothing held) keeps its largest piece: the rest could only drift apart from it
    anchors = label[held[body.tets].any(1)] if len(body.held) else [np.bincount(label).argmax()]
    keep = np.isin(label, np.unique(anchors))
    if keep.all():
        return body
    kept_nodes = np.unique(body.tets[keep])
    new_index = np.full(len(body.nodes), -1)
    new_index[kept_nodes] = np.arange(len(kept_nodes))
    nodes = body.nodes[kept_nodes]
    volume = body.node_volume[kept_nodes].astype(np.float64)
    gone = np.setdiff1d(np.arange(len(body.nodes)), kept_nodes)
    np.add.at(volume, cKDTree(nodes).query(body.nodes[gone])[1], body.node_volume[gone])
    tets = new_index[body.tets[keep]]
    tet_index = np.cumsum(keep) - 1
    at, weights = tet_index[body.at], body.weights.astype(np.float64).copy()
    moved = np.flatnonzero(~keep[body.at])
    if len(moved):
        x = np.einsum("pk,pkd->pd", weights[moved], body.nodes[body.tets[body.at[moved]]].astype(np.float64))
        corners = nodes[tets].astype(np.float64)
        at[moved] = cKDTree(corners.mean(1)).query(x)[1]
        c = corners[at[moved]]
        local = np.linalg.solve((c[:, 1:] - c[:, :1]).transpose(0, 2, 1), (x - c[:, 0])[:, :, None])[:, :, 0]
        weights[moved] = np.column_stack([1.0 - local.sum(1), local])
    return EmbeddedSolid(nodes, tets, body.stiffness[keep], volume.astype(body.node_volume.dtype),
                         new_index[body.held], at, weights.astype(body.weights.dtype))
