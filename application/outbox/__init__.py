"""The outbox, generic over aggregates: outbox records and their messages (`records`), the relay
(`relay`), the backlog estimate (`backlog`), telemetry (`telemetry`), the operators' use cases
(`operators`) and their API models (`views`), and the ports they need (`ports`). Nothing here
knows a particular aggregate; `entrypoints.outbox` serves it as a Functions blueprint."""
