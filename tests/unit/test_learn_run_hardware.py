"""`sizing run --endpoint URL --hardware INSTANCE_TYPE`: the server's figures are attributed to the hardware it
runs on; a bad --hardware is refused before anything starts."""

from __future__ import annotations

import pytest

from sizing.cli import main


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--hardware", "g6e.xlarge"], "give --endpoint URL too"),
        (["--endpoint", "http://127.0.0.1:9"], "--endpoint needs --hardware INSTANCE_TYPE"),
        (["--served-model", "tiny-llama"], "give --endpoint URL too"),
        (["--endpoint", "http://127.0.0.1:9", "--hardware", "g9z.huge"], "unknown instance type 'g9z.huge'"),
    ],
)
def test_a_bad_hardware_is_refused_naming_the_option(examples_dir, capsys, args, said):
    # given the example chatbot spec and a --hardware the run cannot use
    spec = str(examples_dir / "chatbot.yaml")

    # when the run is asked for
    code = main(["run", spec, *args])

    # then it exits 2 before starting anything, saying what to fix
    err = capsys.readouterr().err
    assert code == 2
    assert said in err and "Traceback" not in err


def test_hardware_restricts_the_estimate_to_the_servers_instance_type():
    # given a spec allowing any instance type
    from sizing.commands.run import _on_hardware

    raw = {"model": "m", "constraints": {"region": "us-east-1"}}

    # when the run is told the server runs on an ml.g6e.xlarge
    got = _on_hardware(raw, "ml.g6e.xlarge", "http://127.0.0.1:8000")

    # then the estimate considers only that instance type, other constraints kept
    assert got["constraints"] == {"region": "us-east-1", "instance_types": ["g6e.xlarge"]}
