"""Operators: Simulate (modal with progress and Esc in the UI, synchronous in background mode), Clear, Bake, and
the small helpers the panel offers (Earth gravity, stiffness steps)."""

import os

import bpy
import numpy as np

from ..model_runtime import mesh as meshlib
from ..model_runtime import protocol
from ..model_runtime.errors import MeshError
from ..model_runtime.params import STANDARD_GRAVITY
from . import client, mesh_export, motion, pc2, scene_forces, shape_keys
from .preferences import worker_python, worker_timeout
from .properties import BLEND_RELATIVE

# What a Simulate can fail with: its input, or the runtime. Both carry a message for the artist.
FAILURES = (mesh_export.InputError, client.WorkerError)
TIMER_INTERVAL = 0.1  # s between polls of the worker's messages: responsive, yet negligible UI load


def not_editable_reason(context: bpy.types.Context) -> str:
    """Why NeuROK cannot write to the active object (shown by the panel and the operators' polls), or ''."""
    obj = context.active_object
    return "Select a mesh object to simulate" if obj is None else not_editable_reason_for(obj)


def not_editable_reason_for(obj: bpy.types.Object) -> str:
    if obj.type != "MESH":
        return f"{obj.name} is a {obj.type.replace('_', ' ').lower()}: NeuROK simulates mesh objects"
    if obj.mode != "OBJECT":
        return "Switch to Object Mode to simulate"
    if obj.library or obj.data.library or obj.override_library or obj.data.override_library:
        return f"{obj.name} is linked from a library: make it local to simulate it"
    return ""


def editable_mesh(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object when NeuROK may write to it: a local (not linked) mesh in Object Mode."""
    return None if not_editable_reason(context) else context.active_object


def _poll_editable(cls, context) -> bool:
    if reason := not_editable_reason(context):
        cls.poll_message_set(reason)
        return False
    return True


def _vector(values) -> str:
    return "(" + ", ".join(f"{v:.3g}" for v in values) + ")"


class SimulationRun:
    """One Simulate request: export, send to the worker, then (on the main thread) write the result.

    Nothing touches the scene until :meth:`finish`, so failing or cancelling leaves it exactly as it was.
    """

    def __init__(self, context: bpy.types.Context, obj: bpy.types.Object):
        settings, scene = obj.neurok, context.scene
        self.object_name = obj.name
        self.frame_start, frame_end = settings.frame_range(scene)
        if frame_end <= self.frame_start:
            raise mesh_export.InputError(f"the frame range {self.frame_start}-{frame_end} is empty: end must be "
                                         "after start")
        self.warnings: list[str] = []
        self.notes: list[str] = []  # reported as INFO: what was done that the artist might not expect
        try:  # before the export: evaluating, copying and sending a mesh past the limit is slow and only refused
            meshlib.check_vertex_count(len(obj.data.vertices))
        except MeshError as exc:
            raise mesh_export.InputError(str(exc)) from exc
        frames, count = frame_end - self.frame_start, len(obj.data.vertices)  # the cage's count: what is simulated
        if protocol.positions_nbytes(frames, count) > protocol.MAX_PAYLOAD_BYTES:  # refused before frames are sampled
            raise mesh_export.InputError(f"{frames} frames of {count:,} vertices exceed what one simulation can "
                                         "return; simulate fewer frames or a lighter proxy mesh")
        # Everything the run depends on is read at the start frame: the rest shape (modifiers applied), where the
        # object is, and the wind and colliders around it.
        self.unit = scene.unit_settings.scale_length
        with motion.at_frame(scene, self.frame_start):
            self.mesh = mesh_export.export(obj, context, settings.pin_group)
            matrices = (motion.sample_matrices(obj, scene, self.frame_start, frames) if motion.may_move(obj)
                        else self.mesh.matrix_world[None])
            self.space = motion.simulation_space(matrices, self.unit)
            wind, wind_names = scene_forces.wind(scene, context.view_layer)
            colliders = scene_forces.colliders(context, self.space, obj)
        self._scene_notes(obj, settings, wind_names, colliders)
        if (scale := mesh_export.non_uniform_scale(obj)) is not None:
            self.warnings.append(f"{obj.name} has unapplied non-uniform scale ({scale[0]:.3g}, {scale[1]:.3g}, "
                                 f"{scale[2]:.3g}): the simulation uses world-space sizes; apply the scale "
                                 "(Ctrl+A) so the animation stays right when the object is transformed")
        if self.mesh.above_cage:
            self.notes.append(f"simulated the cage of {obj.name} (its mesh before {', '.join(self.mesh.above_cage)}, "
                              "which change the vertex count and apply on top of the result)")
        if any(m.show_viewport and m.name != mesh_export.CACHE_MODIFIER and m.name not in self.mesh.above_cage
               for m in obj.modifiers):
            self.warnings.append(f"{obj.name}'s deforming modifiers stay active above the NeuROK shape keys and "
                                 "deform the simulated shape again")
        if settings.pin_group and len(self.mesh.pins) == 0:
            self.warnings.append(f"{obj.name}'s pin group {settings.pin_group!r} has no vertex with a weight above "
                                 "0.5: nothing is pinned")
        # Scene units -> metres: the model works in SI units. Gravity too, as Blender's Cloth reads it (measured:
        # the same drop in scene units at unit scale 1 and 0.01), but never silently. Gravity stays in world axes:
        # for an animated object the runtime turns it with the object's frame.
        self.gravity = settings.effective_gravity(scene)
        source = "the scene" if settings.use_scene_gravity else "its custom vector"
        self.notes.append(f"gravity {_vector(self.gravity)} m/s^2 from {source}")
        if not settings.use_scene_gravity:
            scene_gravity = tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)
            if tuple(settings.gravity) != scene_gravity:
                self.warnings.append(f"{obj.name} uses its custom gravity {_vector(self.gravity)} m/s^2, not the "
                                     f"scene's {_vector(g * self.unit for g in scene_gravity)} m/s^2")
        if problem := settings.gravity_problem(scene):
            self.warnings.append(f"{problem}; Set Earth Gravity in NeuROK > Forces fixes it")
        turn = self.space.from_world[:3, :3] / self.unit  # world axes -> the simulated space's (a rotation)
        params = dict(
            frames=frames, fps=scene.render.fps / scene.render.fps_base,
            gravity=list(self.gravity), drag=settings.drag, material=settings.material,
            stiffness=settings.stiffness, density=settings.density, damping=settings.damping,
            initial_velocity=self.space.vector(settings.initial_velocity).tolist(),
            angular_velocity=(turn @ np.array(settings.angular_velocity)).tolist(),
            ground=settings.ground_height * self.unit if settings.use_ground else None,
            wind=wind, colliders=[c.spec for c in colliders])
        vertices = self.mesh.local @ self.space.from_local[:3, :3].T + self.space.from_local[:3, 3]
        self.client = client.get_client(worker_python(context), worker_timeout(context))
        self.job = self.client.submit(vertices.astype(np.float32), self.mesh.faces, self.mesh.pins, params,
                                      self.space.frame_motion)
        self.frames = frames

    def _scene_notes(self, obj, settings, wind_names: list[str], colliders) -> None:
        """Say which scene objects act on the body, and refuse what the runtime cannot do with a moving one."""
        if wind_names:
            self.notes.append(f"wind from {', '.join(wind_names)}")
        if colliders:
            self.notes.append("colliders " + ", ".join(f"{c.name} ({c.shape})" for c in colliders))
        if self.space.frame_motion is None:
            return
        self.notes.append(f"{obj.name} moves: simulated in its animated frame, pins follow the animation")
        if settings.use_ground or colliders:
            what = ", ".join((["the ground"] if settings.use_ground else []) + [c.name for c in colliders])
            raise mesh_export.InputError(
                f"{obj.name}'s transform is animated, and NeuROK cannot yet combine a moving object with the ground "
                f"or colliders ({what}): turn off Ground, disable the Collision of those objects, or remove the "
                "object's animation")
        if self.space.scale_animated:
            self.warnings.append(f"{obj.name}'s scale is animated: the simulation uses its scale at the start frame, "
                                 "and the animated scale applies on top of the result")

    def poll(self) -> np.ndarray | None:
        return self.client.poll(self.job)

    def wait(self, progress=None) -> np.ndarray:
        return self.client.wait(self.job, progress)

    def cancel(self) -> None:
        self.client.cancel(self.job)

    def finish(self, positions: np.ndarray) -> bpy.types.Object:
        """Convert the simulated result to object space and write it as the object's NeuROK animation."""
        obj = bpy.data.objects.get(self.object_name)
        if obj is None or len(obj.data.vertices) != len(self.mesh.local):
            raise mesh_export.InputError(f"{self.object_name} was deleted or edited while it was being simulated")
        expected = (self.frames + 1, len(self.mesh.local), 3)
        if positions.shape != expected or not np.isfinite(positions).all():
            raise client.WorkerError(f"the runtime returned invalid positions {positions.shape} (expected "
                                     f"{expected}); nothing was written")
        shape_keys.write_animation(obj, self.space.to_local(positions), self.mesh.local, self.frame_start)
        cache = obj.modifiers.get(mesh_export.CACHE_MODIFIER)
        if cache is not None and (cache.show_viewport or cache.show_render):
            # An enabled cache would overwrite the new keys; disabled (not removed), the old bake stays reachable.
            cache.show_viewport = cache.show_render = False
            self.notes.append(f"disabled {obj.name}'s {cache.name} modifier (the previous bake) so that the new "
                              "motion plays; Bake again to update it")
        return obj


def _set_job_state(context, run: SimulationRun | None, fraction: float = 0.0, text: str = "") -> None:
    state = context.window_manager.neurok_job
    state.running = run is not None
    state.object_name = run.object_name if run else ""
    state.progress = fraction
    state.message = text
    if context.workspace is not None:
        context.workspace.status_text_set(text or None)
    for area in context.screen.areas if context.screen else ():
        if area.type == "VIEW_3D":
            area.tag_redraw()


def simulation_targets(context: bpy.types.Context) -> list[bpy.types.Object]:
    """The active mesh, then the other selected meshes by name: Simulate runs them one after another."""
    active = editable_mesh(context)
    if active is None:
        return []
    return [active] + sorted((o for o in context.selected_objects if o != active and o.type == "MESH"),
                             key=lambda o: o.name)


class NEUROK_OT_simulate(bpy.types.Operator):
    """Simulate the active mesh and the other selected meshes with NeuROK, one after another, and store the motion
    as shape keys (Esc cancels)"""

    bl_idname = "neurok.simulate"
    bl_label = "Simulate"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if context.window_manager.neurok_job.running:
            cls.poll_message_set("A NeuROK simulation is already running")
            return False
        return _poll_editable(cls, context)

    def _queue(self, context) -> None:
        self._names = [o.name for o in simulation_targets(context)]
        self._total, self._done, self._simulated = len(self._names), 0, 0
        if self._total > 1:
            self.report({"INFO"}, f"NeuROK: simulating {self._total} selected meshes one after another: "
                                  f"{', '.join(self._names)}")

    def _start_next(self, context) -> SimulationRun | None:
        """Start the next object's run; objects that cannot be simulated are reported and skipped."""
        while self._names:
            obj = bpy.data.objects.get(self._names.pop(0))
            self._done = self._total - len(self._names) - 1
            reason = "" if obj is None else not_editable_reason_for(obj)
            if reason:
                self.report({"WARNING"}, f"{obj.name if obj else 'a selected object'} skipped: {reason}")
                continue
            try:
                run = SimulationRun(context, obj)
            except FAILURES as exc:
                self.report({"ERROR"}, f"{obj.name}: {exc}")
                continue
            for warning in run.warnings:
                self.report({"WARNING"}, warning)
            return run
        return None

    def _fraction(self, job_fraction: float) -> float:
        return (self._done + job_fraction) / self._total

    def _finish(self, run: SimulationRun, positions: np.ndarray) -> None:
        try:
            obj = run.finish(positions)
        except FAILURES as exc:
            self.report({"ERROR"}, str(exc))
            return
        self._simulated += 1
        self.report({"INFO"}, f"NeuROK: simulated {run.frames} frames of {obj.name}; " + "; ".join(run.notes))

    def _result(self) -> set[str]:
        return {"FINISHED"} if self._simulated else {"CANCELLED"}

    def execute(self, context):
        """Synchronous path (background mode, scripts): same worker, blocking until each result is in."""
        self._queue(context)
        wm = context.window_manager
        wm.progress_begin(0.0, 1.0)
        try:
            while (run := self._start_next(context)) is not None:
                try:
                    positions = run.wait(lambda fraction, _message: wm.progress_update(self._fraction(fraction)))
                except client.WorkerError as exc:
                    self.report({"ERROR"}, f"{run.object_name}: {exc}")
                    continue
                self._finish(run, positions)
        finally:
            wm.progress_end()
        return self._result()

    def invoke(self, context, event):
        if bpy.app.background:  # no event loop: a modal operator would never be called back
            return self.execute(context)
        self._queue(context)
        self._run = self._start_next(context)
        if self._run is None:
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(TIMER_INTERVAL, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0.0, 1.0)
        self._show(context)
        return {"RUNNING_MODAL"}

    def _show(self, context) -> None:
        job, count = self._run.job, f"{self._done + 1}/{self._total} " if self._total > 1 else ""
        fraction = self._fraction(job.fraction)
        context.window_manager.progress_update(fraction)
        _set_job_state(context, self._run, fraction,
                       f"NeuROK: {count}{self._run.object_name} {100 * job.fraction:.0f}% {job.message} "
                       "(Esc to cancel)")

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            self._run.cancel()
            self._end(context)
            left = f"{self._run.object_name} and the rest" if self._names else self._run.object_name
            self.report({"INFO"}, f"NeuROK simulation cancelled; {left} unchanged")
            return self._result()
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            positions = self._run.poll()
        except client.WorkerError as exc:
            self.report({"ERROR"}, f"{self._run.object_name}: {exc}")
        else:
            if positions is None:
                self._show(context)
                return {"PASS_THROUGH"}
            self._finish(self._run, positions)
        self._run = self._start_next(context)
        if self._run is None:
            self._end(context)
            return self._result()
        self._show(context)
        return {"PASS_THROUGH"}

    def _end(self, context) -> None:
        context.window_manager.event_timer_remove(self._timer)
        context.window_manager.progress_end()
        _set_job_state(context, None)


def default_cache_path(scene: bpy.types.Scene, obj: bpy.types.Object) -> str:
    """A point cache file of the object's own, in the scene's cache folder, named after .blend, scene and object."""
    blend = bpy.path.display_name_from_filepath(bpy.data.filepath) or "untitled"
    name = bpy.path.clean_name(f"{blend}_{scene.name}_{obj.name}") + ".pc2"
    return os.path.join(scene.neurok.cache_dir or "//", name)


def _file_key(path: str, library=None) -> str:
    return os.path.normcase(os.path.realpath(bpy.path.abspath(path, library=library)))


def cache_readers(path: str) -> list[bpy.types.Object]:
    """The objects whose Mesh Cache modifiers (NeuROK's or not) read ``path``."""
    key = _file_key(path)
    return [o for o in bpy.data.objects
            if any(m.type == "MESH_CACHE" and m.filepath and _file_key(m.filepath, o.library) == key
                   for m in o.modifiers)]


def _remove_cache(obj: bpy.types.Object) -> str:
    """Remove the object's NeuROK Cache modifier, and the file when NeuROK wrote it and nothing else reads it."""
    mod = obj.modifiers.get(mesh_export.CACHE_MODIFIER)
    if mod is None:
        return ""
    written, filepath = obj.neurok.cache_file, mod.filepath
    obj.modifiers.remove(mod)
    obj.neurok.cache_file = ""
    removed = f"the {mesh_export.CACHE_MODIFIER} modifier"
    if written and filepath and _file_key(written) == _file_key(filepath) and not cache_readers(filepath):
        path = bpy.path.abspath(filepath)
        try:
            os.remove(path)
            removed += f" and its file {path}"
        except FileNotFoundError:
            pass
        except OSError as exc:
            removed += f" (its file {path} could not be deleted: {exc})"
    return removed


class NEUROK_OT_clear(bpy.types.Operator):
    """Remove the NeuROK shape keys and their keyframes, and NeuROK's baked cache with the file it wrote (undo brings
    back the modifier, not the deleted file); your own shape keys stay"""

    bl_idname = "neurok.clear"
    bl_label = "Clear"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _poll_editable(cls, context)

    def execute(self, context):
        obj = editable_mesh(context)
        removed = shape_keys.remove_animation(obj)
        done = [f"{removed} NeuROK shape keys"] if removed else []
        if cache := _remove_cache(obj):
            done.append(cache)
        self.report({"INFO"}, f"Removed {' and '.join(done)} from {obj.name}" if done
                    else f"{obj.name} has no NeuROK animation")
        return {"FINISHED"}


PLAYBACK_CHECKS = 10  # frames compared between the written cache and the keys: first, last and evenly between


def _move_first(obj: bpy.types.Object, name: str) -> None:
    index = obj.modifiers.find(name)
    if index <= 0:
        return
    if hasattr(obj.modifiers, "move"):  # Blender 4.3+
        obj.modifiers.move(index, 0)
    else:
        with bpy.context.temp_override(object=obj):
            bpy.ops.object.modifier_move_to_index(modifier=name, index=0)


def _playback_error(context, obj: bpy.types.Object, positions: np.ndarray, first_frame: int) -> float:
    """Largest distance between the NeuROK Cache's output (the other modifiers hidden) and ``positions``."""
    scene = context.scene
    frame, subframe = scene.frame_current, scene.frame_subframe
    others = [m for m in obj.modifiers if m.name != mesh_export.CACHE_MODIFIER]
    samples = np.unique(np.linspace(0, len(positions) - 1, min(len(positions), PLAYBACK_CHECKS)).round())
    worst = 0.0
    try:
        for k in samples.astype(int):
            scene.frame_set(first_frame + int(k))
            played, _ = mesh_export.evaluate(obj, context, others)
            if played.shape != positions[k].shape:
                return float("inf")
            worst = max(worst, float(np.abs(played - positions[k]).max()))
    finally:
        scene.frame_set(frame, subframe=subframe)
    return worst


class NEUROK_OT_bake(bpy.types.Operator):
    """Write the NeuROK animation to a PC2 point cache played by a Mesh Cache modifier (fast playback)"""

    bl_idname = "neurok.bake"
    bl_label = "Bake to Mesh Cache"
    bl_options = {"REGISTER", "UNDO"}

    filepath: bpy.props.StringProperty(
        name="File", subtype="FILE_PATH", default="", options={"SKIP_SAVE"} | BLEND_RELATIVE,
        description="PC2 file to write; empty: a file of the object's own in the scene's NeuROK cache folder "
                    "(// is the folder of the saved .blend)")
    remove_shape_keys: bpy.props.BoolProperty(
        name="Remove Shape Keys", default=True,
        description="Remove the NeuROK shape keys once the cache is checked to play the same animation")

    @classmethod
    def poll(cls, context):
        if not _poll_editable(cls, context):
            return False
        if not shape_keys.neurok_key_blocks(context.active_object):
            cls.poll_message_set("Simulate first: the object has no NeuROK animation")
            return False
        return True

    def invoke(self, context, event):
        if not self.filepath:
            self.filepath = default_cache_path(context.scene, context.active_object)
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        obj = editable_mesh(context)
        filepath = self.filepath or default_cache_path(context.scene, obj)
        if filepath.startswith("//") and not bpy.data.filepath:
            self.report({"ERROR"}, "Save the .blend file first or choose an absolute path for the cache")
            return {"CANCELLED"}
        path = bpy.path.abspath(filepath)
        others = sorted({o.name for o in cache_readers(filepath) if o != obj})
        if others:
            self.report({"ERROR"}, f"{path} is the point cache that {', '.join(others)} plays: choose another file "
                                   "(or Clear that object's bake first); nothing was written")
            return {"CANCELLED"}
        positions, first_frame = shape_keys.read_positions(obj)
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            pc2.write_pc2(path, positions, start=first_frame)
        except OSError as exc:
            self.report({"ERROR"}, f"Could not write {path}: {exc}")
            return {"CANCELLED"}
        name = mesh_export.CACHE_MODIFIER
        mod = obj.modifiers.get(name) or obj.modifiers.new(name, "MESH_CACHE")
        mod.cache_format, mod.filepath, mod.frame_start = "PC2", filepath, first_frame
        mod.show_viewport = mod.show_render = True
        # First in the stack, where the shape keys act: before any modifier that changes the vertex count.
        _move_first(obj, name)
        obj.neurok.cache_file = filepath
        error = _playback_error(context, obj, positions, first_frame)
        if not error <= 1e-5 * max(1.0, float(np.abs(positions).max())):
            _remove_cache(obj)
            self.report({"ERROR"}, f"The Mesh Cache did not play back {obj.name}'s NeuROK keys (off by {error:.3g}); "
                                   "it was removed and the shape keys kept")
            return {"CANCELLED"}
        if self.remove_shape_keys:
            shape_keys.remove_animation(obj)
        kept = "" if self.remove_shape_keys else "; the shape keys are kept (muted by the cache, which overwrites them)"
        self.report({"INFO"}, f"Baked {len(positions)} frames of {obj.name} to {path}, checked to play back "
                              f"the keys{kept}")
        return {"FINISHED"}


class NEUROK_OT_earth_gravity(bpy.types.Operator):
    """Set the gravity NeuROK uses (the scene's, or the object's custom vector) to Earth's 9.81 m/s^2 in the scene's
    units, keeping its direction"""

    bl_idname = "neurok.earth_gravity"
    bl_label = "Set Earth Gravity"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return context.active_object is not None and context.active_object.type == "MESH"

    def execute(self, context):
        scene, obj = context.scene, context.active_object
        settings, unit = obj.neurok, scene.unit_settings.scale_length
        used = np.array(settings.gravity_used(scene), np.float64)
        norm = np.linalg.norm(used)
        value = (used / norm if norm > 0 else np.array([0.0, 0.0, -1.0])) * STANDARD_GRAVITY / unit
        if settings.use_scene_gravity:
            scene.gravity, scene.use_gravity = value, True
            where = "The scene's gravity (Cloth and Blender's other simulations use it too)"
        else:
            settings.gravity = value
            where = f"{obj.name}'s custom gravity"
        self.report({"INFO"}, f"{where} is now {_vector(value)} scene units/s^2: {STANDARD_GRAVITY} m/s^2 at unit "
                              f"scale {unit:g}")
        return {"FINISHED"}


class NEUROK_OT_scale_stiffness(bpy.types.Operator):
    """Multiply the stiffness: steps that feel the same for jelly (kPa) and wood (GPa)"""

    bl_idname = "neurok.scale_stiffness"
    bl_label = "Scale Stiffness"
    bl_options = {"REGISTER", "UNDO"}

    factor: bpy.props.FloatProperty(name="Factor", default=2.0, min=0.01, max=100.0)

    @classmethod
    def poll(cls, context):
        return _poll_editable(cls, context)

    @classmethod
    def description(cls, context, properties):
        return f"Multiply the stiffness by {properties.factor:g}"

    def execute(self, context):
        settings = editable_mesh(context).neurok
        settings.stiffness *= self.factor
        return {"FINISHED"}


register, unregister = bpy.utils.register_classes_factory(
    (NEUROK_OT_simulate, NEUROK_OT_clear, NEUROK_OT_bake, NEUROK_OT_earth_gravity, NEUROK_OT_scale_stiffness))
