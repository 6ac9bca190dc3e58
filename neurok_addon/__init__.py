"""NeuROK add-on: the bpy side of the extension (settings, sidebar panels, operators, runtime worker client).

All bpy code lives here; the simulation runs in a separate worker process (see :mod:`.client`), because Blender's
Python has no torch.
"""

from . import client, live, operators, panels, preferences, properties

_MODULES = (properties, preferences, operators, panels, live)


def register() -> None:
    for module in _MODULES:
        module.register()


def unregister() -> None:
    for module in reversed(_MODULES):  # live first: its timer and handler would call into the rest
        module.unregister()
    client.shutdown()  # a worker left running would hold its model in memory until Blender quits
