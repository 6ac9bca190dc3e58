"""Per-object NeuROK settings (``Object.neurok``) and the running job's progress (``WindowManager.neurok_job``).

Limits mirror the runtime's validation in ``model_runtime.params`` so nonsense cannot even be typed; values are in
SI units, except lengths, velocities and accelerations, which are in scene units as everywhere in Blender (Blender's
UI shows them through the unit scale) and are converted with the scene's unit scale when sent.
"""

import math

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty, StringProperty

from ..model_runtime.materials import DEFAULT_MATERIAL, MATERIALS
from ..model_runtime.params import OPTIONS, STANDARD_GRAVITY

# 1/s, as Blender Cloth's default Air Viscosity: a 1 m sheet pinned along an edge under the cloth preset settles in
# ~3 s (measured: its lowest point within 2.5 cm of where it hangs from 3 s on; without drag it still swings by
# 0.4 m between 3 and 5 s). The price: a fall tops out at g / drag = 9.8 m/s and is 21% slower after 0.5 s.
AIR_DRAG = 1.0
# Paths that may start with // (relative to the .blend): Blender 5.0 warns about them without this option (checked
# in 5.0.1); older versions without it would refuse to register the property, so it is only asked for from 5.0 on.
BLEND_RELATIVE = {"PATH_SUPPORTS_BLEND_RELATIVE"} if bpy.app.version >= (5, 0, 0) else set()
MATERIAL_ITEMS = [(name, name.replace("_", " ").title(), m.description) for name, m in MATERIALS.items()]


def _limits(name: str) -> dict:
    """A runtime option's hard limits and tooltip (model_runtime.params.OPTIONS), as property keywords."""
    option = OPTIONS[name]
    return {"min": option.low, "max": option.high,
            "description": f"{option.help[0].upper()}{option.help[1:]}, in {option.unit}"}


def _changed(settings: "NeuROKSettings", _context) -> None:
    """A physical setting changed: Auto Re-simulate may re-run the simulation. Imported here: live.py needs the
    operators, which import this module."""
    from . import live

    live.changed(settings.id_data)


def _apply_material(settings: "NeuROKSettings", context) -> None:
    preset = MATERIALS[settings.material]
    settings.stiffness, settings.density, settings.damping = preset.stiffness, preset.density, preset.damping
    _changed(settings, context)


class NeuROKSettings(bpy.types.PropertyGroup):
    material: EnumProperty(
        name="Material", items=MATERIAL_ITEMS, default=DEFAULT_MATERIAL, update=_apply_material,
        description="Preset that fills stiffness, density and damping (they stay editable)")
    stiffness: FloatProperty(
        name="Stiffness", default=MATERIALS[DEFAULT_MATERIAL].stiffness, soft_min=1e3, soft_max=1e9, precision=0,
        step=1000, update=_changed, **_limits("stiffness"))
    density: FloatProperty(
        name="Density", default=MATERIALS[DEFAULT_MATERIAL].density, precision=1, update=_changed,
        **_limits("density"))
    damping: FloatProperty(
        name="Damping", default=MATERIALS[DEFAULT_MATERIAL].damping, soft_max=0.1, precision=4, step=0.1,
        unit="TIME_ABSOLUTE", update=_changed, **_limits("damping"))
    use_scene_gravity: BoolProperty(
        name="Scene Gravity", default=True,
        description="Use the scene's gravity (Scene Properties > Gravity), as Blender's Cloth does; turn off to set "
                    "a custom vector", update=_changed)
    # Wide hard limits: a centimetre scene needs -981 scene units/s^2 for Earth's gravity.
    gravity: FloatVectorProperty(
        name="Gravity", size=3, default=(0.0, 0.0, -STANDARD_GRAVITY), min=-1e6, max=1e6, soft_min=-1e5, soft_max=1e5,
        subtype="ACCELERATION", unit="ACCELERATION",
        description="Gravity when not using the scene's, in scene units per s^2 like the scene's gravity (m/s^2 at "
                    "unit scale 1)", update=_changed)
    drag: FloatProperty(
        name="Air Drag", default=AIR_DRAG, soft_max=10.0, precision=3, update=_changed, **_limits("drag"))
    pin_group: StringProperty(
        name="Pin Group", default="",
        description="Vertex group of pinned vertices: vertices with a weight above 0.5 stay in place", update=_changed)
    initial_velocity: FloatVectorProperty(
        name="Initial Velocity", size=3, default=(0.0, 0.0, 0.0), min=-1000.0, max=1000.0, subtype="VELOCITY",
        unit="VELOCITY",
        description="Velocity of the whole object at the start frame, in scene units per second (world axes)",
        update=_changed)
    angular_velocity: FloatVectorProperty(
        name="Initial Spin", size=3, default=(0.0, 0.0, 0.0), min=-100.0, max=100.0, subtype="XYZ",
        description="Angular velocity about the object's centre at the start frame, in rad/s (world axes)",
        update=_changed)
    use_scene_range: BoolProperty(
        name="Scene Frame Range", default=True,
        description="Simulate over the scene's frame range; turn off to set a custom start and end", update=_changed)
    frame_start: IntProperty(
        name="Start", default=1, min=-100_000, max=100_000,
        description="Frame that shows the rest shape; the motion starts here", update=_changed)
    frame_end: IntProperty(
        name="End", default=250, min=-100_000, max=100_000, description="Last simulated frame", update=_changed)
    use_ground: BoolProperty(
        name="Ground", default=False, description="Collide with a horizontal ground plane", update=_changed)
    ground_height: FloatProperty(
        name="Height", default=0.0, min=-1e5, max=1e5, subtype="DISTANCE", unit="LENGTH",
        description="Height (world Z) of the ground plane, in scene units", update=_changed)

    auto_resimulate: BoolProperty(
        name="Auto Re-simulate", default=False,
        description="After the first Simulate, simulate again in the background whenever a setting here changes "
                    "(a new change cancels the run in progress) and replace the keys when done")

    cache_file: StringProperty(
        name="Cache File", subtype="FILE_PATH", options={"HIDDEN"} | BLEND_RELATIVE,
        description="The point cache NeuROK's Bake wrote for this object (Clear deletes it)")

    def gravity_used(self, scene: bpy.types.Scene) -> tuple[float, float, float]:
        """The gravity Simulate uses, in scene units per s^2 (Blender's own convention for the scene's gravity)."""
        if not self.use_scene_gravity:
            return tuple(self.gravity)
        return tuple(scene.gravity) if scene.use_gravity else (0.0, 0.0, 0.0)

    def effective_gravity(self, scene: bpy.types.Scene) -> tuple[float, float, float]:
        """The gravity Simulate uses in m/s^2: scene units through the unit scale, as Blender's Cloth reads them."""
        unit = scene.unit_settings.scale_length
        return tuple(g * unit for g in self.gravity_used(scene))

    def gravity_problem(self, scene: bpy.types.Scene) -> str:
        """Why the effective gravity looks like a units slip (far from Earth's, not off), or an empty string."""
        magnitude = math.hypot(*self.effective_gravity(scene))
        if magnitude == 0.0 or 0.5 <= magnitude / STANDARD_GRAVITY <= 2.0:
            return ""
        unit = scene.unit_settings.scale_length
        return (f"gravity is {magnitude:.3g} m/s^2, {magnitude / STANDARD_GRAVITY:.3g} of Earth's: Blender reads it in "
                f"scene units per s^2 (unit scale {unit:g}); Earth's is {STANDARD_GRAVITY / unit:.4g} here")

    def preset_edited(self) -> bool:
        """True when stiffness, density or damping no longer hold the material preset's values."""
        preset = MATERIALS[self.material]
        return not all(math.isclose(value, default, rel_tol=1e-5, abs_tol=1e-9) for value, default in (
            (self.stiffness, preset.stiffness), (self.density, preset.density), (self.damping, preset.damping)))

    def frame_range(self, scene: bpy.types.Scene) -> tuple[int, int]:
        if self.use_scene_range:
            return scene.frame_start, scene.frame_end
        return self.frame_start, self.frame_end


class NeuROKSceneSettings(bpy.types.PropertyGroup):
    cache_dir: StringProperty(
        name="Cache Folder", subtype="DIR_PATH", default="//neurok_cache", options=BLEND_RELATIVE,
        description="Folder for baked point caches (// is the folder of the saved .blend); each object gets its "
                    "own file, named after the .blend, the scene and the object")


class NeuROKJobState(bpy.types.PropertyGroup):
    """What the panel shows while a simulation runs; lives on the window manager, so it is never saved."""

    running: BoolProperty(default=False)
    object_name: StringProperty()
    progress: FloatProperty(min=0.0, max=1.0, subtype="FACTOR")
    message: StringProperty()
    live_message: StringProperty()  # what Auto Re-simulate last did (no operator is there to report it)


_register_classes, _unregister_classes = bpy.utils.register_classes_factory(
    (NeuROKSettings, NeuROKSceneSettings, NeuROKJobState))


def register() -> None:
    _register_classes()
    bpy.types.Object.neurok = bpy.props.PointerProperty(type=NeuROKSettings)
    bpy.types.Scene.neurok = bpy.props.PointerProperty(type=NeuROKSceneSettings)
    bpy.types.WindowManager.neurok_job = bpy.props.PointerProperty(type=NeuROKJobState)


def unregister() -> None:
    del bpy.types.WindowManager.neurok_job
    del bpy.types.Scene.neurok
    del bpy.types.Object.neurok
    _unregister_classes()
