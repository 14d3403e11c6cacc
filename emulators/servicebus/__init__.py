"""Local Azure Service Bus endpoint: an AMQP 1.0 server the unmodified azure-servicebus SDK uses.

State is in memory only: stopping the process loses undelivered messages and the duplicate
detection history. See ``server.py`` for the supported subset.
"""
