"""The ground-truth simulator: any triangle mesh + SimParams -> vertex positions over time, with Newton (VBD).

Geometry decides the physics: a closed (watertight, edge-manifold) mesh is a volumetric soft body, tetrahedralized
with TetGen without Steiner points on its surface (so the first V nodes are exactly the input vertices); anything
open or non-manifold is a shell (cloth) of ``params.thickness``. The dataset is made with this same function.
"""

from collections.abc import Callable

import numpy as np

from ..errors import MeshError
from ..mesh import Mesh, enclosed_volume, is_closed, validate
from ..params import SimParams
from .newton_engine import mean_edge_length, simulate_body

MAX_INTERIOR_FACTOR = 0.5  # interior nodes at most this fraction of surface vertices (keeps big meshes affordable)


def tetrahedralize(mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
    """Quality tets inside a closed surface: nodes (N, 3) whose first V rows are the surface vertices, tets (M, 4).

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
    a, b, c, d = (nodes[tets[:, k]] for k in range(4))
    signed = np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a))
    flip = signed < 0
    tets[flip] = tets[flip][:, [0, 2, 1, 3]]  # Newton expects positive orientation
    return nodes, tets


def simulate_reference(
    vertices,
    faces,
    params: SimParams,
    progress: Callable[[float, str], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
) -> np.ndarray:
    """Simulate the mesh; return float32 positions (params.frames + 1, V, 3) with frame 0 the input vertices."""
    mesh = validate(vertices, faces)
    pins = np.asarray(params.pins, np.int64)
    if pins.size and pins.max() >= len(mesh.vertices):
        raise MeshError(f"pin index {int(pins.max())} is out of range for a mesh of {len(mesh.vertices)} vertices")
    if progress is not None:
        progress(0.0, "building the physics model")
    tets = None
    nodes = mesh.vertices
    if is_closed(mesh):
        nodes, tets = tetrahedralize(mesh)
    positions = simulate_body(nodes, mesh.faces, params, tets=tets, progress=progress, should_cancel=should_cancel)
    positions = positions[:, : len(mesh.vertices)]
    positions[0] = mesh.vertices
    return positions
