"""0.4's paths to the operators' routes and the test kit work in cosmos-outbox 0.5 with a
DeprecationWarning naming the new one (removed in 0.6), this package installed: the same objects
as the new paths give."""

from __future__ import annotations

import importlib

import azure.functions as func
import pytest

import cosmos_outbox_operators
import cosmos_outbox_operators.cli
import cosmos_outbox_testing
import cosmos_outbox_testing.contracts
from cosmos_outbox import Outbox
from cosmos_outbox_operators import Operators
from cosmos_outbox_testing import FunctionClient, in_memory


@pytest.mark.parametrize(
    ("old", "name", "new"),
    [
        ("cosmos_outbox.operators", "OperatorModels", cosmos_outbox_operators),
        ("cosmos_outbox.operators", "OPERATOR_ROLE", cosmos_outbox_operators),
        ("cosmos_outbox.cli", "OperatorsApi", cosmos_outbox_operators.cli),
        ("cosmos_outbox.cli", "parser", cosmos_outbox_operators.cli),
        ("cosmos_outbox.testing", "in_memory", cosmos_outbox_testing),
    ],
)
def test_a_moved_name_warns_and_is_the_new_one(old: str, name: str, new: object) -> None:
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} is deprecated .*0\.6"):
        assert getattr(module, name) is getattr(new, name)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("cosmos_outbox.testing", cosmos_outbox_testing),
        ("cosmos_outbox.testing.contracts", cosmos_outbox_testing.contracts),
    ],
)
def test_every_name_of_the_kit_is_reached_by_its_old_path_and_no_other(
    old: str, new: object
) -> None:
    module = importlib.import_module(old)
    for name in getattr(new, "__all__"):  # noqa: B009 (a module's)
        with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} is deprecated"):
            assert getattr(module, name) is getattr(new, name)
    with pytest.raises(AttributeError):
        getattr(module, "not_a_name_of_the_kit")  # noqa: B009 (asked as a caller would)


def test_the_old_blueprint_and_the_unasked_routes_warn_and_serve_the_same_functions() -> None:
    memory = in_memory()
    outbox = Outbox(services=lambda: memory.services)
    asked = {
        f.get_function_name()
        for f in outbox.function_app(Operators(), title="t", relay=False).get_functions()
    }
    with pytest.warns(DeprecationWarning, match="registering the operators' routes unasked"):
        unasked = outbox.function_app(title="t", relay=False)
    assert {f.get_function_name() for f in unasked.get_functions()} == asked
    with pytest.warns(DeprecationWarning, match=r"Outbox\.operators_blueprint is deprecated"):
        blueprint = outbox.operators_blueprint(route_prefix="ops")
    app = func.FunctionApp()
    app.register_functions(blueprint)
    with FunctionClient(app) as client:
        assert client.request("GET", "ops/status").status_code == 200
    # said: no warning, no operators' routes
    quiet = outbox.function_app(title="t", relay=False, operators=False)
    assert not {f.get_function_name() for f in quiet.get_functions()} & {"outbox_status"}
