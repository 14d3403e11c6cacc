"""Stands in for the ``servicebus_preparer`` module of the azure-servicebus suite (in its
tests folder): the same preparer names and keyword arguments, but entities are created on the
local Service Bus endpoint (its control channel) instead of through Azure Resource Manager.

The namespace is ``localhost`` with no suffix, so the suite's
``f"{servicebus_namespace.name}{SERVICEBUS_ENDPOINT_SUFFIX}"`` reaches the endpoint's amqps
listener on 5671, whose certificate the conformance run trusts.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from devtools_testutils import AzureMgmtPreparer, FakeResource
from devtools_testutils.resource_testcase import RESOURCE_GROUP_PARAM

from funcstack.servicebus import control_request

SERVICEBUS_DEFAULT_AUTH_RULE_NAME = "RootManageSharedAccessKey"
SERVICEBUS_NAMESPACE_PARAM = "servicebus_namespace"
SERVICEBUS_TOPIC_PARAM = "servicebus_topic"
SERVICEBUS_SUBSCRIPTION_PARAM = "servicebus_subscription"
SERVICEBUS_QUEUE_PARAM = "servicebus_queue"
SERVICEBUS_AUTHORIZATION_RULE_PARAM = "servicebus_authorization_rule"
SERVICEBUS_QUEUE_AUTHORIZATION_RULE_PARAM = "servicebus_queue_authorization_rule"
SERVICEBUS_ENDPOINT_SUFFIX = ""
NAMESPACE = "localhost"
KEY = "SAS_KEY_VALUE"
CONNECTION_STRING = (
    f"Endpoint=sb://{NAMESPACE}/;SharedAccessKeyName={SERVICEBUS_DEFAULT_AUTH_RULE_NAME};"
    f"SharedAccessKey={KEY}"
)


def _control(payload: dict[str, Any]) -> None:
    host, port = os.environ["CONFORMANCE_SERVICEBUS_CONTROL"].rsplit(":", 1)
    control_request(host, int(port), payload)


class ServiceBusResourceGroupPreparer(AzureMgmtPreparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False, **kwargs: Any) -> None:
        super().__init__(name_prefix)
        self.parameter_name = kwargs.get("parameter_name", RESOURCE_GROUP_PARAM)

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {self.parameter_name: FakeResource(name=name, id=name)}


class ServiceBusNamespacePreparer(AzureMgmtPreparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False, **kwargs: Any) -> None:
        super().__init__(name_prefix)
        self.parameter_name = kwargs.get("parameter_name", SERVICEBUS_NAMESPACE_PARAM)

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        p = self.parameter_name
        return {
            p: FakeResource(name=NAMESPACE, id=NAMESPACE),
            f"{p}_connection_string": CONNECTION_STRING,
            f"{p}_key_name": SERVICEBUS_DEFAULT_AUTH_RULE_NAME,
            f"{p}_primary_key": KEY,
            f"{p}_authorization_rule_name": SERVICEBUS_DEFAULT_AUTH_RULE_NAME,
        }


def _iso(value: Any) -> str:
    return str(value)


class ServiceBusQueuePreparer(AzureMgmtPreparer):
    def __init__(
        self,
        name_prefix: str = "",
        use_cache: bool = False,
        requires_duplicate_detection: bool = False,
        dead_lettering_on_message_expiration: bool = False,
        requires_session: bool = False,
        enable_partitioning: bool = False,
        lock_duration: str = "PT30S",
        parameter_name: str = SERVICEBUS_QUEUE_PARAM,
        **kwargs: Any,
    ) -> None:
        super().__init__(name_prefix)
        self.parameter_name = parameter_name
        self.properties = {
            "RequiresDuplicateDetection": requires_duplicate_detection,
            "DeadLetteringOnMessageExpiration": dead_lettering_on_message_expiration,
            "RequiresSession": requires_session,
            "LockDuration": _iso(lock_duration),
            "MaxDeliveryCount": 10,
        }

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        _control({"op": "create-queue", "name": name, "properties": self.properties})
        return {self.parameter_name: FakeResource(name=name, id=name)}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        _control({"op": "delete", "name": name})


class ServiceBusTopicPreparer(AzureMgmtPreparer):
    def __init__(
        self,
        name_prefix: str = "",
        use_cache: bool = False,
        parameter_name: str = SERVICEBUS_TOPIC_PARAM,
        **kwargs: Any,
    ) -> None:
        super().__init__(name_prefix)
        self.parameter_name = parameter_name

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        _control({"op": "create-topic", "name": name, "properties": {}})
        return {self.parameter_name: FakeResource(name=name, id=name)}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        _control({"op": "delete", "name": name})


class ServiceBusSubscriptionPreparer(AzureMgmtPreparer):
    def __init__(
        self,
        name_prefix: str = "",
        use_cache: bool = False,
        parameter_name: str = SERVICEBUS_SUBSCRIPTION_PARAM,
        servicebus_topic_parameter_name: str = SERVICEBUS_TOPIC_PARAM,
        requires_session: bool = False,
        lock_duration: str = "PT60S",
        **kwargs: Any,
    ) -> None:
        super().__init__(name_prefix)
        self.parameter_name = parameter_name
        self.topic_parameter = servicebus_topic_parameter_name
        self.properties = {
            "RequiresSession": requires_session,
            "LockDuration": _iso(lock_duration),
            "MaxDeliveryCount": 10,
        }

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        topic = kwargs[self.topic_parameter].name
        _control(
            {
                "op": "create-subscription",
                "topic": topic,
                "name": name,
                "properties": self.properties,
            }
        )
        return {self.parameter_name: FakeResource(name=name, id=name)}


class ServiceBusNamespaceAuthorizationRulePreparer(AzureMgmtPreparer):
    """Authorization rules are not enforced locally: the namespace's connection string."""

    def __init__(
        self,
        name_prefix: str = "",
        use_cache: bool = False,
        access_rights: Any = None,
        parameter_name: str = SERVICEBUS_AUTHORIZATION_RULE_PARAM,
        **kwargs: Any,
    ) -> None:
        super().__init__(name_prefix)
        self.parameter_name = parameter_name

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {
            self.parameter_name: FakeResource(name=name, id=name),
            f"{self.parameter_name}_connection_string": CONNECTION_STRING,
        }


class ServiceBusQueueAuthorizationRulePreparer(ServiceBusNamespaceAuthorizationRulePreparer):
    def __init__(
        self,
        name_prefix: str = "",
        use_cache: bool = False,
        access_rights: Any = None,
        parameter_name: str = SERVICEBUS_QUEUE_AUTHORIZATION_RULE_PARAM,
        **kwargs: Any,
    ) -> None:
        super().__init__(name_prefix, parameter_name=parameter_name)


CachedServiceBusResourceGroupPreparer = functools.partial(
    ServiceBusResourceGroupPreparer, use_cache=True
)
CachedServiceBusNamespacePreparer = functools.partial(ServiceBusNamespacePreparer, use_cache=True)
CachedServiceBusQueuePreparer = functools.partial(ServiceBusQueuePreparer, use_cache=True)
CachedServiceBusTopicPreparer = functools.partial(ServiceBusTopicPreparer, use_cache=True)
CachedServiceBusSubscriptionPreparer = functools.partial(
    ServiceBusSubscriptionPreparer, use_cache=True
)
