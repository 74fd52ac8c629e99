import collections
import functools
import json
import os
from pathlib import Path

#: The xdist worker's name under ``pytest -n`` (make test); None in a plain pytest run.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")

# Under `pytest -n` (make test) each worker stands for one core: one torch thread that waits
# passively, in the worker and in every process it starts (servers, kernels, Ray workers).
# Set before torch loads its OpenMP runtime, which reads them once.
if WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # vLLM's CPU build otherwise binds its model's threads to cores of its own choosing and
    # sets their number itself: every engine on the same cores, two threads each, beside the
    # other workers. Unbound, an engine keeps the worker's one thread and the OS places it.
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import pytest  # noqa: E402 (after the thread settings above)
import torch  # noqa: E402

# Tests never reach a hub: everything they load is built here or shipped in a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch.set_num_threads(1 if WORKER else min(2, torch.get_num_threads()))
# vLLM's CPU build keeps one core for its scheduler by default: on a 2-core machine its model
# then runs on one. In a one-process run (make test PARALLEL=) the tests' engines and servers
# use every core (the vLLM tests took 1.45x less time on 2 cores; their answers are the same
# token for token, as they assert).
os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


@pytest.fixture(scope="session")
def tiny():
    from workbench.testing import tiny_lm

    return tiny_lm(seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A tiny random chat model (8 layers, width 64) saved as a model directory: what a
    notebook test loads by path where it asserts what the notebook does (its columns, files,
    figures and counts), not what the embedded model answers."""
    from workbench.testing import save_tiny, tiny_lm

    return str(save_tiny(tiny_lm(seed=0, layers=8, hidden=64), tmp_path_factory.mktemp("tiny")))


@pytest.fixture()
def wordnet():
    """The WordNet directory; the test is skipped, with the reason, where there is none."""
    from workbench.errors import WorkbenchError
    from workbench.taxonomy.wordnet import find_wordnet_dir

    try:
        return find_wordnet_dir()
    except WorkbenchError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def embedded():
    """The real embedded SmolLM2-135M-Instruct (dequantized once into the cache) with the default
    settings: ``dtype="auto"`` is the reproducible fp32, so answers compared here are the same
    on every CPU and batch."""
    from workbench.backends import load_model

    lm = load_model("smollm2-135m-instruct", device="cpu")
    assert lm.numerics == "reproducible"
    return lm


#: The target the embedded model's abstainers are prepared for across test files.
RIVER = "wn:09411430-n"


@pytest.fixture(scope="session")
def river_store(tmp_path_factory):
    """One fresh artifact store for the embedded model's river abstainers: SFT and SFT+DPO
    train once per test run (in the first test that prepares them) and every later test that
    prepares the same technique with the same settings reuses the adapters, as a user's
    store would."""
    from workbench.techniques import ArtifactStore

    return ArtifactStore(tmp_path_factory.mktemp("river-artifacts"))


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs whose workers run one passive-waiting thread each."""
    from workbench.experiments.executors import start_ray

    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    # as the ray executor starts it: again when a busy machine made Ray's start time out
    start_ray(
        ray,
        {
            "num_cpus": 2,
            "include_dashboard": False,
            "log_to_driver": False,
            "ignore_reinit_error": True,
            "runtime_env": {"env_vars": {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}},
        },
    )
    yield ray
    ray.shutdown()


#: Session fixtures that train: under ``pytest -n`` every test file that uses one runs on the
#: same worker, so the training happens once per run.
_TRAINED_ONCE = ("river_store",)
#: Seconds each test file took in a recorded run of the suite (``pytest -n auto
#: --record-durations`` rewrites it); ``pytest -n`` hands out the longest groups first, so no
#: worker starts a long file while the other has nothing left.
DURATIONS = Path(__file__).with_name("durations.json")
#: A file missing from the record: seconds per test by its heaviest mark.
_GUESS = {"vllm": 60.0, "browser": 30.0, "integration": 20.0, "notebook": 20.0}


def pytest_addoption(parser):
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each test file's total seconds to {DURATIONS.name} (orders pytest -n's work)",
    )


@functools.cache
def _group(path: str) -> str:
    """The worker group of a test file: the file, or the trained fixture it shares."""
    text = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    return next((name for name in _TRAINED_ONCE if name in text), path)


def pytest_xdist_make_scheduler(config, log):
    """``pytest -n`` (make test) hands out whole groups: a test file's tests share its module
    fixtures (a vLLM engine, a served model) on one worker."""
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(str(config.rootpath / nodeid.split("::", 1)[0]))

    return Groups(config, log)


def pytest_collection_modifyitems(config, items):
    """Under ``pytest -n`` the longest groups first (the scheduler hands them out in this
    order): seconds from the recorded run, or a guess by mark for a file it lacks."""
    if not WORKER:
        return
    recorded = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    tests_in = collections.Counter(item.path for item in items)
    seconds: dict[str, float] = {}
    for item in items:
        file = item.path.relative_to(config.rootpath).as_posix()
        if file in recorded:
            guess = recorded[file] / tests_in[item.path]
        else:
            marks = {mark.name for mark in item.iter_markers()}
            guess = max([_GUESS.get(m, 0.2) for m in marks] or [0.2])
        name = _group(str(item.path))
        seconds[name] = seconds.get(name, 0.0) + guess
    items.sort(key=lambda item: -seconds[_group(str(item.path))])


_recorded: dict[str, float] = {}


def pytest_runtest_logreport(report):
    file = report.nodeid.split("::", 1)[0]
    _recorded[file] = _recorded.get(file, 0.0) + report.duration


def pytest_sessionfinish(session):
    if session.config.getoption("--record-durations") and not WORKER:
        ranked = sorted(_recorded.items(), key=lambda kv: -kv[1])
        DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in ranked}, indent=1) + "\n")
