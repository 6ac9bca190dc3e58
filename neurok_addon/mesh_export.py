"""What Simulate sends: the object's evaluated mesh, its triangles and its pinned vertices (motion.py places them in
the simulated space)."""

import contextlib
from dataclasses import dataclass, field

import bpy
import numpy as np

from .shape_keys import neurok_key_blocks

CACHE_MODIFIER = "NeuROK Cache"  # the Mesh Cache modifier Bake adds; never part of the rest shape


class InputError(Exception):
    """The object or its settings cannot be simulated as they are; the message says what to change."""


@dataclass
class ExportedMesh:
    local: np.ndarray  # (V, 3) float64, evaluated rest positions in object space
    faces: np.ndarray  # (F, 3) int32 triangles
    pins: np.ndarray  # (P,) int32 vertex indices
    matrix_world: np.ndarray  # (4, 4)
    above_cage: list[str] = field(default_factory=list)  # visible modifiers left out (they change the vertex count)


@contextlib.contextmanager
def _hidden(items, attribute: str):
    """Set ``attribute`` to True (mute) or False (show_viewport) on ``items`` for the block, then restore it."""
    value = attribute == "mute"
    changed = [item for item in items if getattr(item, attribute) != value]
    for item in changed:
        setattr(item, attribute, value)
    try:
        yield
    finally:
        for item in changed:
            setattr(item, attribute, not value)


def evaluate(obj: bpy.types.Object, context: bpy.types.Context, hidden_modifiers) -> tuple[np.ndarray, np.ndarray]:
    with _hidden(hidden_modifiers, "show_viewport"):
        obj_eval = obj.evaluated_get(context.evaluated_depsgraph_get())
        mesh = obj_eval.to_mesh()
        try:
            return _geometry(mesh)
        finally:
            obj_eval.to_mesh_clear()


def export(obj: bpy.types.Object, context: bpy.types.Context, pin_group: str) -> ExportedMesh:
    """Evaluate ``obj`` as the viewport shows it, without any previous NeuROK result mixed in.

    Like Blender's Cloth, a stack with modifiers that change the vertex count (Subdivision...) is simulated on its
    cage: the mesh before the first such modifier, which is what the shape keys deform.
    """
    # Previous NeuROK keys and cache are hidden only while the rest shape is evaluated: it must not include the old
    # motion, and the scene must stay untouched if the new simulation is cancelled.
    cache = [m for m in obj.modifiers if m.name == CACHE_MODIFIER]
    visible = [m for m in obj.modifiers if m.show_viewport and m.name != CACHE_MODIFIER]
    count = len(obj.data.vertices)
    with _hidden(neurok_key_blocks(obj), "mute"):
        local, faces = evaluate(obj, context, cache)
        cut = len(visible)
        while len(local) != count and cut > 0:  # hide modifiers from the top until the count is the cage's
            cut -= 1
            local, faces = evaluate(obj, context, cache + visible[cut:])
    if len(faces) == 0:
        raise InputError("the mesh has no faces to simulate")
    matrix = np.array(obj.matrix_world, dtype=np.float64)
    singular = np.linalg.svd(matrix[:3, :3], compute_uv=False) if np.isfinite(matrix).all() else np.zeros(3)
    if singular[-1] <= 1e-9 * singular[0]:  # relative: a uniformly tiny scale is fine
        raise InputError(f"{obj.name} has a zero (or non-finite) scale: its animation could not be mapped back to "
                         "the object; set every scale axis to a non-zero value")
    above_cage = [m.name for m in visible[cut:]]
    return ExportedMesh(local, faces, pinned_vertices(obj, pin_group), matrix, above_cage)


def _geometry(mesh: bpy.types.Mesh) -> tuple[np.ndarray, np.ndarray]:
    co = np.empty(len(mesh.vertices) * 3, np.float32)
    mesh.vertices.foreach_get("co", co)
    mesh.calc_loop_triangles()
    tris = np.empty(len(mesh.loop_triangles) * 3, np.int32)
    mesh.loop_triangles.foreach_get("vertices", tris)
    return co.reshape(-1, 3).astype(np.float64), tris.reshape(-1, 3)


def pinned_vertices(obj: bpy.types.Object, group_name: str) -> np.ndarray:
    """Indices of the vertices whose weight in ``group_name`` is above 0.5 (none when no group is set)."""
    if not group_name:
        return np.zeros(0, np.int32)
    group = obj.vertex_groups.get(group_name)
    if group is None:
        raise InputError(f"the pin group {group_name!r} does not exist on {obj.name!r}")
    index = group.index
    return np.array([v.index for v in obj.data.vertices for g in v.groups if g.group == index and g.weight > 0.5],
                    np.int32)


def non_uniform_scale(obj: bpy.types.Object) -> tuple[float, float, float] | None:
    """The world scale when it differs between axes by more than 0.1 %, else None."""
    scale = tuple(abs(s) for s in obj.matrix_world.to_scale())
    return scale if max(scale) - min(scale) > 1e-3 * max(scale) else None
