"""Per-object NeuROK settings (``Object.neurok``) and the running job's progress (``WindowManager.neurok_job``).

Limits mirror the runtime's validation in ``model_runtime.params`` so nonsense cannot even be typed; values are in
SI units (lengths in scene units, converted with the scene's unit scale when sent).
"""

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, FloatVectorProperty, IntProperty, StringProperty

from ..model_runtime.materials import DEFAULT_MATERIAL, MATERIALS

MATERIAL_ITEMS = [(name, name.replace("_", " ").title(), m.description) for name, m in MATERIALS.items()]


def _apply_material(settings: "NeuROKSettings", _context) -> None:
    preset = MATERIALS[settings.material]
    settings.stiffness, settings.density, settings.damping = preset.stiffness, preset.density, preset.damping


class NeuROKSettings(bpy.types.PropertyGroup):
    material: EnumProperty(
        name="Material", items=MATERIAL_ITEMS, default=DEFAULT_MATERIAL, update=_apply_material,
        description="Preset that fills stiffness, density and damping (they stay editable)")
    stiffness: FloatProperty(
        name="Stiffness", default=MATERIALS[DEFAULT_MATERIAL].stiffness, min=1.0, max=1e11, soft_min=1e3,
        soft_max=1e9, precision=0, step=1000,
        description="Young's modulus in pascals (Pa): how strongly a solid (closed mesh) resists stretching and "
                    "bending. Open surfaces (cloth) drape by their shape and weight: above some tens of kPa their "
                    "stiffness changes little")
    density: FloatProperty(
        name="Density", default=MATERIALS[DEFAULT_MATERIAL].density, min=1.0, max=25_000.0, precision=1,
        description="Mass per volume in kg/m^3 (water is 1000)")
    damping: FloatProperty(
        name="Damping", default=MATERIALS[DEFAULT_MATERIAL].damping, min=0.0, max=10.0, soft_max=0.1,
        precision=4, step=0.1, unit="TIME_ABSOLUTE",
        description="Internal damping in seconds: higher values calm wobbling faster")
    use_scene_gravity: BoolProperty(
        name="Scene Gravity", default=True,
        description="Use the scene's gravity (Scene Properties > Gravity); turn off to set a custom vector")
    gravity: FloatVectorProperty(
        name="Gravity", size=3, default=(0.0, 0.0, -9.81), min=-1000.0, max=1000.0, subtype="ACCELERATION",
        unit="ACCELERATION", description="Gravity in m/s^2 when not using the scene's gravity")
    drag: FloatProperty(
        name="Air Drag", default=0.0, min=0.0, max=1000.0, soft_max=10.0, precision=3,
        description="Air drag in 1/s: each part of the mesh is slowed by a force of drag x mass x velocity")
    pin_group: StringProperty(
        name="Pin Group", default="",
        description="Vertex group of pinned vertices: vertices with a weight above 0.5 stay in place")
    initial_velocity: FloatVectorProperty(
        name="Initial Velocity", size=3, default=(0.0, 0.0, 0.0), min=-1000.0, max=1000.0, subtype="VELOCITY",
        unit="VELOCITY", description="Velocity of the whole object at the start frame, in m/s (world axes)")
    angular_velocity: FloatVectorProperty(
        name="Initial Spin", size=3, default=(0.0, 0.0, 0.0), min=-100.0, max=100.0, subtype="XYZ",
        description="Angular velocity about the object's centre at the start frame, in rad/s (world axes)")
    use_scene_range: BoolProperty(
        name="Scene Frame Range", default=True,
        description="Simulate over the scene's frame range; turn off to set a custom start and end")
    frame_start: IntProperty(
        name="Start", default=1, min=-100_000, max=100_000,
        description="Frame that shows the rest shape; the motion starts here")
    frame_end: IntProperty(
        name="End", default=250, min=-100_000, max=100_000, description="Last simulated frame")
    use_ground: BoolProperty(
        name="Ground", default=False, description="Collide with a horizontal ground plane")
    ground_height: FloatProperty(
        name="Height", default=0.0, min=-1e5, max=1e5, subtype="DISTANCE", unit="LENGTH",
        description="Height (world Z) of the ground plane, in scene units")

    def frame_range(self, scene: bpy.types.Scene) -> tuple[int, int]:
        if self.use_scene_range:
            return scene.frame_start, scene.frame_end
        return self.frame_start, self.frame_end


class NeuROKJobState(bpy.types.PropertyGroup):
    """What the panel shows while a simulation runs; lives on the window manager, so it is never saved."""

    running: BoolProperty(default=False)
    object_name: StringProperty()
    progress: FloatProperty(min=0.0, max=1.0, subtype="FACTOR")
    message: StringProperty()


_register_classes, _unregister_classes = bpy.utils.register_classes_factory((NeuROKSettings, NeuROKJobState))


def register() -> None:
    _register_classes()
    bpy.types.Object.neurok = bpy.props.PointerProperty(type=NeuROKSettings)
    bpy.types.WindowManager.neurok_job = bpy.props.PointerProperty(type=NeuROKJobState)


def unregister() -> None:
    del bpy.types.WindowManager.neurok_job
    del bpy.types.Object.neurok
    _unregister_classes()
