"""The Cosmos DB trigger, one room: the listener the runner starts for a ``cosmosDBTrigger``
function (``listener``) and the change feed processor's parts it drives, one file each, as the
.NET processor has them (Azure/azure-cosmos-dotnet-v3, ``ChangeFeedProcessorCore``):

* ``options``: the binding's settings read and checked as the extension reads them;
* ``lease_store``: leases in the processor's schema, every update conditional (``If-Match``);
* ``lease_balancer``: equal-partitions balancing with stealing;
* ``lease_processing``: one loop per owned lease, checkpoint after success, the retry policy;
* ``lease_split``: a split parent's lease replaced by its children's, the continuation carried;
* ``continuation``: the change feed's continuation per feed range.

Nothing is imported here: the runner imports ``listener`` when an app has a function of this
trigger type (a host of an HTTP-only app never loads the Cosmos DB SDK)."""
