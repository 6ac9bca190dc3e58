"""Command line: ``python -m model_runtime <command>``.

``simulate`` (the product's reduced continuum) and ``reference`` (the full lattice's ground-truth physics) take the
same mesh and physical options and write the same ``.npz`` (``positions`` float32 of shape (frames+1, V, 3) and
``fps``), so they compare directly.
Heavy modules are imported inside each command so ``--help`` stays instant.
"""

import argparse
import inspect
import sys

import numpy as np

from ..errors import Cancelled, MeshError, ParameterError, SimulationError, WeightsError
from ..materials import MATERIALS
from ..mesh import read_obj
from ..params import OPTIONS, SimParams, make_params
from .progress import ProgressBar


def add_physics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("mesh", help="triangle mesh (.obj), coordinates in metres")
    p.add_argument("--out", required=True, help="output .npz with positions (frames+1, V, 3) and fps")
    defaults = inspect.signature(make_params).parameters
    for name, option in OPTIONS.items():  # the scalar options, with make_params' defaults and ranges
        default = defaults[name].default
        origin = "from --material" if default is None else f"{default:g}"
        p.add_argument(f"--{name}", type=int if name == "frames" else float, default=default,
                       help=f"{option.help}; {option.unit or 'a number'} from {option.low:g} to {option.high:g} "
                            f"(default: {origin})".replace("%", "%%"))
    p.add_argument("--gravity", type=float, nargs=3, default=defaults["gravity"].default, metavar=("GX", "GY", "GZ"),
                   help="gravity vector, m/s^2")
    p.add_argument("--material", choices=sorted(MATERIALS), default=None, help="material preset")
    p.add_argument("--pin-file", help="text file with one pinned vertex index per line")
    p.add_argument("--initial-velocity", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("VX", "VY", "VZ"),
                   help="initial linear velocity, m/s")
    p.add_argument("--angular-velocity", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("WX", "WY", "WZ"),
                   help="initial angular velocity about the centroid, rad/s")
    p.add_argument("--ground-z", type=float, default=None, help="height of a ground plane, m (default: none)")


def params_from_args(args: argparse.Namespace, num_vertices: int) -> SimParams:
    pins = np.loadtxt(args.pin_file, dtype=np.int64, ndmin=1) if args.pin_file else None
    return make_params(frames=args.frames, fps=args.fps, gravity=args.gravity, drag=args.drag,
                       stiffness=args.stiffness, density=args.density, damping=args.damping, poisson=args.poisson,
                       thickness=args.thickness, material=args.material, initial_velocity=args.initial_velocity,
                       angular_velocity=args.angular_velocity, ground=args.ground_z, pins=pins,
                       frame_motion=np.load(motion) if (motion := getattr(args, "frame_motion", None)) else None,
                       num_vertices=num_vertices)


def _run_physics(args: argparse.Namespace, engine: str) -> int:
    mesh = read_obj(args.mesh)
    params = params_from_args(args, len(mesh.vertices))
    bar = ProgressBar(engine)
    if engine == "simulate":
        from ..simulator import Simulator
        positions = Simulator().simulate(mesh.vertices, mesh.faces, params, bar.update)
    else:
        from .data.reference import simulate_reference
        positions = simulate_reference(mesh.vertices, mesh.faces, params, progress=bar.update)
    bar.close()
    np.savez(args.out, positions=np.asarray(positions, np.float32), fps=np.float32(params.fps))
    print(f"wrote {args.out}: {positions.shape[0]} frames x {positions.shape[1]} vertices")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m model_runtime", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="animate a mesh as the add-on does")
    add_physics_arguments(sim)
    sim.add_argument("--frame-motion", default=None, metavar="NPY",
                     help="the object's animation: a .npy of (frames + 1, 4, 4) object-to-world rigid transforms in "
                          "metres, one per frame; the mesh moves with it and the result is in object space")
    add_physics_arguments(sub.add_parser("reference", help="animate a mesh with the reference physics simulator"))

    data = sub.add_parser("data", help="make and inspect the training dataset").add_subparsers(dest="data_command",
                                                                                               required=True)
    g = data.add_parser("generate", help="simulate a dataset of 4D sequences (resumable)")
    g.add_argument("--out", required=True)
    g.add_argument("--count", type=int, required=True)
    g.add_argument("--workers", type=int, default=1)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--config", help="JSON file overriding the generator's settings (e.g. a tiny test config)")
    g.add_argument("--split", choices=("train", "val", "test"),
                   help="only the sequences of 0..count-1 whose shape is in this split (e.g. a test split to evaluate)")
    pv = data.add_parser("preview", help="draw a few frames of a sequence to a PNG")
    pv.add_argument("sequence")
    pv.add_argument("--out", required=True)
    st = data.add_parser("stats", help="summarize a generated dataset")
    st.add_argument("root")
    va = data.add_parser("validate", help="check the reference simulator against closed-form mechanics")
    va.add_argument("--quick", action="store_true", help="a small subset (free fall, drag, one beam, pins)")

    t = sub.add_parser("train", help="train the NeuROK model")
    t.add_argument("--config", required=True, help="JSON training config")
    t.add_argument("--resume", action="store_true", help="continue from the run's last checkpoint")

    e = sub.add_parser("evaluate", help="measure a trained model against the reference simulator")
    e.add_argument("--weights", default=None, help="weights (.safetensors); default: the shipped model")
    e.add_argument("--data", help="dataset root (uses its test split; see --split)")
    e.add_argument("--split", default="test", choices=["test", "val", "train", "all"],
                   help="the dataset's sequences to evaluate: all of them for data the weights never saw")
    e.add_argument("--meshes", help="folder of .obj meshes to run through the reference and the model")
    e.add_argument("--out", required=True, help="report folder (JSON, Markdown, plots)")
    e.add_argument("--limit", type=int, default=None, help="at most this many sequences/meshes (default 20)")
    e.add_argument("--run", help="training run folder (runs/NAME) whose log.jsonl is plotted as loss curves")
    e.add_argument("--recon-frames", type=int, default=4, help="frames per test sequence for reconstruction")
    e.add_argument("--points", type=int, default=2048, help="surface samples per cloud for reconstruction")
    e.add_argument("--ik-steps", type=int, default=200, help="Adam steps of the inverse-kinematics fit of z")
    e.add_argument("--mesh-frames", type=int, default=48, help="frames (at 24 fps) simulated per --meshes mesh")
    e.add_argument("--no-physics", action="store_true", help="skip the energy/pin/monotonicity checks")
    e.add_argument("--seed", type=int, default=0, help="seed of the surface sampling")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command in ("simulate", "reference"):
            return _run_physics(args, args.command)
        if args.command == "data":
            from .data import commands
            return commands.run(args)
        if args.command == "train":
            from .train import train
            train(args.config, resume=args.resume)
            return 0
        if args.command == "evaluate":
            from .evaluate import run_cli
            return run_cli(args)
    except (MeshError, ParameterError, WeightsError, SimulationError, Cancelled, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1
