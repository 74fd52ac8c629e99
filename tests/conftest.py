import os

import pytest
import torch

# Tests never reach a hub: everything they load is built here or shipped in a package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))
# vLLM's CPU build keeps one core for its scheduler by default: on a 2-core machine its model
# then runs on one. The tests' engines and servers use every core (the vLLM tests took 1.45x
# less time on 2 cores; their answers are the same token for token, as they assert).
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
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        ignore_reinit_error=True,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}},
    )
    yield ray
    ray.shutdown()
