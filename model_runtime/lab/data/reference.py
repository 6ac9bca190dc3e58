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
from ...lattice import embed_solid, lattice_cell
from ...mesh import Mesh, enclosed_volume, is_closed, validate
from ...params import SimParams
from ...winding import enclosed_by_winding
from . import newton_engine
from .elements import mean_edge_length, signed_tet_volumes
from .implicit_fem import simulate_solid
from .mujoco_engine import simulate_cloth
from .newton_engine import simulate_body

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
