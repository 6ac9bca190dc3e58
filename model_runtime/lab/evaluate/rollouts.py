"""What a rollout runs on: a stored sequence's own parameters, or a loose mesh rescaled and pinned the same way
every time."""

import numpy as np

from ... import mesh as meshlib
from ...params import SimParams, make_params

PARAM_KEYS = ("frames", "fps", "gravity", "drag", "stiffness", "density", "damping", "poisson", "thickness",
              "material", "initial_velocity", "angular_velocity", "ground")
MESH_DIAGONAL = 0.75  # metres: --meshes inputs are rescaled to this bbox diagonal
PIN_FRACTION = 0.10


def sequence_params(seq: dict) -> SimParams:
    """SimParams of a stored sequence, from its parameter JSON (SI units) and pin mask."""
    raw = seq["params"]
    kw = {k: raw[k] for k in PARAM_KEYS if k in raw}
    kw["frames"] = len(seq["positions"]) - 1
    kw["fps"] = seq["fps"]
    return make_params(pins=np.nonzero(seq["pin_mask"])[0], num_vertices=len(seq["rest"]), **kw)


def normalize_mesh(mesh: meshlib.Mesh, diagonal: float = MESH_DIAGONAL) -> meshlib.Mesh:
    """Centre on the bbox centre (lowest point at z = 0) and scale to the given bbox diagonal."""
    v = mesh.vertices - (mesh.vertices.min(0) + mesh.vertices.max(0)) / 2
    v = v * (diagonal / meshlib.bbox_diagonal(v))
    v[:, 2] -= v[:, 2].min()
    return meshlib.Mesh(v, mesh.faces)


def default_pins(mesh: meshlib.Mesh, fraction: float = PIN_FRACTION) -> np.ndarray:
    """The lowest `fraction` of the vertices of every connected component (by z; by x for flat meshes lying in a
    horizontal plane). Per component, because a loose part (a teapot's lid, Suzanne's eyes) would otherwise fall
    away freely in the reference and dominate the error."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    v, f = mesh.vertices, mesh.faces
    axis = 2 if np.ptp(v[:, 2]) > 0.01 * meshlib.bbox_diagonal(v) else 0
    graph = coo_matrix((np.ones(f.size), (f.ravel(), np.roll(f, 1, axis=1).ravel())), shape=(len(v), len(v)))
    _, label = connected_components(graph, directed=False)
    pins = []
    for c in np.unique(label[np.unique(f)]):
        idx = np.nonzero(label == c)[0]
        pins.append(idx[np.argsort(v[idx, axis], kind="stable")[: max(1, int(round(fraction * len(idx))))]])
    return np.sort(np.concatenate(pins))
