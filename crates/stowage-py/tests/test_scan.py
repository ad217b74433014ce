"""stowage.scan: the same JSON as `stowage scan --json`."""

import json
import os
import pathlib
import subprocess

import pytest
import torch

import stowage

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_scan_names_unsafe_globals_and_clean_files(fixtures, tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "clean.pt")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    report = stowage.scan(tmp_path / "clean.pt", tmp_path / "module.pt", fixtures / "hostile" / "os_system.pt")
    files = {pathlib.Path(f["path"]).name: f for f in report["files"]}
    assert all(g["verdict"] == "allowed" for g in files["clean.pt"]["globals"])
    assert any(g["verdict"] == "unsafe" and g["module"].startswith("torch.nn") for g in files["module.pt"]["globals"])
    assert any(
        g["verdict"] == "unsafe" and (g["module"], g["name"]) in {("posix", "system"), ("os", "system")}
        for g in files["os_system.pt"]["globals"]
    ), files["os_system.pt"]["globals"]


def test_unsafe_globals_say_whether_they_run_code(fixtures, tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    report = stowage.scan(tmp_path / "module.pt", fixtures / "hostile" / "os_system.pt")
    module, evil = report["files"]
    risks = {g["risk"] for g in module["globals"] if g["verdict"] == "unsafe"}
    assert risks == {"import"}
    assert all(g["risk"] is None for g in module["globals"] if g["verdict"] != "unsafe")
    assert any(g["risk"] == "code" and g["name"] == "system" for g in evil["globals"])


def test_an_unreadable_file_is_reported_not_raised(tmp_path):
    report = stowage.scan(tmp_path / "absent.pt")
    assert report["files"][0]["error"]


def _cli():
    for profile in ("debug", "release"):
        exe = ROOT / "target" / profile / "stowage"
        if exe.exists():
            return exe
    return None


@pytest.mark.skipif(_cli() is None, reason="the stowage binary is not built (cargo build -p stowage-cli)")
def test_scan_is_the_cli_json(fixtures):
    paths = [fixtures / "state_dict.pt", fixtures / "hostile" / "os_system.pt", fixtures / "wild"]
    run = subprocess.run([str(_cli()), "scan", "--json", *map(os.fspath, paths)], capture_output=True, text=True)
    assert json.loads(run.stdout) == stowage.scan(*paths)


def test_sarif_reads_in_sarif_consumers(tmp_path):
    """format="sarif": a SARIF 2.1.0 log that a model of the standard's
    schema (sarif-pydantic) validates and Microsoft's sarif-tools reads,
    with one result per unsafe global, by severity (issue 38)."""
    sarif_pydantic = pytest.importorskip("sarif_pydantic")
    sarif_loader = pytest.importorskip("sarif.loader")

    class Gadget:
        def __reduce__(self):
            import uuid

            return (uuid._get_command_stdout, ("id",))

    torch.save({"x": Gadget()}, tmp_path / "gadget.pt")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pt")
    log = stowage.scan(tmp_path, format="sarif")
    assert log["version"] == "2.1.0"
    sarif_pydantic.Sarif.model_validate(log)
    path = tmp_path / "out.sarif"
    path.write_text(json.dumps(log))
    results = sarif_loader.load_sarif_file(str(path)).get_records()
    by_code = sorted((r["Code"], r["Severity"]) for r in results)
    assert by_code == [
        ("unsafe-global/code", "error"),
        ("unsafe-global/import", "warning"),
    ], results
    code = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "unsafe-global/code")
    assert code["properties"]["module"] == "uuid"
    assert code["properties"]["record"].endswith("data.pkl")
    # torch.save stores data.pkl plainly: the byte offset is in the file.
    at = code["locations"][0]["physicalLocation"]["region"]["byteOffset"]
    data = (tmp_path / "gadget.pt").read_bytes()
    assert data[at : at + 5] == b"cuuid", data[at : at + 16]
    with pytest.raises(ValueError):
        stowage.scan(tmp_path, format="xml")
