"""The NeuROK animation as shape keys: one key per frame, named ``NeuROK_<frame>``, switched by value keyframes.

Every frame of the simulated range, rest frame included, has its own key, so on each frame exactly one NeuROK key
is at 1.0 (CONSTANT interpolation; before the range the rest key holds, after it the last frame holds). A key stores
basis + (simulated - evaluated rest), so shape keys the artist already had active keep adding their own offset
instead of being counted twice. Only keys with the prefix and their F-Curves are ever replaced or removed.

F-Curves live in a Blender 5.0 layered action's channelbag (created with ``fcurve_ensure_for_datablock``) or, on
Blender 4.2, in the legacy ``Action.fcurves``.
"""

import contextlib

import bpy
import numpy as np

PREFIX = "NeuROK_"
_CREATED_BASIS = "neurok_created_basis"  # Key custom property: NeuROK added the Basis, so Clear may remove it
_CREATED_ACTION = "neurok_created"  # Action custom property: NeuROK created the action, so Clear may remove it
_CONSTANT = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["CONSTANT"].value


def key_name(frame: int) -> str:
    return f"{PREFIX}{frame:04d}"


def neurok_key_blocks(obj: bpy.types.Object) -> list[bpy.types.ShapeKey]:
    """The object's NeuROK shape keys in frame order."""
    key = obj.data.shape_keys
    if key is None:
        return []
    blocks = [kb for kb in key.key_blocks if kb.name.startswith(PREFIX) and kb.name[len(PREFIX):].lstrip("-").isdigit()]
    return sorted(blocks, key=key_frame)


def key_frame(kb: bpy.types.ShapeKey) -> int:
    return int(kb.name[len(PREFIX):])


def _is_neurok_path(data_path: str) -> bool:
    return data_path.startswith(f'key_blocks["{PREFIX}')


def _fcurves(key: bpy.types.Key):
    """The F-Curve collection animating ``key``, or None when it has no action."""
    anim = key.animation_data
    if anim is None or anim.action is None:
        return None
    if hasattr(anim, "action_slot"):  # Blender 4.4+: layered actions
        from bpy_extras.anim_utils import action_get_channelbag_for_slot

        bag = action_get_channelbag_for_slot(anim.action, anim.action_slot)
        return None if bag is None else bag.fcurves
    return anim.action.fcurves


def _new_fcurve(key: bpy.types.Key, data_path: str) -> bpy.types.FCurve:
    anim = key.animation_data or key.animation_data_create()
    if anim.action is None:
        anim.action = bpy.data.actions.new(f"{key.user.name}_NeuROK")
        anim.action[_CREATED_ACTION] = True
    if hasattr(anim.action, "fcurve_ensure_for_datablock"):
        return anim.action.fcurve_ensure_for_datablock(key, data_path)
    return anim.action.fcurves.new(data_path)


@contextlib.contextmanager
def _keeping_active_key(obj: bpy.types.Object):
    """Adding and removing keys moves the active shape key: give the artist's own one back afterwards."""
    active = obj.active_shape_key
    name = active.name if active is not None and not active.name.startswith(PREFIX) else None
    yield
    if name is not None and obj.data.shape_keys is not None:
        obj.active_shape_key_index = obj.data.shape_keys.key_blocks.find(name)


def remove_animation(obj: bpy.types.Object) -> int:
    """Remove the NeuROK keys and their F-Curves (and the Basis/action NeuROK created, once unused)."""
    with _keeping_active_key(obj):
        return _remove_animation(obj)


def _remove_animation(obj: bpy.types.Object) -> int:
    blocks = neurok_key_blocks(obj)
    key = obj.data.shape_keys
    if key is None:
        return 0
    fcurves = _fcurves(key)
    if fcurves is not None:
        for fc in [fc for fc in fcurves if _is_neurok_path(fc.data_path)]:
            fcurves.remove(fc)
        action = key.animation_data.action
        if action.get(_CREATED_ACTION) and len(fcurves) == 0:
            key.animation_data.action = None
            if action.users == 0:
                bpy.data.actions.remove(action)
    for kb in reversed(blocks):
        obj.shape_key_remove(kb)
    if key.get(_CREATED_BASIS) and len(key.key_blocks) == 1:
        obj.shape_key_clear()
    return len(blocks)


def write_animation(obj: bpy.types.Object, positions: np.ndarray, rest: np.ndarray, frame_start: int) -> None:
    """Replace the NeuROK animation with ``positions`` (N, V, 3) in object space; ``positions[0]`` shows at
    ``frame_start``. ``rest`` (V, 3) is the evaluated rest shape the simulation started from."""
    with _keeping_active_key(obj):
        _write_animation(obj, positions, rest, frame_start)


def _write_animation(obj: bpy.types.Object, positions: np.ndarray, rest: np.ndarray, frame_start: int) -> None:
    _remove_animation(obj)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
        obj.data.shape_keys[_CREATED_BASIS] = True
    key = obj.data.shape_keys
    basis = np.empty(len(obj.data.vertices) * 3, np.float32)
    key.reference_key.data.foreach_get("co", basis)
    offset = basis.reshape(-1, 3).astype(np.float64) - rest
    count = len(positions)
    for k in range(count):
        kb = obj.shape_key_add(name=key_name(frame_start + k), from_mix=False)
        kb.data.foreach_set("co", (positions[k] + offset).astype(np.float32).ravel())
        kb.value = 0.0
        _key_value_curve(key, kb.name, frame_start, k, count)


def _key_value_curve(key: bpy.types.Key, name: str, frame_start: int, k: int, count: int) -> None:
    """Value 1 on the key's own frame, 0 on its neighbours; CONSTANT interpolation holds values in between."""
    frame = frame_start + k
    points = ([(frame - 1, 0.0)] if k > 0 else []) + [(frame, 1.0)] + ([(frame + 1, 0.0)] if k < count - 1 else [])
    fc = _new_fcurve(key, f'key_blocks["{name}"].value')
    fc.keyframe_points.add(len(points))
    fc.keyframe_points.foreach_set("co", np.asarray(points, np.float32).ravel())
    fc.keyframe_points.foreach_set("interpolation", [_CONSTANT] * len(points))
    fc.update()


def read_positions(obj: bpy.types.Object) -> tuple[np.ndarray, int]:
    """The NeuROK keys' coordinates (N, V, 3) float32 in object space and the frame of the first one."""
    blocks = neurok_key_blocks(obj)
    out = np.empty((len(blocks), len(obj.data.vertices) * 3), np.float32)
    for row, kb in zip(out, blocks):
        kb.data.foreach_get("co", row)
    return out.reshape(len(blocks), -1, 3), key_frame(blocks[0])
