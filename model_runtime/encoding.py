"""Encoding a mesh once per mesh and pin set: what the network says about it (shape code, decoder
basis fields at query points and at every vertex, pins held) and the spring network over its query
points. Independent of the physical parameters, so ``Simulator`` caches it and re-simulating after a
parameter tweak skips it.
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from . import mesh as meshlib
from .model import NeuROK

ENCODER_POINTS = 2048  # surface samples the prior encodes
QUERY_POINTS = 256  # surface samples the body's mass and springs live on
# pinned vertices joined to the springs as fixed, massless points, so the band next to the pins
# cannot stretch freely
ANCHOR_POINTS = 32
VERTEX_CHUNK = 8192  # vertices per decoder or distance batch: bounds memory for any mesh size
NEIGHBOURS = 10  # nearest points each query point is joined to by a spring (solids)
# a sheet's points join fewer (a flat triangulation has 6): its springs also carry the stretch
# inertia, paid per spring
SHEET_NEIGHBOURS = 7
PIN_RADIUS = 0.05  # fraction of the diagonal over which the pin correction fades out


@dataclass
class Encoding:
    """What the network says about one mesh with one pin set; independent of the physical
    parameters."""

    vertices: np.ndarray  # (V, 3) float64 input vertices
    # (3, 3) the mesh's own axes (mesh.principal_frame), in which the network sees it
    axes: np.ndarray
    scale: float  # diagonal of the bounding box in those axes
    queries: np.ndarray  # (N, 3) physical query positions on the surface
    # area-weighted surface centroid: the centre of mass of the surface-mass model
    centroid: np.ndarray
    phi_q: torch.Tensor  # (N, 3, P) normalized basis at queries, pins corrected
    phi_v: torch.Tensor  # (V, 3, P) float32 normalized basis at vertices, pins corrected
    code: torch.Tensor
    springs: tuple[np.ndarray, np.ndarray]
    pinned: bool
    closed: bool
    area: float
    volume: float
    faces: np.ndarray  # (F, 3) int64
    pins: np.ndarray  # pinned vertex indices
    # the last `anchors` queries are pinned vertices: held still, massless, joined by springs
    anchors: int = 0
    # Poisson ratio -> the solid's static sag at the queries (_solid_sag)
    sag: dict = field(default_factory=dict)

    @property
    def surface_queries(self) -> np.ndarray:
        """The queries sampled on the surface (without the pinned anchors)."""
        return self.queries[:len(self.queries) - self.anchors]


def decoder_view(model: NeuROK, mesh: meshlib.Mesh, pin_mask: np.ndarray, axes: np.ndarray,
                 rng: np.random.Generator):
    """The network's view of the mesh in its own ``axes``: encodes ENCODER_POINTS surface samples drawn from
    ``rng`` and returns ``basis(points, pinned, dtype)``, the decoder's normalized basis fields (N, 3, P) at points
    (N, 3) in world axes (``pinned``: (1, N) flags), with the shape code and the diagonal the network normalizes by."""
    own = mesh.vertices @ axes
    lo, hi = own.min(0), own.max(0)
    center, scale = (lo + hi) / 2, float(np.linalg.norm(hi - lo))

    def normalized(x):
        return torch.as_tensor((x @ axes - center) / scale, dtype=torch.float32)[None]

    pts, face, bary = meshlib.sample_surface(mesh, ENCODER_POINTS, rng)
    flags = torch.as_tensor((bary * pin_mask[mesh.faces[face]]).sum(1), dtype=torch.float32)[None]
    tokens, _, code = model.prior(normalized(pts), flags)

    def basis(points, pinned, dtype=torch.float32):  # fields from the mesh's own axes to world axes
        phi = model.decoder.basis(normalized(points), pinned, tokens)[0].to(dtype)
        return torch.einsum("ij,njp->nip", torch.as_tensor(axes, dtype=phi.dtype), phi)

    return basis, code[0], scale


def encode_mesh(model: NeuROK, mesh: meshlib.Mesh, pins: np.ndarray, axes: np.ndarray) -> Encoding:
    """What the network says about the mesh, seen in its own ``axes`` (mesh.principal_frame), so
    that it turns with the scene: physics does not depend on which way the scene faces."""
    rng = np.random.default_rng(0)  # fixed: the same mesh always gets the same samples
    pin_mask = np.zeros(len(mesh.vertices), np.float32)
    pin_mask[pins] = 1.0
    basis, code, scale = decoder_view(model, mesh, pin_mask, axes, rng)
    queries, face, bary = meshlib.sample_surface(mesh, QUERY_POINTS, rng)
    q_pin = torch.as_tensor((bary * pin_mask[mesh.faces[face]]).sum(1), dtype=torch.float32)[None]
    phi_q = basis(queries, q_pin, torch.float64)
    vertex_pin = torch.as_tensor(pin_mask)[None]
    phi_v = torch.cat([  # float32: at ~0.8 kB a vertex it is the largest thing kept per mesh
        basis(mesh.vertices[i:i + VERTEX_CHUNK], vertex_pin[:, i:i + VERTEX_CHUNK])
        for i in range(0, len(mesh.vertices), VERTEX_CHUNK)])
    if len(pins):
        phi_q, phi_v = _hold_pins(mesh.vertices, pins, queries, phi_q, phi_v, scale)
    # in its own axes: their order turns too
    anchors = _spread(mesh.vertices[pins] @ axes, ANCHOR_POINTS) @ axes.T
    queries = np.vstack([queries, anchors])
    phi_q = torch.cat([phi_q, phi_q.new_zeros(len(anchors), *phi_q.shape[1:])])
    closed = meshlib.is_closed(mesh)
    areas = meshlib.face_areas(mesh)
    centroid = (mesh.vertices[mesh.faces].mean(1) * areas[:, None]).sum(0) / areas.sum()
    return Encoding(vertices=mesh.vertices, axes=axes, scale=scale, queries=queries,
                    centroid=centroid, phi_q=phi_q, phi_v=phi_v,
                    code=code.double(), springs=_spring_graph(queries / scale, rng, closed),
                    pinned=bool(len(pins)), closed=closed, area=meshlib.total_area(mesh),
                    volume=meshlib.enclosed_volume(mesh) if closed else 0.0, faces=mesh.faces,
                    pins=pins, anchors=len(anchors))


def _spread(points: np.ndarray, count: int) -> np.ndarray:
    """Up to ``count`` distinct points among ``points``, spread over them (farthest-point
    sampling)."""
    # to a nanometre: coordinates that differ by round-off alone must sort alike, or the spread
    # depends on it
    points = np.unique(np.round(points, 9), axis=0)
    if len(points) <= count:
        return points
    chosen = [0]
    distance = np.linalg.norm(points - points[0], axis=1)
    for _ in range(count - 1):
        chosen.append(int(distance.argmax()))
        distance = np.minimum(distance, np.linalg.norm(points - points[chosen[-1]], axis=1))
    return points[chosen]


def _hold_pins(vertices, pins, queries, phi_q, phi_v, scale):
    """Make every basis field vanish at pinned vertices, fading the correction out within
    PIN_RADIUS.

    phi'(x) = phi(x) - alpha(x) phi(p(x)), with p(x) the nearest pinned vertex and
    alpha(x) = exp(-(|x-p|/r)^2): alpha = 1 at a pinned vertex, so its displacement is exactly zero
    for every latent.
    """
    pinned_pos = torch.as_tensor(vertices[pins])
    pinned_phi = phi_v[pins].clone()
    r = PIN_RADIUS * scale

    def correct(points, phi):
        out = []
        for i in range(0, len(points), VERTEX_CHUNK):
            d, j = torch.cdist(torch.as_tensor(points[i:i + VERTEX_CHUNK]), pinned_pos).min(dim=1)
            alpha = torch.exp(-(d / r) ** 2).to(phi.dtype)
            out.append(phi[i:i + VERTEX_CHUNK] - alpha[:, None, None] * pinned_phi[j].to(phi.dtype))
        return torch.cat(out)

    return correct(queries, phi_q), correct(vertices, phi_v)


def _spring_graph(points: np.ndarray, rng: np.random.Generator,
                  solid: bool) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges: each point to its NEIGHBOURS nearest (SHEET_NEIGHBOURS on open surfaces)
    and, for solids, a few longer ones so they resist bending through their interior rather than
    acting as hollow shells. Open surfaces get no long springs: a chord across a sheet shortens when
    the sheet bends, which would make cloth stiff as a board."""
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    count = NEIGHBOURS if solid else SHEET_NEIGHBOURS
    near = np.argsort(d, axis=1)[:, :count]
    i = np.repeat(np.arange(len(points)), count)
    j = near.reshape(-1)
    far_i, far_j = [], []
    for a in range(len(points) if solid else 0):
        band = np.nonzero((d[a] > 0.1) & (d[a] < 0.4))[0]
        if len(band):
            far_j.append(rng.choice(band, size=min(3, len(band)), replace=False))
            far_i.append(np.full(len(far_j[-1]), a))
    if far_i:
        i, j = np.concatenate([i, *far_i]), np.concatenate([j, *far_j])
    edges = np.unique(np.sort(np.stack([i, j], 1), axis=1), axis=0)
    # a pinned vertex may coincide with a sample: no direction
    edges = edges[d[edges[:, 0], edges[:, 1]] > 0]
    return edges[:, 0], edges[:, 1]

