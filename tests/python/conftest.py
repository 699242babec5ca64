import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))  # reference.py

import vkattn  # noqa: E402  (from the build tree: ctest sets PYTHONPATH)


@pytest.fixture(scope="session")
def context():
    """One Context for the session: lavapipe JIT-compiles each pipeline once, the tests reuse them."""
    return vkattn.default_context()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
