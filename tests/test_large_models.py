"""External data: the layout is kept beside IN (elsewhere, the weights go to
a file named after OUT), weights are never read into memory,
models over 2 GB round-trip, and a missing data file is a clear error."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

import numpy as np
import onnx
import pytest

from lowering.cli import main
from tests.helpers import assert_same, op_types, peak_rss_mib, run, weighted_model


def _locations(path: pathlib.Path) -> set[str]:
    model = onnx.load(path, load_external_data=False)
    return {
        entry.value
        for tensor in model.graph.initializer
        for entry in tensor.external_data
        if entry.key == "location"
    }


def _weights(path: pathlib.Path) -> np.ndarray:
    model = onnx.load(path)
    return onnx.numpy_helper.to_array(model.graph.initializer[0])


def test_layout_is_kept_beside_the_input(tmp_path):
    source = weighted_model(tmp_path, 3, 4, real=True)
    assert main(["-q", str(source), str(tmp_path / "out.onnx")]) == 0
    assert _locations(tmp_path / "out.onnx") == {"weights.bin"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "out.onnx", "weights.bin"]


def test_another_folder_gets_the_weights_in_a_file_named_after_out(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    source = weighted_model(tmp_path / "in", 3, 1024, real=True)
    target = tmp_path / "out" / "lowered.onnx"
    assert main(["-q", str(source), str(target)]) == 0
    assert _locations(target) == {"lowered.onnx.data"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "lowered.onnx",
        "lowered.onnx.data",
    ]
    np.testing.assert_array_equal(_weights(target), _weights(source))
    x = [np.ones(1024, np.float32)]
    assert_same(run(onnx.load(target), {"x": x}), [[x[0] * _weights(source)]])


def test_external_data_option_chooses_the_file(tmp_path):
    source = weighted_model(tmp_path, 3, 1024, real=True)
    target = tmp_path / "out.onnx"
    assert main(["-q", "--external-data", "all.bin", str(source), str(target)]) == 0
    assert _locations(target) == {"all.bin"}
    np.testing.assert_array_equal(_weights(target), _weights(source))


def test_missing_data_file_is_a_clear_error(tmp_path, capsys):
    source = weighted_model(tmp_path, 1, 4, real=True)
    os.unlink(tmp_path / "weights.bin")
    assert main([str(source), str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert "external data file 'weights.bin'" in err and "missing" in err
    assert not (tmp_path / "out.onnx").exists()


def _need_disk(folder: pathlib.Path, gib: float) -> None:
    free = shutil.disk_usage(folder).free
    if free < gib * 1024**3:
        pytest.skip(f"needs {gib:g} GiB of free disk, {free / 1024**3:.1f} GiB free here")


@pytest.mark.slow
@pytest.mark.parametrize("elsewhere", [False, True])
def test_one_gib_of_weights_is_lowered_in_little_memory(tmp_path, elsewhere):
    _need_disk(tmp_path, 1.5 if elsewhere else 0.1)  # the copy is written out in full
    source = weighted_model(tmp_path, 16, 16 * 1024 * 1024, real=False)  # 16 x 64 MiB
    target_dir = tmp_path / "out" if elsewhere else tmp_path
    target_dir.mkdir(exist_ok=True)
    target = target_dir / "lowered.onnx"
    rss = peak_rss_mib([sys.executable, "-m", "lowering", "-q", str(source), str(target)])
    assert rss < 300, f"peak RSS {rss:.0f} MiB"
    assert "SequenceMap" not in op_types(onnx.load(target, load_external_data=False))
    data = "lowered.onnx.data" if elsewhere else "weights.bin"  # named after OUT elsewhere
    assert (target_dir / data).stat().st_size == 1024**3


@pytest.mark.slow
def test_a_model_over_2_gib_round_trips(tmp_path):
    source = weighted_model(tmp_path, 35, 16 * 1024 * 1024, real=False)  # 35 x 64 MiB = 2.19 GiB
    target = tmp_path / "lowered.onnx"  # beside the input: no copy of 2 GiB of zeros
    assert main(["-q", str(source), str(target)]) == 0
    assert _locations(target) == {"weights.bin"}
    onnx.checker.check_model(str(target))  # by path: the model is over 2 GB with its data
    lowered = onnx.load(target, load_external_data=False)
    original = onnx.load(source, load_external_data=False)
    assert [t.SerializeToString() for t in lowered.graph.initializer] == [
        t.SerializeToString() for t in original.graph.initializer
    ]
    assert "SequenceMap" not in op_types(lowered)
