"""A path parameter refused says the form the route takes: an identifier's (letters, digits,
'.', '_', '-'), or its own pattern's. A failure group's id (12 hexadecimal digits) was refused
saying it "must be 1-12 letters, digits, '.', '_' or '-'": a value of that form was refused too."""

from __future__ import annotations

import json

import azure.functions as func

from cosmos_outbox.http import HttpApi, HttpCall, PathParameter, Reply
from cosmos_outbox_testing import FunctionClient


def test_a_refused_path_parameter_names_the_form_its_route_takes() -> None:
    api = HttpApi(
        parameters={
            "id": PathParameter("id", "the thing's id"),
            "groupId": PathParameter(
                "groupId", "the group's id", pattern=r"^[0-9a-f]{12}$", max_length=12
            ),
        },
        auth_level=func.AuthLevel.ANONYMOUS,
    )

    @api.operation(route="things/{id}", method="GET", summary="a thing", status=200, errors=(400,))
    def thing(call: HttpCall[None]) -> Reply:
        return Reply({"id": call.path["id"]})

    @api.operation(
        route="groups/{groupId}", method="GET", summary="a group", status=200, errors=(400,)
    )
    def group(call: HttpCall[None]) -> Reply:
        return Reply({"id": call.path["groupId"]})

    app = func.FunctionApp()
    app.register_functions(api.blueprint)
    client = FunctionClient(app)
    try:
        refused = json.loads(client.request("GET", "groups/g-none").get_body())
        assert refused["detail"] == (
            "the group's id must be at most 12 characters matching ^[0-9a-f]{12}$"
        ), refused
        assert client.request("GET", f"groups/{'0' * 12}").status_code == 200
        refused = json.loads(client.request("GET", "things/-x").get_body())
        assert refused["detail"].startswith("the thing's id must be 1-"), refused
        assert "letters, digits, '.', '_' or '-'" in refused["detail"]
    finally:
        client.close()
