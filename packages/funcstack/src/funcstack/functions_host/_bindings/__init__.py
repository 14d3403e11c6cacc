"""Bindings as the Functions host has them: the app's input and output bindings, read and
written by the host around each invocation with the binding data the host sends the worker,
one file per binding type, each opening with what the host's extension does and its source:

* ``plan``: the app's bindings planned when it is indexed (what is served, what is refused and
  why: the app does not start), and run around each invocation (``HostBindings``);
* ``base``: a binding's declaration as the host reads it, the errors, an input's and an
  output's shape;
* ``expressions``: binding data and ``{...}`` expressions (SQL parameters for Cosmos DB);
* ``values``: a value as the host holds it and what each binding's script type makes of it;
* ``clients``: the SDK clients, one per connection (``_connections`` reads the settings);
* ``cosmos``: Cosmos DB input (by id, by query) and output (upserts, createIfNotExists);
* ``servicebus``: Service Bus output (queue or topic);
* ``storage_queue``: Storage queue output;
* ``blob``: blob input and output;
* ``http``: which value answers the HTTP caller (the HTTP output by name, or none).

The blob *trigger* is beside the other triggers (``_blob_trigger.py``).
"""
