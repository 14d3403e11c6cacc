"""Who may use the operators' console in Azure: an Entra ID app registration with the operator
app role cosmos-outbox checks, App Service Authentication on the app that serves the operators'
routes (the relay app when it is split off), signing in without a client secret (the app's
managed identity, trusted by a federated credential), and letting requests without a session
through to the app (the function and master keys keep working; the console refuses them)."""

from __future__ import annotations

from typing import Any

from cosmos_outbox_operators import OPERATOR_ROLE
from tests.deploy import templates as t
from tests.deploy.templates import DEPLOY, FUNCTION_APP_MODULE, MAIN

SIGNIN = DEPLOY / "modules" / "operators-signin.bicep"
AUTH = DEPLOY / "modules" / "appservice-auth.bicep"
SECRETLESS = "OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID"


def graph(symbol: str) -> dict[str, Any]:
    found: dict[str, Any] = t.parse(SIGNIN)["resources"][symbol]
    return found


def test_the_registration_declares_the_operator_role_the_package_checks() -> None:
    registration = graph("registration")
    assert registration["type"] == "Microsoft.Graph/applications"
    [role] = registration["config"]["appRoles"]
    assert role["value"] == "operatorRole"
    assert t.default(SIGNIN, "operatorRole") == OPERATOR_ROLE
    assert sorted(role["allowedMemberTypes"]) == ["Application", "User"]
    assert role["isEnabled"] is True
    assert registration["config"]["signInAudience"] == "AzureADMyOrg"
    [callback] = registration["config"]["web"]["redirectUris"]
    assert callback == "https://${consoleHostName}/.auth/login/aad/callback"


def test_sign_in_needs_no_secret_the_managed_identity_is_trusted() -> None:
    credential = graph("managedIdentityCredential")["config"]
    assert credential["subject"] == "identityPrincipalId"
    assert credential["audiences"] == ["api://AzureADTokenExchange"]
    assert credential["issuer"].endswith("${tenant().tenantId}/v2.0")
    settings = {
        s["name"]: s["value"] for s in t.variable(FUNCTION_APP_MODULE, "operatorsSignInSettings")
    }
    assert settings[SECRETLESS] == "identityClientId"
    auth = t.one("Microsoft.Web/sites/config", "authSettings")
    aad = auth.properties["identityProviders"]["azureActiveDirectory"]
    assert aad["registration"]["clientSecretSettingName"] == SECRETLESS
    assert aad["registration"]["clientId"] == "clientId"
    # no secret; and the owner's word that App Service Authentication signs operators in (the
    # package believes X-MS-CLIENT-PRINCIPAL only with it: cosmos_outbox_operators' identity)
    assert set(settings) == {
        SECRETLESS,
        "WEBSITE_AUTH_AAD_ALLOWED_TENANTS",
        "OUTBOX_CONSOLE_SIGN_IN",
    }
    assert settings["OUTBOX_CONSOLE_SIGN_IN"] == "app-service-authentication"


def test_app_service_authentication_lets_the_app_decide_route_by_route() -> None:
    """AllowAnonymous: the contact API's function keys and the operators' master key still
    reach the host; the app's signed-in door refuses requests without a principal."""
    auth = t.one("Microsoft.Web/sites/config", "authSettings")
    assert auth.config["name"] == "authsettingsV2" and auth.config["parent"] == "functionApp"
    assert auth.properties["platform"]["enabled"] is True
    assert auth.properties["globalValidation"] == {
        "requireAuthentication": False,
        "unauthenticatedClientAction": "AllowAnonymous",
    }
    assert auth.properties["httpSettings"]["requireHttps"] is True
    assert auth.properties["login"]["tokenStore"]["enabled"] is True
    module = t.modules(FUNCTION_APP_MODULE)["signIn"]
    assert module["path"] == AUTH.resolve() and module["condition"] == "operatorsSignIn"
    assert t.reference(module["params"]["siteName"]) == "site.name"
    assert module["params"]["clientId"] == "operatorsSignInClientId"
    assert t.default(FUNCTION_APP_MODULE, "operatorsSignInClientId") == ""


def test_the_console_signs_in_where_the_operators_routes_run() -> None:
    modules = t.modules(MAIN)
    signin = modules["operatorsSignInRegistration"]
    assert signin["path"] == SIGNIN.resolve() and signin["condition"] == "operatorsSignIn"
    assert signin["params"]["consoleHostName"] == "${consoleAppName}.azurewebsites.net"
    assert t.variable(MAIN, "consoleAppName") == {
        "operator": {
            "type": "conditional",
            "operands": {
                "condition": "splitRelay",
                "true_value": "relayAppName",
                "false_value": "appName",
            },
        }
    }
    assert modules["api"]["params"]["operatorsSignInClientId"]["operator"]["operands"] == {
        "condition": "splitRelay",
        "true_value": "",
        "false_value": "operatorsClientId",
    }
    assert modules["relay"]["params"]["operatorsSignInClientId"] == "operatorsClientId"
    assert t.default(MAIN, "operatorsSignIn") is True
    assert "OUTBOX_CONSOLE_URL" in t.parse(MAIN)["outputs"]


def test_the_graph_extension_is_pinned_in_bicepconfig() -> None:
    assert "microsoftGraphV1" in t.parse(SIGNIN)["extensions"]
    config = t.json_file(DEPLOY / "bicepconfig.json")
    assert config["extensions"]["microsoftGraphV1"].startswith(
        "br:mcr.microsoft.com/bicep/extensions/microsoftgraph/v1.0:"
    )
