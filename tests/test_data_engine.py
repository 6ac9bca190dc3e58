"""The data engine on tiny scenes: the reference simulator's physics, the sequence format and generation."""

import json
import os

import numpy as np
import pytest

from model_runtime.errors import MeshError, ParameterError
from model_runtime.params import make_params

pytestmark = pytest.mark.newton


def _sheet():
    from model_runtime.lab.data.shapes import grid_sheet

    return grid_sheet(6, 6, 0.5, 0.5)


def _box():
    from model_runtime.lab.data.shapes import box_surface

    return box_surface((2, 2, 2), (0.2, 0.2, 0.2))


def _run(v, f, **kw):
    from model_runtime.lab.data.reference import simulate_reference

    return simulate_reference(v, f, make_params(num_vertices=len(v), **kw))


def test_same_parameters_give_identical_arrays():
    v, f = _sheet()
    pins = np.nonzero(v[:, 0] < -0.249)[0]
    a = _run(v, f, frames=6, material="cloth", pins=pins, drag=0.5)
    b = _run(v, f, frames=6, material="cloth", pins=pins, drag=0.5)
    assert a.dtype == np.float32 and a.shape == (7, len(v), 3)
    assert np.array_equal(a, b)
    assert np.array_equal(a[0], v.astype(np.float32))


def test_pins_stay_fixed_and_the_rest_hangs():
    v, f = _sheet()
    pins = np.nonzero(v[:, 0] < -0.249)[0]
    p = _run(v, f, frames=8, material="cloth", pins=pins)
    assert np.abs(p[:, pins] - v[pins]).max() < 1e-6
    free = np.setdiff1d(np.arange(len(v)), pins)
    assert (p[-1, free, 2] - v[free, 2]).mean() < -0.01


@pytest.mark.parametrize("gravity", [(0.0, 0.0, -9.81), (6.0, -3.0, -4.0)])
def test_a_free_solid_falls_along_gravity(gravity):
    v, f = _box()
    p = _run(v, f, frames=6, material="rubber", gravity=gravity)
    d = p[-1].mean(0) - v.mean(0)
    g = np.asarray(gravity)
    t = 6 / 24.0
    assert d @ g / (np.linalg.norm(d) * np.linalg.norm(g)) > 0.999
    assert np.linalg.norm(d) == pytest.approx(0.5 * np.linalg.norm(g) * t**2, rel=0.1)


def test_more_drag_removes_kinetic_energy_faster():
    v, f = _box()
    speeds = []
    for drag in (0.0, 3.0):
        p = _run(v, f, frames=6, material="rubber", gravity=(0, 0, 0), initial_velocity=(1.0, 0, 0), drag=drag)
        speeds.append(np.linalg.norm(p[-1] - p[-2], axis=1).mean() * 24.0)
    assert speeds[0] == pytest.approx(1.0, rel=0.02)
    assert speeds[1] < 0.6 * speeds[0]


def test_bad_meshes_and_parameters_give_clear_errors():
    v, f = _box()
    bad = v.copy()
    bad[0, 0] = np.nan
    with pytest.raises(MeshError, match="NaN"):
        _run(bad, f, frames=2)
    with pytest.raises(MeshError):
        _run(v, np.zeros((0, 3), np.int64), frames=2)
    with pytest.raises(ParameterError, match="stiffness"):
        make_params(stiffness=-5.0)
    with pytest.raises(ParameterError, match="out of range"):
        make_params(pins=[len(v)], num_vertices=len(v))


def test_non_manifold_open_mesh_runs_as_cloth():
    v, f = _sheet()
    fan = np.array([[0, 1, len(v)]])  # a third face on edge (0, 1): non-manifold
    v2 = np.vstack([v, [[-0.2, -0.25, 0.1]]])
    p = _run(v2, np.vstack([f, fan]), frames=3, material="cloth", pins=[0])
    assert np.isfinite(p).all() and p.shape == (4, len(v2), 3)


def test_closed_mesh_keeps_its_surface_vertices_first():
    from model_runtime.lab.data.reference import tetrahedralize
    from model_runtime.mesh import validate

    v, f = _box()
    nodes, tets = tetrahedralize(validate(v, f))
    assert np.allclose(nodes[: len(v)], v)
    a, b, c, d = (nodes[tets[:, k]] for k in range(4))
    assert (np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a)) > 0).all()


def test_format_round_trip_and_shape_wise_splits(tmp_path):
    from model_runtime.lab.data.format import list_sequences, load_sequence, save_sequence, split_for_shape

    v, f = _sheet()
    pos = np.repeat(v[None].astype(np.float32), 3, axis=0)
    pos[1:, :, 2] -= 0.1
    mask = np.zeros(len(v), bool)
    mask[:3] = True
    path = str(tmp_path / "seq_000000.npz")
    save_sequence(path, v, f, pos, 24.0, mask, {"stiffness": 1e6}, "cloth", "cloth-1-0")
    d = load_sequence(path)
    assert np.array_equal(d["positions"], pos) and np.array_equal(d["faces"], f) and d["faces"].dtype == np.int32
    assert np.array_equal(d["pin_mask"], mask) and d["fps"] == 24.0
    assert d["params"] == {"stiffness": 1e6, "family": "cloth", "shape_id": "cloth-1-0"}
    assert d["split"] == split_for_shape("cloth-1-0") and d["family"] == "cloth"
    assert list_sequences(str(tmp_path)) == [path]
    assert list_sequences(str(tmp_path), d["split"]) == [path]
    with pytest.raises(ValueError):
        save_sequence(path, v, f, pos + 1, 24.0, mask, {}, "cloth", "x")
    splits = {split_for_shape(f"s{i}") for i in range(200)}
    assert splits == {"train", "val", "test"}


TINY = {"frames": 4, "resolution_scale": 0.1}


def test_generate_is_deterministic_and_resumable(tmp_path):
    from model_runtime.lab.data.format import list_sequences, load_sequence
    from model_runtime.lab.data.generate import generate

    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    sa = generate(a, 3, seed=7, config=TINY, show_progress=False)
    assert sa["sequences"] + sa["rejected"] == 3
    generate(b, 2, seed=7, config=TINY, show_progress=False)
    again = generate(b, 3, seed=7, config=TINY, show_progress=False)  # resumes: only index 2 is new
    assert again["last_run_sequences"] == 1
    assert generate(b, 3, seed=7, config=TINY, show_progress=False)["last_run_sequences"] == 0
    pa, pb = list_sequences(a), list_sequences(b)
    assert [os.path.basename(p) for p in pa] == [os.path.basename(p) for p in pb]
    for x, y in zip(pa, pb):
        assert np.array_equal(load_sequence(x)["positions"], load_sequence(y)["positions"])
    assert json.load(open(os.path.join(b, "stats.json")))["sequences"] == len(pb)


def test_generate_one_split_makes_exactly_the_full_runs_files_of_that_split(tmp_path):
    from model_runtime.lab.data.format import load_sequence, split_for_shape
    from model_runtime.lab.data.generate import generate
    from model_runtime.lab.data.scenes import DEFAULT_CONFIG, sample_scene

    count, seed = 40, 1  # seed 1: shapes 4, 15 and 39 of these 40 fall in the test split
    # No cut-outs: they read ../shared/meshes, which a clean clone elsewhere does not have.
    tiny = {**TINY, "family_weights": {"cloth": 0.4, "soft": 0.4, "beam": 0.2}}
    cfg = {**DEFAULT_CONFIG, **tiny}
    wanted = [i for i in range(count) if split_for_shape(sample_scene(seed, i, cfg).shape_id) == "test"]
    assert 0 < len(wanted) < count
    first = wanted[0]
    stats = generate(str(tmp_path / "split"), count, seed=seed, config=tiny, show_progress=False, split="test")
    assert stats["last_run_sequences"] == len(wanted)
    made = sorted(tmp_path.joinpath("split").glob("seq_*.npz"))
    assert {int(p.stem.split("_")[1]) for p in made} <= set(wanted)
    assert all(load_sequence(str(p))["split"] == "test" for p in made)
    full = generate(str(tmp_path / "full"), first + 1, seed=seed, config=tiny, show_progress=False)
    assert full["sequences"] + full["rejected"] == first + 1
    same = tmp_path / "full" / f"seq_{first:06d}.npz"
    if same.exists():  # not rejected: the split run wrote the very same sequence
        a = load_sequence(str(same))["positions"]
        assert np.array_equal(a, load_sequence(str(tmp_path / "split" / same.name))["positions"])


def test_generate_rejects_blown_up_sequences(tmp_path):
    from model_runtime.lab.data.format import list_sequences
    from model_runtime.lab.data.generate import generate

    cfg = {"frames": 12, "resolution_scale": 0.1, "family_weights": {"cloth": 1.0}, "stiffness_scale": 1e-5}
    stats = generate(str(tmp_path), 2, seed=3, config=cfg, show_progress=False)
    assert stats["rejected"] == 2 and list_sequences(str(tmp_path)) == []
    rejected = [json.loads(line) for line in open(tmp_path / "rejected.jsonl")]
    assert {r["index"] for r in rejected} == {0, 1} and all("stretched" in r["reason"] for r in rejected)


def test_zero_weight_families_and_set_ups_draw_nothing_so_v1_regenerates():
    from model_runtime.lab.data.scenes import DEFAULT_CONFIG, sample_scene

    # No cut-outs (they read ../shared/meshes, which a clean clone elsewhere does not have) and no real solids.
    with_zeros = {**DEFAULT_CONFIG, "family_weights": {"cloth": 0.3, "soft": 0.35, "beam": 0.25, "real": 0.0}}
    without = {**with_zeros, "family_weights": {"cloth": 0.3, "soft": 0.35, "beam": 0.25},
               "cloth_modes": {"edge": 0.6, "two_corners": 0.4}, "soft_modes": {"base": 0.6, "free": 0.4}}
    for i in range(40):
        a, b = sample_scene(1, i, with_zeros), sample_scene(1, i, without)
        assert (a.family, a.variant, a.shape_id) == (b.family, b.variant, b.shape_id)
        assert np.array_equal(a.vertices, b.vertices) and a.params.to_dict() == b.params.to_dict()


def test_ground_drops_are_sampled_and_a_dropped_sheet_lands_on_the_ground():
    import json

    from model_runtime.lab.data.scenes import DEFAULT_CONFIG, sample_scene
    from model_runtime.params import make_params

    cfg = {**DEFAULT_CONFIG, **json.load(open("configs/data-v1.1.json")), "family_weights": {"cloth": 1.0}}
    drops = [s for s in (sample_scene(1, i, cfg) for i in range(40)) if s.variant == "ground"]
    assert drops and all(s.params.ground < s.vertices[:, 2].min() and not len(s.params.pins) for s in drops)
    from model_runtime.lab.data.reference import simulate_reference

    v, f = _sheet()
    params = make_params(num_vertices=len(v), frames=24, material="cloth", ground=-0.1)
    p = simulate_reference(v, f, params, settings="dataset")
    # Free fall reaches the plane after 0.14 s; a second later the sheet lies on it, not in or under it.
    assert abs(p[-1, :, 2].mean() + 0.1) < 0.01 and p[-1, :, 2].min() > -0.11


@pytest.mark.skipif(not os.path.exists(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "meshes")),
                    reason="needs ../shared/meshes next to the repository")
@pytest.mark.parametrize("name", ["cheburashka", "fandisk"])
def test_real_solids_decimate_to_closed_meshes_of_the_asked_size(name):
    from model_runtime.lab.data.reference import tetrahedralize
    from model_runtime.lab.data.shapes import decimated_solid
    from model_runtime.mesh import is_closed, validate

    for target in (500, 1500, 3000):
        v, f = decimated_solid(name, target)
        assert abs(len(v) - target) <= 0.05 * target
        assert np.linalg.norm(np.ptp(v, 0)) == pytest.approx(1.0)
        mesh = validate(v, f)
        assert is_closed(mesh)
        tetrahedralize(mesh)  # fills without error


@pytest.mark.parametrize("travel", [0.0, 5.0])
def test_preview_draws_a_sequence_held_still_or_thrown(tmp_path, travel):
    from model_runtime.lab.data.format import save_sequence
    from model_runtime.lab.data.preview import preview

    v, f = _box()
    shift = np.linspace(0, travel, 5)[:, None, None] * np.array([1.0, 0.0, 0.0])
    path = str(tmp_path / "seq_000000.npz")
    params = make_params(num_vertices=len(v)).to_dict()
    del params["pins"]
    save_sequence(path, v, f, v[None] + shift, 24.0, np.zeros(len(v), bool), params, "soft", "soft-0-0")
    preview(path, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 10_000
