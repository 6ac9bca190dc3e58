"""Live tweaking: Auto Re-simulate, and the worker started before the first Simulate.

With an object's Auto Re-simulate on, every change of one of its physical settings (properties.py calls
:func:`changed`) or of what it reads from the scene (gravity, fps, frame range, unit scale, still Wind fields and
Collision objects: a depsgraph handler compares them) schedules a new simulation DEBOUNCE seconds after the last
change, so a slider drag simulates once it pauses; a change while a re-simulation runs cancels it. The run is the
Simulate operator's :class:`~.operators.SimulationRun`, and its keys replace the old ones when it is done.

Blender's timers drive :meth:`LiveResimulation.step`; they never run in background mode, where tests call ``step``
themselves with the clock they want. One run at a time (the worker answers one job at a time), and none while the
Simulate operator runs.
"""

import time

import bpy

from . import client, motion, operators, shape_keys
from .preferences import worker_python, worker_timeout

DEBOUNCE = 0.3  # s of quiet after the last change: long enough to bridge a slider drag's updates, short to feel live
INTERVAL = 0.1  # s between timer steps while something is due or running


class LiveResimulation:
    def __init__(self):
        self.due: dict[str, float] = {}  # object name -> monotonic time at which to re-simulate it
        self.run: operators.SimulationRun | None = None
        self.inputs: tuple | None = None  # scene_inputs when last seen, while any object is watched

    def changed(self, obj: bpy.types.Object, now: float | None = None) -> None:
        self.due[obj.name] = (time.monotonic() if now is None else now) + DEBOUNCE
        if self.run is not None and self.run.object_name == obj.name:
            self.run.cancel()
            self.run = None

    def step(self, context: bpy.types.Context, now: float | None = None) -> float | None:
        """Poll the running re-simulation (writing its keys when done), else start the earliest one due. Returns
        the seconds until the next step, or None when there is nothing left to do."""
        now = time.monotonic() if now is None else now
        if self.run is not None and not self._poll(context):
            return INTERVAL
        if not context.window_manager.neurok_job.running:  # the Simulate operator has the worker otherwise
            ready = [name for name, due in self.due.items() if due <= now]
            if ready:
                self._start(context, min(ready, key=self.due.get))
        return INTERVAL if self.run is not None or self.due else None

    def _poll(self, context) -> bool:
        """True when the run has ended (its keys written, or failed)."""
        run = self.run
        try:
            positions = run.poll()
        except operators.FAILURES as exc:
            self.run = None
            _say(context, f"{run.object_name}: {exc}")
            return True
        if positions is None:
            return False
        self.run = None
        try:
            run.finish(positions)
        except operators.FAILURES as exc:
            _say(context, f"{run.object_name}: {exc}")
        else:
            _say(context, f"re-simulated {run.object_name}")
        return True

    def _start(self, context, name: str) -> None:
        del self.due[name]
        obj = bpy.data.objects.get(name)
        if obj is None or operators.not_editable_reason_for(obj) or not wanted(obj):
            return
        try:
            self.run = operators.SimulationRun(context, obj)
        except operators.FAILURES as exc:
            _say(context, f"{name}: {exc}")
        else:
            _say(context, f"re-simulating {name}")

    def stop(self) -> None:
        if self.run is not None:
            self.run.cancel()
        self.run, self.due = None, {}


LIVE = LiveResimulation()


def wanted(obj: bpy.types.Object) -> bool:
    """Auto Re-simulate is on and the object was simulated (it has NeuROK keys to replace)."""
    return obj.neurok.auto_resimulate and bool(shape_keys.neurok_key_blocks(obj))


def changed(obj: bpy.types.Object) -> None:
    """A physical setting of ``obj`` changed: schedule its re-simulation if wanted."""
    if not wanted(obj):
        return
    LIVE.changed(obj)
    if not bpy.app.timers.is_registered(_tick):
        bpy.app.timers.register(_tick, first_interval=INTERVAL)


def scene_inputs(scene: bpy.types.Scene, view_layer: bpy.types.ViewLayer) -> tuple:
    """What a simulation reads from the scene besides the object's own settings. Wind fields and colliders that may
    move are left out: they are read at the start frame, so playback moving them says nothing about a change."""
    items = [tuple(scene.gravity), scene.use_gravity, scene.render.fps, scene.render.fps_base, scene.frame_start,
             scene.frame_end, scene.unit_settings.scale_length]
    for obj in scene.objects:
        field = obj.field
        wind = field is not None and field.type == "WIND"
        collisions = [m.show_viewport for m in obj.modifiers if m.type == "COLLISION"] if obj.type == "MESH" else []
        if (wind or collisions) and not motion.may_move(obj):
            state = (field.strength, field.noise) if wind else (obj.collision.use, *collisions)
            items.append((obj.name, obj.visible_get(view_layer=view_layer),
                          tuple(tuple(row) for row in obj.matrix_world), state))
    return tuple(items)


@bpy.app.handlers.persistent
def _depsgraph_updated(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Schedule every watched object when the scene's inputs changed (frame changes leave them as they are)."""
    watched = [obj for obj in scene.objects if obj.type == "MESH" and wanted(obj)]
    if not watched:
        LIVE.inputs = None
        return
    inputs = scene_inputs(scene, depsgraph.view_layer)
    if LIVE.inputs is not None and inputs != LIVE.inputs:
        for obj in watched:
            changed(obj)
    LIVE.inputs = inputs


def _tick() -> float | None:
    return LIVE.step(bpy.context)


def _say(context, text: str) -> None:
    """Show what the last re-simulation did in the panel (no operator is there to report it)."""
    context.window_manager.neurok_job.live_message = text
    for window in context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def prestart(context: bpy.types.Context) -> None:
    """Start the worker loading its model in the background (once), so the first Simulate does not wait for it."""
    try:
        client.get_client(worker_python(context), worker_timeout(context)).warm_up()
    except client.WorkerError:
        pass  # the first Simulate reports it, with what to do about it


def register() -> None:
    bpy.app.handlers.depsgraph_update_post.append(_depsgraph_updated)


def unregister() -> None:
    if _depsgraph_updated in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.remove(_depsgraph_updated)
    if bpy.app.timers.is_registered(_tick):
        bpy.app.timers.unregister(_tick)
    LIVE.stop()
