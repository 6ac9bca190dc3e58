"""Speed against Blender's own simulators (headless bpy, the real extension installed): Cloth and Soft Body bakes
against NeuROK, cold, on a new mesh and re-simulated (section 1 of run.py)."""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import FPS, FRAMES, ROOT, log, median

ADDON_MODULE = "bl_ext.user_default.neurok"
PIN_GROUP = "pinned"


def install_extension(workdir: Path):
    """Build the extension zip with Blender's own tool and install it (BLENDER_USER_RESOURCES set by main)."""
    import bpy

    tool = Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    out = workdir / "extension"
    out.mkdir()
    subprocess.run([sys.executable, str(tool), "build", "--source-dir", str(ROOT), "--output-dir", str(out)],
                   check=True, capture_output=True)
    zip_path = next(out.glob("neurok-*.zip"))
    result = bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default",
                                                      enable_on_install=True)
    if result != {"FINISHED"}:
        raise RuntimeError(f"installing {zip_path} failed: {result}")


def fresh_scene():
    import addon_utils
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable(ADDON_MODULE, default_set=True)
    prefs = bpy.context.preferences.addons[ADDON_MODULE].preferences
    prefs.python_path = sys.executable
    prefs.timeout = max(prefs.timeout, 600)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 1 + FRAMES
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    return scene


def make_grid(subdivisions: int, z: float = 0.0):
    """A 1 m x 1 m horizontal grid of (subdivisions + 1)^2 vertices, its y = +0.5 edge in the pin group."""
    import bpy

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=subdivisions, y_subdivisions=subdivisions, size=1.0,
                                    location=(0.0, 0.0, z))
    obj = bpy.context.active_object
    ys = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", ys)
    ys = ys.reshape(-1, 3)[:, 1]
    group = obj.vertex_groups.new(name=PIN_GROUP)
    group.add(np.nonzero(ys > ys.max() - 1e-4)[0].tolist(), 1.0, "REPLACE")
    return obj


def make_icosphere(subdivisions: int, z: float = 0.0):
    """A 1 m diameter icosphere, the vertices in its lowest 10% of height in the pin group."""
    import bpy

    bpy.ops.mesh.primitive_ico_sphere_add(subdivisions=subdivisions, radius=0.5, location=(0.0, 0.0, z))
    obj = bpy.context.active_object
    co = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", co)
    zs = co.reshape(-1, 3)[:, 2]
    group = obj.vertex_groups.new(name=PIN_GROUP)
    group.add(np.nonzero(zs < zs.min() + 0.1 * (zs.max() - zs.min()))[0].tolist(), 1.0, "REPLACE")
    return obj


def remove(obj) -> None:
    import bpy

    mesh = obj.data
    bpy.data.objects.remove(obj)
    if mesh.users == 0:
        bpy.data.meshes.remove(mesh)


def pinned_indices(obj) -> np.ndarray:
    index = obj.vertex_groups[PIN_GROUP].index
    return np.array([v.index for v in obj.data.vertices for g in v.groups if g.group == index and g.weight > 0.5])


def evaluated_positions(obj, frame: int) -> np.ndarray:
    import bpy

    bpy.context.scene.frame_set(frame)
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    co = np.empty(len(ev.data.vertices) * 3, np.float32)
    ev.data.vertices.foreach_get("co", co)
    return co.reshape(-1, 3) @ np.asarray(obj.matrix_world)[:3, :3].T + np.asarray(obj.matrix_world)[:3, 3]


def motion_check(obj) -> dict:
    """What the last frame looks like: mean vertex displacement and the largest pinned-vertex displacement (m)."""
    rest = evaluated_positions(obj, 1)
    last = evaluated_positions(obj, 1 + FRAMES)
    d = np.linalg.norm(last - rest, axis=1)
    pins = pinned_indices(obj)
    return {"mean_displacement_m": float(d.mean()), "max_pin_displacement_m": float(d[pins].max()) if len(pins)
            else None, "lowest_z_m": float(last[:, 2].min() - rest[:, 2].min())}


def blender_bake(kind: str, obj) -> float:
    """Add Blender's Cloth or Soft Body with default settings (pins through the pin group) and time the bake."""
    import bpy

    if kind == "cloth":
        mod = obj.modifiers.new("Cloth", "CLOTH")
        mod.settings.vertex_group_mass = PIN_GROUP
    else:
        mod = obj.modifiers.new("Softbody", "SOFT_BODY")
        mod.settings.vertex_group_goal = PIN_GROUP
        # Blender 5.0 scales goal-group weights by the default goal (0.7): at 0.7 the "pinned" vertices fell with
        # the rest (measured), at 1.0 weight-1 vertices hold and weight-0 vertices are free.
        mod.settings.goal_default = 1.0
    cache = mod.point_cache
    cache.frame_start, cache.frame_end = 1, 1 + FRAMES
    scene = bpy.context.scene
    t = time.perf_counter()
    with bpy.context.temp_override(scene=scene, active_object=obj, object=obj, point_cache=cache):
        result = bpy.ops.ptcache.bake(bake=True)
    seconds = time.perf_counter() - t
    if result != {"FINISHED"} or not cache.is_baked:
        raise RuntimeError(f"the {kind} bake did not finish: {result}")
    return seconds


class NeurokTimer:
    """Runs the add-on's Simulate operator and measures, inside it, the time spent writing shape keys."""

    def __init__(self):
        import importlib

        self.client = importlib.import_module(ADDON_MODULE + ".neurok_addon.client")
        self.shape_keys = importlib.import_module(ADDON_MODULE + ".neurok_addon.shape_keys")
        self._write = self.shape_keys.write_animation
        self.write_seconds = 0.0

        def timed_write(*args, **kwargs):
            t = time.perf_counter()
            try:
                return self._write(*args, **kwargs)
            finally:
                self.write_seconds += time.perf_counter() - t

        self.shape_keys.write_animation = timed_write  # operators.py looks it up on the module at call time

    def stop_worker(self) -> None:
        self.client.shutdown()

    def simulate(self, obj) -> dict:
        import bpy

        for other in bpy.context.selected_objects:
            other.select_set(False)
        bpy.context.view_layer.objects.active = obj
        obj.select_set(True)
        self.write_seconds = 0.0
        t = time.perf_counter()
        result = bpy.ops.neurok.simulate()
        seconds = time.perf_counter() - t
        keys = len(self.shape_keys.neurok_key_blocks(obj))
        if result != {"FINISHED"} or keys != FRAMES + 1:
            raise RuntimeError(f"neurok.simulate returned {result} with {keys} NeuROK shape keys")
        return {"seconds": seconds, "shape_keys_seconds": self.write_seconds}


def neurok_object(kind: str, size: int, material: str, offset: float):
    obj = (make_grid if kind == "cloth" else make_icosphere)(size, z=offset)
    obj.neurok.pin_group = PIN_GROUP
    obj.neurok.material = material
    return obj


def speed(cfg: dict, workdir: Path) -> dict:
    import bpy

    install_extension(workdir)
    fresh_scene()
    neurok = NeurokTimer()
    cases = [("cloth", n, "cloth") for n in cfg["cloth"]] + [("softbody", n, "jelly") for n in cfg["soft"]]
    results = []
    moves = 0
    for kind, size, material in cases:
        make = make_grid if kind == "cloth" else make_icosphere
        probe = make(size)
        vertices = len(probe.data.vertices)
        remove(probe)
        row = {"kind": kind, "subdivisions": size, "vertices": vertices, "material": material, "blender": [],
               "cold": [], "new_mesh": [], "shape_keys": []}
        log(f"speed: {kind} {vertices:,} vertices, {cfg['repeats']} repeats")
        for r in range(cfg["repeats"]):
            obj = make(size)
            row["blender"].append(blender_bake(kind, obj))
            if r == 0:
                row["blender_check"] = motion_check(obj)
            remove(obj)
            log(f"  Blender {kind}: {row['blender'][-1]:.2f} s")

            neurok.stop_worker()
            moves += 1
            obj = neurok_object(kind, size, material, 1e-3 * moves)
            cold = neurok.simulate(obj)
            row["cold"].append(cold["seconds"])
            remove(obj)

            moves += 1
            obj = neurok_object(kind, size, material, 1e-3 * moves)
            new = neurok.simulate(obj)
            row["new_mesh"].append(new["seconds"])
            row["shape_keys"].append(new["shape_keys_seconds"])
            if r == 0:
                row["neurok_check"] = motion_check(obj)
            remove(obj)
            log(f"  NeuROK: cold {cold['seconds']:.2f} s, new mesh {new['seconds']:.2f} s "
                f"(shape keys {new['shape_keys_seconds']:.2f} s)")
        for key in ("blender", "cold", "new_mesh", "shape_keys"):
            row[f"{key}_median"] = median(row[key])
        row["speedup_new_mesh"] = row["blender_median"] / row["new_mesh_median"]
        row["speedup_cold"] = row["blender_median"] / row["cold_median"]
        results.append(row)

    # Warm re-simulate: same object and mesh, a running worker, one parameter changed each time.
    obj = neurok_object("cloth", cfg["warm_grid"], "cloth", 0.5)
    vertices = len(obj.data.vertices)
    first = neurok.simulate(obj)
    warm = []
    for r in range(cfg["warm_repeats"]):
        obj.neurok.drag = 0.05 * (r + 1)
        warm.append(neurok.simulate(obj))
        log(f"  warm re-simulate {vertices:,} vertices (drag {obj.neurok.drag:.2f}): {warm[-1]['seconds']:.2f} s")
    remove(obj)
    neurok.stop_worker()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return {"cases": results, "warm": {
        "vertices": vertices, "first_seconds": first["seconds"], "seconds": [w["seconds"] for w in warm],
        "shape_keys_seconds": [w["shape_keys_seconds"] for w in warm],
        "median": median([w["seconds"] for w in warm]),
        "shape_keys_median": median([w["shape_keys_seconds"] for w in warm])}}
