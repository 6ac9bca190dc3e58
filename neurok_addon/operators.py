"""Operators: Simulate (modal with progress and Esc in the UI, synchronous in background mode), Clear and Bake."""

import os

import bpy
import numpy as np

from ..model_runtime import mesh as meshlib
from ..model_runtime import protocol
from ..model_runtime.errors import MeshError
from . import client, mesh_export, pc2, shape_keys
from .preferences import worker_python, worker_timeout

# What a Simulate can fail with: its input, or the runtime. Both carry a message for the artist.
FAILURES = (mesh_export.InputError, client.WorkerError)
TIMER_INTERVAL = 0.1  # s between polls of the worker's messages: responsive, yet negligible UI load


def editable_mesh(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object when NeuROK may write to it: a local (not linked) mesh in Object Mode."""
    obj = context.active_object
    if obj is None or obj.type != "MESH" or obj.mode != "OBJECT":
        return None
    if obj.library or obj.data.library or obj.override_library or obj.data.override_library:
        return None
    return obj


def _poll_editable(cls, context) -> bool:
    if editable_mesh(context) is None:
        cls.poll_message_set("Needs an editable (not linked) mesh object in Object Mode")
        return False
    return True


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
        try:  # before the export: evaluating, copying and sending a mesh past the limit is slow and only refused
            meshlib.check_vertex_count(len(obj.data.vertices))
        except MeshError as exc:
            raise mesh_export.InputError(str(exc)) from exc
        self.mesh = mesh_export.export(obj, context, settings.pin_group)
        if (scale := mesh_export.non_uniform_scale(obj)) is not None:
            self.warnings.append(f"{obj.name} has unapplied non-uniform scale ({scale[0]:.3g}, {scale[1]:.3g}, "
                                 f"{scale[2]:.3g}): the simulation uses world-space sizes; apply the scale "
                                 "(Ctrl+A) so the animation stays right when the object is transformed")
        if any(m.show_viewport for m in obj.modifiers):
            self.warnings.append(f"{obj.name}'s modifiers stay active above the NeuROK shape keys and deform the "
                                 "simulated shape again; bake to a Mesh Cache to play back the result exactly")
        frames, count = frame_end - self.frame_start, len(self.mesh.world)
        if protocol.positions_nbytes(frames, count) > protocol.MAX_PAYLOAD_BYTES:
            raise mesh_export.InputError(f"{frames} frames of {count:,} vertices exceed what one simulation can "
                                         "return; simulate fewer frames or a lighter proxy mesh")
        # Scene units -> metres: the model works in SI units.
        self.unit = scene.unit_settings.scale_length
        if settings.use_scene_gravity:
            gravity = scene.gravity if scene.use_gravity else (0.0, 0.0, 0.0)
        else:
            gravity = settings.gravity
        params = dict(
            frames=frames, fps=scene.render.fps / scene.render.fps_base,
            gravity=[g * self.unit for g in gravity], drag=settings.drag, material=settings.material,
            stiffness=settings.stiffness, density=settings.density, damping=settings.damping,
            initial_velocity=[v * self.unit for v in settings.initial_velocity],
            angular_velocity=list(settings.angular_velocity),
            ground=settings.ground_height * self.unit if settings.use_ground else None)
        self.client = client.get_client(worker_python(context), worker_timeout(context))
        self.job = self.client.submit((self.mesh.world * self.unit).astype(np.float32), self.mesh.faces,
                                      self.mesh.pins, params)
        self.frames = frames

    def poll(self) -> np.ndarray | None:
        return self.client.poll(self.job)

    def wait(self, progress=None) -> np.ndarray:
        return self.client.wait(self.job, progress)

    def cancel(self) -> None:
        self.client.cancel(self.job)

    def finish(self, positions: np.ndarray) -> bpy.types.Object:
        """Convert the world-space result to object space and write it as the object's NeuROK animation."""
        obj = bpy.data.objects.get(self.object_name)
        if obj is None or len(obj.data.vertices) != len(self.mesh.local):
            raise mesh_export.InputError(f"{self.object_name} was deleted or edited while it was being simulated")
        expected = (self.frames + 1, len(self.mesh.local), 3)
        if positions.shape != expected or not np.isfinite(positions).all():
            raise client.WorkerError(f"the runtime returned invalid positions {positions.shape} (expected "
                                     f"{expected}); nothing was written")
        inverse = np.linalg.inv(self.mesh.matrix_world)
        local = (positions / self.unit) @ inverse[:3, :3].T + inverse[:3, 3]
        shape_keys.write_animation(obj, local, self.mesh.local, self.frame_start)
        return obj


def _set_job_state(context, run: SimulationRun | None, text: str = "") -> None:
    state = context.window_manager.neurok_job
    state.running = run is not None
    state.object_name = run.object_name if run else ""
    state.progress = run.job.fraction if run else 0.0
    state.message = text
    if context.workspace is not None:
        context.workspace.status_text_set(text or None)
    for area in context.screen.areas if context.screen else ():
        if area.type == "VIEW_3D":
            area.tag_redraw()


class NEUROK_OT_simulate(bpy.types.Operator):
    """Simulate the active mesh with NeuROK and store the motion as shape keys (Esc cancels)"""

    bl_idname = "neurok.simulate"
    bl_label = "Simulate"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if context.window_manager.neurok_job.running:
            cls.poll_message_set("A NeuROK simulation is already running")
            return False
        return _poll_editable(cls, context)

    def _start(self, context) -> SimulationRun | None:
        try:
            run = SimulationRun(context, editable_mesh(context))
        except FAILURES as exc:
            self.report({"ERROR"}, f"{context.active_object.name}: {exc}")
            return None
        for warning in run.warnings:
            self.report({"WARNING"}, warning)
        return run

    def _finish(self, run: SimulationRun, positions: np.ndarray) -> set[str]:
        try:
            obj = run.finish(positions)
        except FAILURES as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        self.report({"INFO"}, f"NeuROK: simulated {run.frames} frames of {obj.name}")
        return {"FINISHED"}

    def execute(self, context):
        """Synchronous path (background mode, scripts): same worker, blocking until the result is in."""
        run = self._start(context)
        if run is None:
            return {"CANCELLED"}
        wm = context.window_manager
        wm.progress_begin(0.0, 1.0)
        try:
            positions = run.wait(lambda fraction, _message: wm.progress_update(fraction))
        except client.WorkerError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        finally:
            wm.progress_end()
        return self._finish(run, positions)

    def invoke(self, context, event):
        if bpy.app.background:  # no event loop: a modal operator would never be called back
            return self.execute(context)
        self._run = self._start(context)
        if self._run is None:
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(TIMER_INTERVAL, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0.0, 1.0)
        _set_job_state(context, self._run, "NeuROK: starting (Esc to cancel)")
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        if event.type == "ESC" and event.value == "PRESS":
            self._run.cancel()
            self._end(context)
            self.report({"INFO"}, "NeuROK simulation cancelled; nothing was changed")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            positions = self._run.poll()
        except client.WorkerError as exc:
            self._end(context)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if positions is None:
            job = self._run.job
            context.window_manager.progress_update(job.fraction)
            _set_job_state(context, self._run, f"NeuROK: {100 * job.fraction:.0f}% {job.message} (Esc to cancel)")
            return {"PASS_THROUGH"}
        self._end(context)
        return self._finish(self._run, positions)

    def _end(self, context) -> None:
        context.window_manager.event_timer_remove(self._timer)
        context.window_manager.progress_end()
        _set_job_state(context, None)


class NEUROK_OT_clear(bpy.types.Operator):
    """Remove the NeuROK shape keys and their keyframes (your own shape keys stay)"""

    bl_idname = "neurok.clear"
    bl_label = "Clear"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _poll_editable(cls, context)

    def execute(self, context):
        obj = editable_mesh(context)
        removed = shape_keys.remove_animation(obj)
        self.report({"INFO"}, f"Removed {removed} NeuROK shape keys from {obj.name}" if removed
                    else f"{obj.name} has no NeuROK animation")
        return {"FINISHED"}


class NEUROK_OT_bake(bpy.types.Operator):
    """Write the NeuROK animation to a PC2 point cache played by a Mesh Cache modifier (lighter for heavy meshes)"""

    bl_idname = "neurok.bake"
    bl_label = "Bake to Mesh Cache"
    bl_options = {"REGISTER", "UNDO"}

    filepath: bpy.props.StringProperty(
        name="File", subtype="FILE_PATH", default="//neurok_cache.pc2",
        description="PC2 file to write (// is the folder of the saved .blend)")
    remove_shape_keys: bpy.props.BoolProperty(
        name="Remove Shape Keys", default=True,
        description="Remove the NeuROK shape keys once the cache plays the animation")

    @classmethod
    def poll(cls, context):
        if not _poll_editable(cls, context):
            return False
        if not shape_keys.neurok_key_blocks(context.active_object):
            cls.poll_message_set("Simulate first: the object has no NeuROK animation")
            return False
        return True

    def invoke(self, context, event):
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        obj = editable_mesh(context)
        if self.filepath.startswith("//") and not bpy.data.filepath:
            self.report({"ERROR"}, "Save the .blend file first or choose an absolute path for the cache")
            return {"CANCELLED"}
        path = bpy.path.abspath(self.filepath)
        positions, first_frame = shape_keys.read_positions(obj)
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            pc2.write_pc2(path, positions, start=first_frame)
        except OSError as exc:
            self.report({"ERROR"}, f"Could not write {path}: {exc}")
            return {"CANCELLED"}
        mod = obj.modifiers.get("NeuROK Cache") or obj.modifiers.new("NeuROK Cache", "MESH_CACHE")
        mod.cache_format, mod.filepath, mod.frame_start = "PC2", self.filepath, first_frame
        if self.remove_shape_keys:
            shape_keys.remove_animation(obj)
        self.report({"INFO"}, f"Baked {len(positions)} frames of {obj.name} to {path}")
        return {"FINISHED"}


register, unregister = bpy.utils.register_classes_factory((NEUROK_OT_simulate, NEUROK_OT_clear, NEUROK_OT_bake))
