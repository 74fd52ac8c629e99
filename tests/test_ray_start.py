"""Starting a local Ray cluster on a busy machine: Ray's fixed start-up deadline missed is tried
again, and a cluster that never starts is one line (a stand-in for Ray: no processes)."""

import pytest

from workbench.errors import ConfigError
from workbench.experiments.executors import start_ray

TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)


class FakeRay:
    """``init`` fails with Ray's start-up timeout ``fails`` times, then starts."""

    def __init__(self, fails: int, error: str = TIMED_OUT):
        self.fails, self.error = fails, error
        self.calls: list[str] = []

    def init(self, **kwargs):
        self.calls.append("init")
        if self.fails:
            self.fails -= 1
            raise Exception(self.error)  # what Ray raises for it

    def shutdown(self):
        self.calls.append("shutdown")


def test_a_start_that_timed_out_is_tried_again_after_a_shutdown():
    ray = FakeRay(fails=2)
    start_ray(ray, {"num_cpus": 2})
    assert ray.calls == ["init", "shutdown", "init", "shutdown", "init"]


def test_a_cluster_that_never_starts_is_one_line():
    ray = FakeRay(fails=5)
    with pytest.raises(ConfigError) as e:
        start_ray(ray, {"num_cpus": 2}, attempts=2)
    assert ray.calls == ["init", "shutdown", "init", "shutdown"]
    assert "\n" not in str(e.value) and "did not start" in str(e.value)


@pytest.mark.parametrize(
    "kwargs, error",
    [({"address": "ray://far:10001"}, TIMED_OUT), ({"num_cpus": 2}, "something else")],
)
def test_other_failures_and_remote_clusters_are_not_retried(kwargs, error):
    ray = FakeRay(fails=1, error=error)
    with pytest.raises(Exception, match=error[:20]):
        start_ray(ray, kwargs)
    assert ray.calls == ["init"]
