import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "crates" / "stowage" / "tests" / "fixtures"


@pytest.fixture(scope="session")
def fixtures() -> pathlib.Path:
    return FIXTURES
