import os
import sys

# Tests run offline: nothing may be fetched from the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption(
        "--dist-backend",
        choices=["gloo", "nccl"],
        default=None,
        help="Backend of the multi-process tests that support it (default gloo on CPU; nccl: one GPU per "
        "process, as scripts/gpu_check.sh runs them). Sets HDET_TEST_BACKEND for the launched workers.",
    )


def pytest_configure(config):
    chosen = config.getoption("--dist-backend")
    if chosen is not None:
        os.environ["HDET_TEST_BACKEND"] = chosen
