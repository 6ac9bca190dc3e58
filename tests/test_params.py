"""One parameter table: the runtime's checks and the CLI's arguments come from params.OPTIONS (the add-on's
property limits and tooltips too: tests/test_robustness.py checks those in real bpy)."""

import pytest

from model_runtime.errors import ParameterError
from model_runtime.lab.cli import build_parser
from model_runtime.params import OPTIONS, make_params


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_option_accepts_its_range_and_refuses_just_beyond(name):
    option = OPTIONS[name]
    cast = int if name == "frames" else float
    make_params(**{name: cast(option.low)})
    inside_high = option.high * (1 - 1e-9) if option.high_open else option.high
    make_params(**{name: cast(inside_high) if name != "frames" else int(option.high)})
    below = option.low - max(abs(option.low) * 1e-3, 1)
    above = option.high if option.high_open else option.high * 1.01 + 1
    for value in (below, above):
        with pytest.raises(ParameterError, match=name):
            make_params(**{name: cast(value)})


@pytest.mark.parametrize("command", ["simulate", "reference"])
def test_the_cli_offers_every_option_with_the_runtimes_default_and_range(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    arguments = {a.dest: a for a in sub._actions}
    for name, option in OPTIONS.items():
        argument = arguments[name]
        assert f"{option.low:g} to {option.high:g}" in argument.help
        args = parser.parse_args([command, "m.obj", "--out", "o.npz"])
        assert getattr(args, name) == make_params.__kwdefaults__[name]


def test_a_still_scenes_parameters_read_as_before_the_scene_forces_existed():
    plain = make_params().to_dict()
    assert not {"frame_motion", "wind", "colliders"} & set(plain)
    windy = make_params(wind=[{"acceleration": [1.0, 0.0, 0.0]}]).to_dict()
    assert windy["wind"] == [{"acceleration": [1.0, 0.0, 0.0]}]
