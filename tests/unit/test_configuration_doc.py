"""The configuration reference is written from the settings classes, and each deployable's
own settings stop a bad start naming the variable."""

from __future__ import annotations

import re

import pytest

from cli import configuration
from services.common.settings import SectionSettings, Settings, SettingsError, load_section
from services.edge.settings import EdgeSettings
from services.matchmaking.settings import MatchmakingSettings
from services.table.settings import TableServiceSettings
from shared.retry import ClientRetrySettings
from workers.config import WorkerSettings

pytestmark = pytest.mark.unit


def test_the_committed_reference_is_the_generated_one() -> None:
    assert configuration.DOC.read_text() == configuration.render(), (
        "docs/configuration.md is out of date: run python -m cli.configuration"
    )


def test_every_section_class_is_in_the_reference() -> None:
    documented = {cls for _, cls in configuration.SECTIONS}
    assert set(SectionSettings.__subclasses__()) <= documented
    assert {Settings, ClientRetrySettings} <= documented


def test_every_variable_has_a_row_with_a_description() -> None:
    text = configuration.render()
    rows = re.findall(r"^\| `([A-Z_]+)` \| [^|]+ \| [^|]+ \| (.+) \|$", text, re.MULTILINE)
    assert {name for name, _ in rows} | {
        name for name in configuration.variables() if name.endswith("_FILE")
    } == set(configuration.variables())
    assert all(len(description) > 10 for _, description in rows)


def test_defaults_are_the_historical_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # Operators' manifests rely on them (values from before the settings classes).
    for name in configuration.variables():
        monkeypatch.delenv(name, raising=False)
    table = TableServiceSettings()
    assert (table.enqueue, table.await_lone_creator, table.finished_table_ttl_s) == (
        True,
        True,
        86_400,
    )
    assert (table.phase_durability, table.durable_replicas, table.durability_timeout_ms) == (
        "auto",
        0,
        2000,
    )
    assert table.durability_probe_s == 2.0
    assert MatchmakingSettings().key_prefix == "kishpa:mm"
    edge = EdgeSettings()
    assert (edge.port, edge.host, edge.origins(), edge.web_root) == (8080, "0.0.0.0", set(), "")
    assert WorkerSettings().model_dump() == {
        "visibility_timeout_s": 10,
        "settle_deadline_s": 5.0,
        "sweep_interval_s": 2.0,
        "reindex_interval_s": 60.0,
        "reconcile_interval_s": 60.0,
        "stall_after_s": 60.0,
        "drift_interval_s": 300.0,
        "drift_queue_name": "",
        "drift_lag_s": 30.0,
    }
    assert ClientRetrySettings().budget_s == 30.0
    settings = Settings()
    assert (settings.uvloop, settings.worker_queue) == (True, "kishpa")


@pytest.mark.parametrize(
    ("cls", "variable", "value"),
    [
        (TableServiceSettings, "KISHPA_PHASE_DURABILITY", "always"),
        (TableServiceSettings, "KISHPA_DURABILITY_TIMEOUT_MS", "0"),
        (TableServiceSettings, "KISHPA_FINISHED_TABLE_TTL_S", "a day"),
        (TableServiceSettings, "KISHPA_AWAIT_LONE_CREATOR", "maybe"),
        (WorkerSettings, "KISHPA_VISIBILITY_TIMEOUT", "1"),
        (WorkerSettings, "KISHPA_SWEEP_INTERVAL", "-2"),
        (EdgeSettings, "KISHPA_EDGE_PORT", "70000"),
    ],
)
def test_a_bad_value_fails_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, cls: type[SectionSettings], variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        load_section(cls)


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KISHPA_PHASE_DURABILITY", "")
    assert load_section(TableServiceSettings).phase_durability == "auto"


def test_the_processes_refuse_to_start_with_a_bad_own_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli import worker_cmd
    from services.table import server as table_server

    monkeypatch.setenv("KISHPA_TOKEN_SECRET", "t" * 40)
    monkeypatch.setenv("KISHPA_SERVICE_SECRET", "s" * 40)
    monkeypatch.setenv("KISHPA_DURABILITY_PROBE_S", "often")
    with pytest.raises(SettingsError, match="KISHPA_DURABILITY_PROBE_S"):
        table_server.main()  # before any loop, Redis or port
    monkeypatch.setenv("KISHPA_VISIBILITY_TIMEOUT", "1")
    assert not worker_cmd._check_settings("worker")
    assert "KISHPA_VISIBILITY_TIMEOUT" in capsys.readouterr().err
